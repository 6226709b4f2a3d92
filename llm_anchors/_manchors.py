"""`MAnchorsExplainer`: Anchors with a memory of earlier explanations.

MAnchors (ICML 2026, Algorithms 1–3). For an input whose nearest remembered
input (same model, same predicted label) is similar enough (cosine ≥
``tau_sim``), the remembered intermediate rule is mapped word by word onto
the most similar words of the new input (horizontal transformation, HT),
words that add nothing are pruned by light sampling, and the beam search
resumes from the result (vertical transformation, VT), with Anchors' τ, δ
guarantees. Otherwise plain Anchors runs and the intermediate rule it
passed through (the shortest rule on the path to the answer whose
estimated precision ≥ ``tau_mid``) is remembered.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ._classifier import Classifier
from ._embeddings import SentenceEmbedder
from ._exceptions import ConfigError
from ._explainer import AnchorsExplainer, Progress, _Run
from ._explanation import Explanation
from ._memory import MemoryEntry, RuleMemory
from ._rules import Rule
from ._search import RuleStats
from ._text import TextInstance

__all__ = ["MAnchorsExplainer", "MemoryFeatures", "TextMemoryFeatures"]


@runtime_checkable
class MemoryFeatures(Protocol):
    """What MAnchors needs of a kind of input: a memory key and an HT.

    ``embed`` gives unit vectors (compared by cosine); ``describe`` what an
    entry keeps of its rule's features for HT; ``horizontal`` maps a
    remembered rule onto the positions of a new input's features. The
    tabular and image samplers implement it; text uses `TextMemoryFeatures`.
    """

    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, instances: Sequence[Any]) -> np.ndarray: ...

    def describe(self, instance: Any, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]: ...

    def horizontal(self, entry: MemoryEntry, instance: Any) -> list[int]: ...


class TextMemoryFeatures:
    """Text: sentence vectors as the key, HT by WordPiece cosine of words."""

    def __init__(self, embedder: SentenceEmbedder) -> None:
        self.embedder = embedder

    @property
    def identity(self) -> str:
        return self.embedder.identity

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, instances: Sequence[TextInstance]) -> np.ndarray:
        return self.embedder.embed([i.text for i in instances])

    def describe(self, instance: TextInstance, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]:
        return ()  # the words themselves are remembered

    def horizontal(self, entry: MemoryEntry, instance: TextInstance) -> list[int]:
        return self.map_words(entry.rule_words, instance)

    def map_words(self, rule_words: Sequence[str], instance: TextInstance) -> list[int]:
        """Each rule word → the position of the most similar unused word of ``instance``.

        Similarity is the cosine of WordPiece vectors; an identical word
        (case aside) always wins; ties go to the earlier position.
        """
        if not rule_words:
            return []
        words = list(instance.words)
        sims = self.embedder.word_vectors(list(rule_words)) @ self.embedder.word_vectors(words).T
        lower = [w.lower() for w in words]
        used: list[int] = []
        for i, word in enumerate(rule_words):
            free = [j for j in range(len(words)) if j not in used]
            if not free:
                break
            exact = [j for j in free if lower[j] == word.lower()]
            used.append(exact[0] if exact else max(free, key=lambda j: (sims[i, j], -j)))
        return used


class MAnchorsExplainer(AnchorsExplainer):
    """`AnchorsExplainer` that remembers, and reuses, intermediate rules.

    tau_sim: cosine similarity of the inputs' memory vectors above which a
        remembered input is reused (0.6).
    tau_mid: precision of the intermediate rule remembered on a miss (0.8).
    prune_samples: perturbations per rule when pruning the HT rule.
    embedder: for text, the `SentenceEmbedder` (default: packaged
        all-MiniLM-L6-v2). A sampler that implements `MemoryFeatures`
        (`TabularSampler`, `ImageSampler`) brings its own key and HT.
    Other arguments as `AnchorsExplainer`. The memory lives in the
    explainer: each explanation can reuse the earlier ones; `save` and
    `load` keep it across runs.
    """

    name = "MAnchorsExplainer"

    def __init__(
        self,
        classifier: Classifier,
        *,
        tau_sim: float = 0.6,
        tau_mid: float = 0.8,
        prune_samples: int = 50,
        embedder: SentenceEmbedder | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(classifier, **kwargs)
        if not -1.0 <= tau_sim <= 1.0 or not 0.0 < tau_mid <= 1.0:
            raise ConfigError(f"tau_sim must lie in [-1, 1] and tau_mid in (0, 1], got {tau_sim}, {tau_mid}")
        if prune_samples < 0:
            raise ConfigError(f"prune_samples must be >= 0, got {prune_samples}")
        self.tau_sim, self.tau_mid, self.prune_samples = tau_sim, tau_mid, prune_samples
        self.features: MemoryFeatures
        if isinstance(self.sampler, MemoryFeatures):
            self.features = self.sampler
        else:
            self.features = TextMemoryFeatures(embedder or SentenceEmbedder())
        self._memory: RuleMemory | None = None

    @property
    def embedder(self) -> SentenceEmbedder | None:
        """The text embedder (None for other kinds of input)."""
        return self.features.embedder if isinstance(self.features, TextMemoryFeatures) else None

    @property
    def memory(self) -> RuleMemory:
        if self._memory is None:
            self._memory = RuleMemory(self.features.dim, self.features.identity, self.classifier.identity)
        return self._memory

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "tau_sim": self.tau_sim, "tau_mid": self.tau_mid,
                "prune_samples": self.prune_samples, "embedder": self.features.identity}  # fmt: skip

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Save the memory (atomically: a crash leaves the previous save loadable)."""
        self.memory.save(directory)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Replace the memory by one saved for this classifier and embedder."""
        self._memory = RuleMemory.load(
            directory, embedder_id=self.features.identity, dim=self.features.dim, scope=self.classifier.identity
        )

    async def explain(
        self, text: Any, *, seed: int | None = None, progress: Callable[[Progress], None] | None = None
    ) -> Explanation:
        run = self._start(text, seed)
        run.progress = progress
        await self._label_target(run)
        started = time.perf_counter()
        vector = (await asyncio.to_thread(self.features.embed, [run.instance]))[0]
        found = self.memory.nearest(vector, label=run.target)
        lookup = time.perf_counter() - started
        if found is not None and found[1] >= self.tau_sim:
            return await self._hit(run, *found, lookup=lookup)
        result = await self._search(run, None)
        if not run.budget_exhausted:
            self._remember(run, result.intermediate(self.tau_mid), vector)
        similarity = found[1] if found else None
        return self._explanation(run, result, memory_hit=False, memory_similarity=similarity, memory_lookup_s=lookup)

    async def explain_many(
        self,
        texts: Sequence[Any],
        *,
        max_concurrency: int = 1,
        progress: bool | Callable[[int, int], None] = False,
    ) -> list[Explanation]:
        """Explain a stream; results in input order.

        Inputs start in order, at most ``max_concurrency`` at a time. With
        more than one in flight an input cannot hit an entry that a neighbour
        still being explained will store: concurrency buys wall time with
        some memory hits (1, the default, misses none).
        """
        if max_concurrency < 1:
            raise ConfigError("max_concurrency must be >= 1")
        semaphore = asyncio.Semaphore(max_concurrency)
        done = 0
        report = progress if callable(progress) else (_bar if progress else None)

        async def one(text: Any) -> Explanation:
            nonlocal done
            async with semaphore:
                exp = await self.explain(text)
            done += 1
            if report is not None:
                report(done, len(texts))
            return exp

        tasks = []
        for text in texts:  # created in order: each waits for the semaphore in turn
            tasks.append(asyncio.ensure_future(one(text)))
        return list(await asyncio.gather(*tasks))

    # -- memory hit: HT, pruning, VT ---------------------------------------

    async def _hit(self, run: _Run, entry: MemoryEntry, similarity: float, *, lookup: float) -> Explanation:
        mapped = await asyncio.to_thread(self.features.horizontal, entry, run.instance)
        kept = await self._prune(run, mapped)
        start = frozenset(kept) if kept else None
        result = await self._search(run, start)
        words = run.instance.words
        return self._explanation(
            run,
            result,
            memory_hit=True,
            memory_similarity=similarity,
            memory_lookup_s=lookup,
            memory_source=entry.text,
            ht_rule=tuple(words[p] for p in mapped),
            ht_pruned=tuple(words[p] for p in mapped if p not in kept),
        )

    def horizontal(self, rule_words: Sequence[str], instance: TextInstance) -> list[int]:
        """Text HT: each rule word → the position of the most similar unused word of ``instance``."""
        if not isinstance(self.features, TextMemoryFeatures):
            raise ConfigError("horizontal(rule_words, ...) maps words: it is for text inputs")
        return self.features.map_words(rule_words, instance)

    async def _prune(self, run: _Run, positions: list[int]) -> list[int]:
        """Drop words whose removal does not lower the rule's precision on a light sample."""
        if len(positions) < 2 or self.prune_samples == 0:
            return positions
        rules = [frozenset(positions)] + [frozenset(positions) - {p} for p in positions]
        full, *without = await self._precisions(run, rules, self.prune_samples)
        return [p for p, precision in zip(positions, without, strict=True) if precision < full]

    async def _precisions(self, run: _Run, rules: list[Rule], n: int) -> list[float]:
        """Precision of each rule on ``n`` fresh perturbations (counted as samples)."""
        drawn = [self.sampler.sample(run.instance, rule, n, run.rng)[0] for rule in rules]
        hits = await self._label(run, [t for texts in drawn for t in texts])
        return [float(x) for x in hits.reshape(len(rules), n).mean(axis=1)]

    def _remember(self, run: _Run, mid: RuleStats, vector: np.ndarray) -> None:
        if not mid.rule:
            return  # an empty rule maps onto nothing: no use to a later input
        words = run.instance.words
        entry = MemoryEntry(
            text=run.instance.text,
            words=words,
            label=run.target,
            rule_positions=mid.rule,
            rule_words=tuple(words[p] for p in mid.rule),
            rule_vectors=self.features.describe(run.instance, mid.rule),
            precision=mid.precision,
            coverage=mid.coverage,
        )
        self.memory.add(entry, vector)


def _bar(done: int, total: int) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()
