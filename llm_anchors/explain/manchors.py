"""`MAnchorsExplainer`: Anchors with MAnchors' searches, the guided search (the default: the memory and the
user's proposers through one door, `explain.sources`) and the paper's (`explain.paper`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, Unpack

import numpy as np

from .._exceptions import ConfigError
from ..memory.features import MemoryFeatures
from ..memory.store import Memory, MemoryEntry
from ..models.classifier import Classifier, require_stable_identity
from ..money.budget import SpendCap
from ..propose.base import Proposer
from ..propose.growth import Growth, GrowthParams
from ..propose.guided import GuidedParams, GuidedSearch
from ..propose.memory import MemoryParams, MemoryProposer
from ..samplers.embedder import SentenceEmbedder
from ..samplers.text import TextSampler
from ..samplers.text_instance import TextInstance
from ..samplers.text_memory import TextMemoryFeatures
from ..search.base import SearchResult
from ..search.certify import Certifier
from . import paper
from .anchors import AnchorsExplainer
from .explaining import Explaining, input_seed, scope
from .explanation import Explanation
from .meta import MAnchorsSettings, Settings
from .options import ExplainerOptions
from .progress import Progress
from .repeats import Repeats
from .sources import FactorySource, MemorySource, Opened, ProposerFactory, Source, named

__all__ = ["MAnchorsExplainer"]

Strategy = Literal["guided", "paper"]


class MAnchorsExplainer(AnchorsExplainer):
    """`AnchorsExplainer` with MAnchors' searches: the guided search, and the paper's memory.

    strategy:
        "guided" (default): a propose-and-verify search of ours, not the
        paper's: proposers propose rules, shortest first, and the rule
        otherwise grows by a logistic fit of the input's samples
        (`GuidedSearch`); every rule tested is judged by the explanation's
        one certifier, on samples drawn after it was chosen.
        "paper": Algorithms 1–3 of the MAnchors paper: the nearest input's
        intermediate rule is mapped by HT, pruned on a light sample and the
        beam search resumes from it (VT); only misses are remembered. It
        takes none of "guided"'s settings (given one, a `ConfigError`).
    memory: the memory of earlier explanations, its settings whole (`MemoryParams`); None: off
        ("paper" is its memory). An exact repeat gets its explanation back at no query, earlier
        anchors are proposed for similar inputs, asked only while its record says they pay.
    proposers: the user's (``ProposerFactory``: an input and its label to a `Proposer`; or a `Source`,
        opened per input and told its end, as the memory is), asked in the order given, before the
        memory's, growth last; their tests are judged, paid, cached and counted
        (``meta.stages`` under each proposer's name) as every other ("guided").
    guided: the guided search's own settings (`GuidedParams`); growth: growth's (`GrowthParams`).
    embedder: for text, the `SentenceEmbedder` (default: packaged all-MiniLM-L6-v2 word table).
    memory_store: where earlier explanations are kept and looked up (a `Memory`; default: a new
        `RuleMemory`, HNSW in this process); later, `load` or `MemoryProposer.use`.
    memory_features: the memory key and HT (`MemoryFeatures`); by default
        the sampler's ``memory_features()`` (`TabularSampler`,
        `ImageSampler`), or text's over ``embedder``.
    Other arguments as `AnchorsExplainer`. The memory lives in the
    explainer (``memory_proposer``): each explanation can reuse the earlier
    ones; `save` and `load` keep it across runs. Every setting is recorded
    in ``meta.settings.manchors`` (`MAnchorsSettings`).
    """

    name = "MAnchorsExplainer"
    default_tau_sim: dict[str, float] = {"guided": 0.4, "paper": 0.6}
    """τ_sim by strategy: the paper's 0.6; "guided"'s was chosen on held-out streams (docs/benchmarks.md)."""

    def __init__(
        self,
        classifier: Classifier,
        *,
        strategy: Strategy = "guided",
        memory: MemoryParams | None = MemoryParams(),  # noqa: B008 (frozen: one shared default is safe)
        proposers: Sequence[ProposerFactory | Source] = (),
        guided: GuidedParams | None = None,
        growth: GrowthParams | None = None,
        embedder: SentenceEmbedder | None = None,
        memory_features: MemoryFeatures | None = None,
        memory_store: Memory | None = None,
        **options: Unpack[ExplainerOptions],
    ) -> None:
        super().__init__(classifier, **options)
        if strategy not in ("guided", "paper"):
            raise ConfigError(f"strategy must be 'guided' or 'paper', got {strategy!r}")
        if memory is not None and not isinstance(memory, MemoryParams):
            raise ConfigError(f"memory must be a MemoryParams or None, got {type(memory).__name__}")
        if not all(callable(p) or isinstance(p, Source) for p in proposers):
            raise ConfigError("proposers must be callables (an input and its label to a Proposer, or None) or Sources")
        _refuse_unused(strategy, memory, proposers=proposers, guided=guided, growth=growth)
        self.strategy: Strategy = strategy
        self.memory = memory
        """MAnchors' memory, its settings (`MemoryParams`); None: off, and no memory object exists."""
        self.proposers = tuple(proposers)
        self.guided = guided or GuidedParams()
        self.growth = growth or GrowthParams()
        self.features = (memory_features or self._default_features(embedder)) if memory is not None else None
        """The memory key and HT of this explainer's inputs (`MemoryFeatures`); None with the memory off."""
        self.memory_proposer: MemoryProposer | None = None
        """The memory (`MemoryProposer`: its store, its record), when ``memory`` is not None."""
        self.repeats: Repeats | None = None
        """The explanations made, an exact repeat answered from them (`Repeats`), when ``memory`` is not None."""
        if memory is not None and self.features is not None:
            tau_sim = memory.tau_sim if memory.tau_sim is not None else self.default_tau_sim[strategy]
            self.memory_proposer = MemoryProposer(memory, self.features, self._scope(), tau_sim=tau_sim,
                                                  store=memory_store)  # fmt: skip
            self.repeats = Repeats(self.sampler, memory.max_repeats)
        self.sources: tuple[Source, ...] = self._sources()
        """Where the guided search's proposers come from, in the order asked: the user's, the memory's
        (`explain.sources`)."""

    def _sources(self) -> tuple[Source, ...]:
        user = [make if isinstance(make, Source) else FactorySource(make) for make in self.proposers]
        memory = [MemorySource(self.memory_proposer)] if self.memory_proposer is not None else []
        return (*user, *memory)

    def _default_features(self, embedder: SentenceEmbedder | None) -> MemoryFeatures:
        """The sampler's `memory_features()` (rows, images), or text's."""
        make = getattr(self.sampler, "memory_features", None)
        if callable(make):
            features: MemoryFeatures = make()
            return features
        if isinstance(self.sampler, MemoryFeatures):  # a sampler that is its own memory features
            return self.sampler
        return TextMemoryFeatures(embedder or SentenceEmbedder())

    def _scope(self) -> str:
        """What the memory's rules hold for: the explained model and, for text, the perturbation (a rule
        learned under one operator is never proposed under another)."""
        if isinstance(self.sampler, TextSampler):
            return f"{self.classifier.identity}|perturbation:{self.sampler.perturbation}"
        return self.classifier.identity

    @property
    def store(self) -> Memory:
        """Where earlier explanations are kept and looked up; a `ConfigError` with the memory off."""
        return self._memory().store

    @property
    def embedder(self) -> SentenceEmbedder | None:
        """The text embedder (None for other kinds of input, or when nothing embeds)."""
        return self.features.embedder if isinstance(self.features, TextMemoryFeatures) else None

    def _memory(self) -> MemoryProposer:
        if self.memory_proposer is None:
            raise ConfigError("this explainer's memory is off (memory=None): it keeps nothing")
        return self.memory_proposer

    def settings(self) -> Settings:
        m = self.memory_proposer
        recorded = replace(self.memory, tau_sim=m.tau_sim) if self.memory is not None and m is not None else None
        manchors = MAnchorsSettings(
            strategy=self.strategy, memory=recorded, embedder=self.features.identity if self.features else None,
            guided=self.guided, growth=self.growth, proposers=tuple(named(p) for p in self.proposers),
            index=m.index_settings() if m is not None else None,
        )  # fmt: skip
        return replace(super().settings(), manchors=manchors)

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Save the memory (atomically: a crash leaves the previous save loadable).

        The memory is for this classifier's identity: an unnamed
        `FunctionClassifier` (a random identity) cannot be saved.
        """
        require_stable_identity(self.classifier, f"a memory saved to {directory}")
        self._memory().save(directory)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Use the memory saved in ``directory`` for this classifier and embedder."""
        self._memory().load(directory)

    def entry_vectors(self, entries: Sequence[MemoryEntry]) -> np.ndarray:
        """The memory vectors of stored entries' inputs (to put back entries recorded elsewhere)."""
        return self._memory().entry_vectors([self.sampler.features(e.query) for e in entries])

    def recall(self, explained: Sequence[tuple[Any, Any]]) -> None:
        """Remember explanations made before (texts and explanations, or their JSON mappings, oldest first) as
        this explainer's own: an exact repeat gets its explanation back. Only the newest the memory keeps are
        read; one of another version is left out (explained again); with the memory off, nothing is kept."""
        if self.repeats is None:
            return
        for text, made in explained[len(explained) - self.repeats.most :]:
            with contextlib.suppress(ConfigError):
                self.repeats.recall(text, made if isinstance(made, Explanation) else Explanation.from_mapping(made))

    def describe(self) -> str:
        return "MAnchors' guided search, " + ("its memory on" if self.memory is not None else "no memory")

    async def explain(
        self,
        text: Any,
        *,
        seed: int | None = None,
        progress: Callable[[Progress], None] | None = None,
        budget: SpendCap | None = None,
    ) -> Explanation:
        """`AnchorsExplainer.explain`; with the memory on, an exact repeat (the same input, model,
        perturbation and settings, whatever the seed) gets the explanation already made back, at no
        query: its anchor, its claim, its numbers, marked ``meta.memory.repeat`` (its seed the one
        it was made with). A repeat of an input still being explained waits for it."""

        async def explained() -> Explanation:
            return await super(MAnchorsExplainer, self).explain(text, seed=seed, progress=progress, budget=budget)

        if self.repeats is None:
            return await explained()
        return await self.repeats.explained(text, self.settings(), self.classifier.identity, explained)

    async def _find(self, run: Explaining) -> tuple[SearchResult, dict[str, Any]]:
        """ "paper": its own (`explain.paper`). "guided": each source opened for the input, the guided search
        at each level with their proposers, and what each records of the input."""
        if self.strategy == "paper":
            return await paper.find(self, self._memory(), run)
        opened = [await source.open(run) for source in self.sources]
        levels: list[SearchResult] = []

        async def search() -> SearchResult:
            levels.append(await self._guided(run, opened, first_level=not levels))
            return levels[-1]

        result = await self._levels(run, search)
        found: dict[str, Any] = {}
        for one in opened:
            found |= one.finished(run, result)
        return result, found

    async def _guided(self, run: Explaining, opened: Sequence[Opened], *, first_level: bool) -> SearchResult:
        """One level: the sources' proposers propose rules, growth its own, `GuidedSearch` certifies. The rules
        a source knew before the input's first search seed its draws (a rule is never judged on the masks that
        chose it)."""
        proposers = [p for one in opened for p in await one.proposers(run)]
        known = [r for one in opened for r in one.drawn_with] if first_level else []
        if known:
            given = run.run_seed if run.run_seed is not None else run.seed
            run.seed = input_seed(given, run.instance, self.drawn_by(), known)
            run.rng = np.random.default_rng(run.seed)
        pool = await self._coverage_pool(run)
        search = self.guided_search(len(run.instance.features), pool, proposers, run.certifier, *scope(run.instance))
        result = await self._drive(run, search)
        for one in opened:
            one.searched(run, search, result)
        return result

    def guided_search(
        self,
        n_features: int,
        pool: np.ndarray,
        proposers: Sequence[Proposer] = (),
        certifier: Certifier | None = None,
        context: Sequence[int] = (),
        max_size: int | None = None,
        rate_per_sample: bool = False,
    ) -> GuidedSearch:
        """The guided search this explainer runs on an input of ``n_features`` (its coverage ``pool``),
        asking ``proposers`` (the sources') in turn and growth last, certified by ``certifier`` (the
        explanation's); ``context``: features never in a rule; ``max_size``: the most features in one;
        ``rate_per_sample``: whether the hiding rate is drawn per sample (a document's: reused samples are
        reweighted)."""
        return GuidedSearch(n_features, pool, self.params, guided=self.guided,
                            proposers=[*proposers, Growth(self.growth)], certifier=certifier, context=context,
                            max_size=max_size, rate_per_sample=rate_per_sample)  # fmt: skip

    def horizontal(self, rule_words: Sequence[str], instance: TextInstance) -> list[int]:
        """Text HT: each rule word → the position of the most similar unused word of ``instance``."""
        if not isinstance(self.features, TextMemoryFeatures):
            raise ConfigError("horizontal(rule_words, ...) maps words: it is for text inputs with the memory on")
        return self.features.map_words(rule_words, instance)


def _refuse_unused(strategy: Strategy, memory: MemoryParams | None, **given: Any) -> None:
    """`ConfigError` for a setting the strategy would ignore: "paper" takes none of the guided search's
    (proposers, guided, growth, the memory's proposing), "guided" none of the paper's
    pruning; "paper" is its memory, never off."""
    if strategy == "paper":
        if memory is None:
            raise ConfigError("strategy='paper' is its memory: memory=None leaves nothing to run")
        unused = [name for name, value in given.items() if value not in (None, ())]
        unused += _changed(memory, MemoryParams.GUIDED_ONLY)
    else:
        unused = _changed(memory, MemoryParams.PAPER_ONLY) if memory is not None else []
    if unused:
        raise ConfigError(f"strategy={strategy!r} does not use {', '.join(unused)}: leave it out")


def _changed(memory: MemoryParams, names: Sequence[str]) -> list[str]:
    """The ``names`` of ``memory``'s settings given another value than their default."""
    default = MemoryParams()
    return [f"memory.{name}" for name in names if getattr(memory, name) != getattr(default, name)]
