"""`MAnchorsExplainer`: the guided search, and MAnchors' memory of earlier explanations.

- ``"guided"`` (the default) is a propose-and-verify search, not the
  paper's algorithms: proposers (the memory, when ``use_memory``: earlier
  anchors made of this input's words, and the anchors of similar inputs
  mapped onto it; the proxy) propose rules, shortest first; failing that,
  the rule grows (`GuidedSearch`). Every rule tested is judged by the one
  certifier on samples drawn after it was chosen. The memory is on by
  default: an exact repeat is answered at no query, and its record (a
  seeded control arm of growth alone) asks it only while it pays.
- ``"paper"``: MAnchors (ICML 2026, Algorithms 1–3). For an input whose
  nearest remembered input is similar enough (cosine ≥ ``tau_sim``), the
  remembered intermediate rule is mapped word by word onto the most similar
  words of the new input (horizontal transformation, HT), words that add
  nothing are pruned by light sampling, and the beam search resumes from
  the result (vertical transformation, VT). Otherwise plain Anchors runs
  and the intermediate rule it passed through (the shortest rule on the
  path to the answer whose estimated precision ≥ ``tau_mid``) is
  remembered. The memory is HNSW over input vectors, per model and
  predicted label.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, Literal

import numpy as np

from .._checks import check_number
from .._exceptions import ConfigError, LLMAnchorsError
from .._sync import in_thread
from ..memory.features import MemoryFeatures
from ..memory.store import Memory, MemoryEntry, RuleMemory
from ..models.classifier import Classifier, require_stable_identity
from ..money.budget import SpendCap
from ..propose.base import Proposals, Proposer
from ..propose.growth import Growth, GrowthParams
from ..propose.guided import GuidedParams, GuidedSearch
from ..propose.memory import MemoryRules, near, recalled
from ..propose.proxy import Proxy, ProxyRun
from ..propose.record import ProposerRecord, RecordSettings
from ..propose.search import ProxyParams
from ..propose.surrogate import SurrogateProposer
from ..samplers.embedder import SentenceEmbedder
from ..samplers.text import TextSampler
from ..samplers.text_instance import TextInstance
from ..samplers.text_memory import TextMemoryFeatures
from ..search.base import SampleRequest, SearchResult
from ..search.certify import Certifier
from ..search.rules import Rule
from .anchors import AnchorsExplainer
from .explaining import Explaining, draw, scope
from .explanation import Explanation
from .meta import Cost, MemorySettings, MemoryUse, ProxyUse, Settings
from .progress import Progress

__all__ = ["MAnchorsExplainer", "as_repeat"]


Strategy = Literal["guided", "paper"]


class MAnchorsExplainer(AnchorsExplainer):
    """`AnchorsExplainer` with MAnchors' searches: the guided search, and the paper's memory.

    strategy:
        "guided" (default): a propose-and-verify search of ours, not the
        paper's: proposers (the memory, when ``use_memory``; the ``proxy``)
        propose rules, shortest first, and the rule otherwise grows by a
        logistic fit of the input's samples (`GuidedSearch`); every rule
        tested is judged by the explanation's one certifier, on samples
        drawn after it was chosen.
        "paper": Algorithms 1–3 of the MAnchors paper: the nearest input's
        intermediate rule is mapped by HT, pruned on a light sample and the
        beam search resumes from it (VT); only misses are remembered.
    use_memory: whether earlier explanations are remembered: an exact
        repeat gets its explanation back at no query, earlier anchors are
        proposed for similar inputs, asked only while the memory's record
        says they pay (default True; "paper" is its memory, always True).
    tau_sim: cosine similarity of the inputs' memory vectors above which a
        remembered input is reused (default 0.4 for "guided", whose every
        answer is certified whatever the neighbour; the paper's 0.6 for
        "paper").
    tau_mid: precision of the intermediate rule remembered (0.8).
    tau_first: cosine similarity of the nearest remembered input above which ("guided") an earlier
        anchor made of this input's words is tested before the empty rule, when that input needed one.
    max_repeats: exact repeats remembered whole (the least recently asked for dropped).
    record: how the memory's record decides whether to ask it (`RecordSettings`).
    k_nearest: similar inputs whose anchors are proposed ("guided").
    max_proposals: most rules the memory proposes per input ("guided").
    prune_samples: perturbations per rule when pruning the HT rule ("paper").
    prune_margin: a word of the HT rule is kept when the rule without it is less precise, on those
        samples, by more than this ("paper"; 0.1, chosen on the RT-Polarity tuning stream: at 0 the
        anchors' coverage fell 15% short of Anchors', at 0.1 6%).
    guided: the guided search's own settings (`GuidedParams`); growth: growth's (`GrowthParams`).
    proxy: who else proposes ("guided"): None (default: growth alone; on
        the tuning streams the surrogate cost more queries (RF) or lost
        coverage (LLM)), "surrogate" (a logistic model learned from the
        model's own labels, this input's and earlier inputs'; no query), or
        a `Classifier` (a cheap model standing in for the explained one;
        its calls are reported in ``meta.proxy`` and reserve against the
        same budget). ``proxy_params``: its settings (`ProxyParams`).
    embedder: for text, the `SentenceEmbedder` (default: packaged
        all-MiniLM-L6-v2).
    memory: where earlier explanations are kept and looked up (a `Memory`;
        default: a new `RuleMemory`, HNSW in this process).
    memory_features: the memory key and HT (`MemoryFeatures`); by default
        the sampler's ``memory_features()`` (`TabularSampler`,
        `ImageSampler`), or text's over ``embedder``.
    Other arguments as `AnchorsExplainer`. The memory lives in the
    explainer: each explanation can reuse the earlier ones; `save` and
    `load` keep it across runs. Every setting is recorded in
    ``meta.settings.memory`` (`MemorySettings`).
    """

    name = "MAnchorsExplainer"
    default_tau_sim: dict[str, float] = {"guided": 0.4, "paper": 0.6}
    """τ_sim by strategy: the paper's 0.6; "guided"'s was chosen on held-out streams (docs/benchmarks.md)."""
    default_use_memory: dict[str, bool] = {"guided": True, "paper": True}
    """Whether the memory is used, by strategy: on by default; its record asks it only while it pays
    (on the tuning streams: +1.6% paid queries on diverse RT-Polarity, −6.8% on templated YouTube spam)."""

    def __init__(
        self,
        classifier: Classifier,
        *,
        strategy: Strategy = "guided",
        tau_sim: float | None = None,
        tau_mid: float = 0.8,
        tau_first: float = 0.0,
        k_nearest: int = 3,
        max_proposals: int = 5,
        prune_samples: int = 50,
        prune_margin: float = 0.1,
        max_repeats: int = 10_000,
        record: RecordSettings | None = None,
        guided: GuidedParams | None = None,
        growth: GrowthParams | None = None,
        embedder: SentenceEmbedder | None = None,
        memory_features: MemoryFeatures | None = None,
        memory: Memory | None = None,
        proxy: Literal["surrogate"] | Classifier | None = None,
        proxy_params: ProxyParams | None = None,
        use_memory: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(classifier, **kwargs)
        if isinstance(proxy, str) and proxy != "surrogate":
            raise ConfigError(f"proxy must be 'surrogate', a Classifier or None, got {proxy!r}")
        if strategy not in ("guided", "paper"):
            raise ConfigError(f"strategy must be 'guided' or 'paper', got {strategy!r}")
        if use_memory is None:
            use_memory = self.default_use_memory[strategy]
        if not isinstance(use_memory, bool) or (strategy == "paper" and not use_memory):
            raise ConfigError(f"use_memory must be a bool (True for 'paper': it is its memory), got {use_memory!r}")
        self.use_memory = use_memory
        if tau_sim is None:
            tau_sim = self.default_tau_sim.get(strategy, 0.6)
        if not -1.0 <= tau_sim <= 1.0 or not 0.0 < tau_mid <= 1.0:
            raise ConfigError(f"tau_sim must lie in [-1, 1] and tau_mid in (0, 1], got {tau_sim}, {tau_mid}")
        for name, value in (("k_nearest", k_nearest), ("max_proposals", max_proposals),
                            ("prune_samples", prune_samples), ("max_repeats", max_repeats)):  # fmt: skip
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        self.strategy: Strategy = strategy
        self.tau_sim, self.tau_mid, self.prune_samples = tau_sim, tau_mid, prune_samples
        check_number("prune_margin", prune_margin, low=0.0, high=1.0, open_low=False)
        self.prune_margin = prune_margin
        check_number("tau_first", tau_first, low=-1.0, high=1.0, open_low=False, open_high=False)
        self.tau_first = tau_first
        self.k_nearest, self.max_proposals = k_nearest, max_proposals
        self.max_repeats = max_repeats
        self.record = record or RecordSettings()
        self.records: dict[str, ProposerRecord] = {"memory": ProposerRecord()}
        """Each proposer's record on this explainer's stream (`ProposerRecord`): whether it is asked."""
        self._repeats: OrderedDict[str, bytes] = OrderedDict()  # compressed JSON, least recently used first
        self._explaining: dict[str, asyncio.Future[bool]] = {}  # inputs being explained, done when they end
        self.guided = guided or GuidedParams()
        self.growth = growth or GrowthParams()
        self.features: MemoryFeatures = memory_features or self._default_features(embedder)
        self._memory: Memory | None = memory
        self.proxy: Proxy | None = None
        if proxy is not None and strategy == "guided":
            self.proxy = Proxy(proxy, proxy_params, max_concurrency=self.engine.max_concurrency)

    async def aclose(self) -> None:
        """Close the model's connections and a proxy classifier's."""
        try:
            await super().aclose()
        finally:
            if self.proxy is not None and self.proxy.classifier is not None:
                await self.proxy.classifier.aclose()

    def _default_features(self, embedder: SentenceEmbedder | None) -> MemoryFeatures:
        """The sampler's `memory_features()` (rows, images), or text's."""
        make = getattr(self.sampler, "memory_features", None)
        if callable(make):
            features: MemoryFeatures = make()
            return features
        if isinstance(self.sampler, MemoryFeatures):  # a sampler that is its own memory features
            return self.sampler
        return TextMemoryFeatures(embedder or SentenceEmbedder())

    @property
    def embedder(self) -> SentenceEmbedder | None:
        """The text embedder (None for other kinds of input)."""
        return self.features.embedder if isinstance(self.features, TextMemoryFeatures) else None

    @property
    def memory(self) -> Memory:
        """Where this explainer keeps and looks up earlier explanations (a new `RuleMemory` by default)."""
        if self._memory is None:
            self._memory = RuleMemory(*self.memory_identity)
        return self._memory

    @memory.setter
    def memory(self, memory: Memory) -> None:
        self._memory = memory

    @property
    def memory_scope(self) -> str:
        """What the memory's rules hold for: the explained model and, for text, the perturbation (a rule
        learned under one operator is never proposed under another)."""
        if isinstance(self.sampler, TextSampler):
            return f"{self.classifier.identity}|perturbation:{self.sampler.perturbation}"
        return self.classifier.identity

    @property
    def memory_identity(self) -> tuple[int, str, str]:
        """What a memory for this explainer is made for: vector size, embedder, explained model and perturbation."""
        return self.features.dim, self.features.identity, self.memory_scope

    @property
    def local_memory(self) -> RuleMemory:
        """The memory, when it is this explainer's own `RuleMemory` (what `save` writes);
        a `ConfigError` for one it only looks up (a Ray run's)."""
        memory = self.memory
        if not isinstance(memory, RuleMemory):
            raise ConfigError(f"this explainer's memory is not its own ({memory!r}): save or load it where it is")
        return memory

    def settings(self) -> Settings:
        memory = MemorySettings(
            strategy=self.strategy, tau_sim=self.tau_sim, tau_mid=self.tau_mid, k_nearest=self.k_nearest,
            max_proposals=self.max_proposals, prune_samples=self.prune_samples, prune_margin=self.prune_margin,
            embedder=self.features.identity,
            use_memory=self.use_memory, guided=self.guided, growth=self.growth,
            proxy=self.proxy.kind if self.proxy else None, proxy_params=self.proxy.params if self.proxy else None,
            max_repeats=self.max_repeats, record=self.record, tau_first=self.tau_first, index=self._index_settings(),
        )  # fmt: skip
        return replace(super().settings(), memory=memory)

    def _index_settings(self) -> dict[str, int] | None:
        """The HNSW settings of this explainer's own memory (the defaults until it makes one)."""
        if self._memory is None:
            return {"ef": RuleMemory.EF, "m": RuleMemory.M, "per_key": RuleMemory.PER_KEY}
        if isinstance(self._memory, RuleMemory):
            return {"ef": self._memory.ef, "m": self._memory.m, "per_key": self._memory.per_key}
        return None

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Save the memory (atomically: a crash leaves the previous save loadable).

        The memory is for this classifier's identity: an unnamed
        `FunctionClassifier` (a random identity) cannot be saved.
        """
        require_stable_identity(self.classifier, f"a memory saved to {directory}")
        self.local_memory.save(directory)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Replace the memory by one saved for this classifier and embedder."""
        self._memory = RuleMemory.load(
            directory, embedder_id=self.features.identity, dim=self.features.dim, scope=self.memory_scope
        )

    def entry_vectors(self, entries: Sequence[MemoryEntry]) -> np.ndarray:
        """The memory vectors of stored entries' inputs (to put back entries recorded elsewhere)."""
        return self.features.embed([self.sampler.features(e.query) for e in entries])

    # -- exact repeats ----------------------------------------------------------

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
        key = self._repeat_key(text, self.settings(), self.classifier.identity) if self.use_memory else None
        if key is None:
            return await super().explain(text, seed=seed, progress=progress, budget=budget)
        started = time.perf_counter()
        if key in self._explaining:  # the same input, still being explained: wait for its end
            await asyncio.shield(self._explaining[key])
        if (known := self._repeats.get(key)) is not None:
            self._repeats.move_to_end(key)
            return as_repeat(Explanation.from_json(zlib.decompress(known).decode()), time.perf_counter() - started)
        done = asyncio.Event()
        self._explaining[key] = asyncio.ensure_future(done.wait())
        try:
            exp = await super().explain(text, seed=seed, progress=progress, budget=budget)
            self.recall(text, exp)
            return exp
        finally:
            done.set()
            self._explaining.pop(key, None)

    def recall(self, text: Any, explanation: Explanation) -> None:
        """Remember ``explanation`` as this explainer's own of ``text`` (an exact repeat gets it back; a
        resumed run puts back those its results file holds). One cut short by a cap is not remembered;
        at most ``max_repeats`` are, the least recently asked for dropped."""
        key = self._repeat_key(text, explanation.meta.settings, explanation.meta.classifier)
        if key is None or explanation.meta.budget_exhausted:
            return
        self._repeats[key] = zlib.compress(explanation.to_json().encode())  # 1.7 KB, not 10 KB of objects
        self._repeats.move_to_end(key)
        while len(self._repeats) > self.max_repeats:
            self._repeats.popitem(last=False)

    def _repeat_key(self, text: Any, settings: Settings, classifier: str) -> str | None:
        """What makes two inputs one explanation: the input as the sampler reads it (its query and
        pinned parts), the model, every setting that shapes it (the perturbation among them; not the
        seed: a repeat is the explanation already certified). None: it cannot be explained."""
        try:
            instance = self.sampler.features(text)
        except LLMAnchorsError:
            return None
        shaping = {k: v for k, v in asdict(settings).items() if k not in _NOT_SHAPING}
        pinned = getattr(instance, "pinned", ())
        said = json.dumps([instance.query, pinned, classifier, shaping], default=str, sort_keys=True)
        return hashlib.sha256(said.encode()).hexdigest()

    async def _find(self, run: Explaining) -> tuple[SearchResult, dict[str, Any]]:
        """The memory looked up, its rules proposed (or, "paper", mapped and resumed), the anchor
        remembered; without the memory, the guided search alone (nothing embedded, looked up or
        remembered)."""
        if not self.use_memory:
            alone, _, proxy_use = await self._guided_levels(run, (), MemoryUse())
            return alone, {"proxy": proxy_use}
        started = time.perf_counter()
        vector = (await in_thread(self.features.embed, [run.instance]))[0]
        k = self.k_nearest if self.strategy == "guided" else 1
        near = self.memory.neighbours(vector, label=run.target, k=max(k, 1))
        looked_up = MemoryUse(near[0][1] if near else None, time.perf_counter() - started)
        similar = [entry for entry, similarity in near if similarity >= self.tau_sim]
        if self.strategy == "paper" and similar:
            return await self._vertical(run, similar[0], looked_up)
        proxied: ProxyUse | None = None
        if self.strategy == "guided":
            result, looked_up, proxied = await self._guided_levels(run, similar, looked_up)
        else:
            result = await self._levels(run, lambda: self._search(run, None))
        if not run.budget_exhausted:
            self._remember(run, result, vector)
            looked_up = self._recorded(looked_up, run.stats.queries)
        return result, {"memory_hit": bool(similar), "memory": looked_up, "proxy": proxied}

    def _recorded(self, used: MemoryUse, queries: int) -> MemoryUse:
        """Count an input the memory had rules for in its record (asked, or the control arm); ``used``
        with what asking it has saved on this stream so far."""
        record = self.records["memory"]
        if used.asked is not None:
            record.add(used.asked, queries, used.certified)
        return replace(used, saved=round(record.saved, 1)) if used.asked is not None else used

    # -- "guided": what the memory proposes ----------------------------------

    async def _guided_levels(
        self, run: Explaining, similar: Sequence[MemoryEntry], looked_up: MemoryUse
    ) -> tuple[SearchResult, MemoryUse, ProxyUse | None]:
        """`_guided` at each level of the input (`_levels`): the memory proposes at the first; the proxy's
        use is the last level's."""
        uses: list[tuple[MemoryUse, ProxyUse | None]] = []

        async def search() -> SearchResult:
            result, memory, proxy = await self._guided(run, () if uses else similar, looked_up)
            uses.append((memory, proxy))
            return result

        result = await self._levels(run, search)
        return result, uses[0][0], uses[-1][1]

    async def _guided(
        self, run: Explaining, similar: Sequence[MemoryEntry], looked_up: MemoryUse
    ) -> tuple[SearchResult, MemoryUse, ProxyUse | None]:
        """The memory and the proxy propose rules, growth its own, `GuidedSearch` certifies."""
        keys = self.features.keys(run.instance)
        rules = MemoryRules()
        if similar:
            args = (self.memory, self.features, run.instance, keys, similar, run.target)
            rules = (await in_thread(recalled, *args)).limited(self.max_proposals)
        asked = self.records["memory"].ask(self.record, run.seed, run.instance.query) if rules.rules else None
        first = near(similar, looked_up.similarity, keys, self.tau_first)
        proposers: list[Proposer] = [*rules.proposers(first=first)] if asked else []
        proxied, proxy = await self._proxy_proposer(run, keys)
        proposers += [proxy] if proxy is not None else []
        pool = await self._coverage_pool(run)
        search = self.guided_search(len(run.instance.features), pool, proposers, run.certifier, *scope(run.instance))
        result = await self._drive(run, search)
        if similar:
            proposed = rules.rules if asked else ()  # the control arm: growth alone, nothing proposed
            named = tuple(tuple(run.instance.features[p] for p in sorted(r)) for r in proposed)
            certified = search.sources.get(result.rule) == "memory" and result.success
            looked_up = replace(looked_up, source=similar[0].query, proposals=named, asked=asked, certified=certified)
        if self.proxy is None:
            return result, looked_up, None
        if isinstance(proxy, SurrogateProposer):
            proxied = ProxyRun(samples=proxy.samples, proposals=proxy.proposals)
        return result, looked_up, self.proxy.learn(proxied, run.instance, keys, search.labelled(), run.target, result)

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
        asking ``proposers`` (the memory's, the proxy's) in turn and growth last, certified by
        ``certifier`` (the explanation's); ``context``: features never in a rule; ``max_size``: the most
        features in one; ``rate_per_sample``: whether the hiding rate is drawn per sample (a document's:
        reused samples are reweighted)."""
        return GuidedSearch(n_features, pool, self.params, guided=self.guided,
                            proposers=[*proposers, Growth(self.growth)], certifier=certifier, context=context,
                            max_size=max_size, rate_per_sample=rate_per_sample)  # fmt: skip

    async def _proxy_proposer(self, run: Explaining, keys: Sequence[str]) -> tuple[ProxyRun, Proposer | None]:
        """The proxy's run and what `GuidedSearch` asks for its rules (None: no proxy). A proxy classifier
        searches now, before the model samples anything; the surrogate when asked."""
        proxy = self.proxy
        if proxy is None:
            return ProxyRun(), None
        rng = np.random.default_rng([run.seed, 0x9A0])  # the proxy's draws leave the model's unchanged
        n = len(run.instance.features)
        max_size = min(self.params.max_anchor_size or n, n)
        if proxy.classifier is None:
            return ProxyRun(), proxy.surrogate_proposer(self.sampler, run.instance, keys, run.target, rng, max_size)
        proxied = await proxy.by_classifier(self.sampler, run.instance, run.target, rng, max_size,
                                            budget=self.engine.budget, cap=run.stats.budget)  # fmt: skip
        if proxied.refused is not None:
            if self.on_budget == "raise":
                raise proxied.refused
            run.budget_exhausted = True  # the model's search then stops at once, with its best so far
        return proxied, Proposals("proxy", tuple(proxied.proposals))

    # -- "paper": HT, pruning, VT ---------------------------------------------

    async def _vertical(
        self, run: Explaining, entry: MemoryEntry, looked_up: MemoryUse
    ) -> tuple[SearchResult, dict[str, Any]]:
        mapped = await in_thread(self.features.horizontal, entry, run.instance)
        kept = await self._prune(run, mapped)
        names = run.instance.features
        starts = [frozenset(kept) if kept else None]  # the HT rule starts the first level; a finer one, nothing
        result = await self._levels(run, lambda: self._search(run, starts.pop() if starts else None))
        memory = replace(
            looked_up,
            source=entry.query,
            ht_rule=tuple(names[p] for p in mapped),
            ht_pruned=tuple(names[p] for p in mapped if p not in kept),
        )
        return result, {"memory_hit": True, "memory": memory}

    def horizontal(self, rule_words: Sequence[str], instance: TextInstance) -> list[int]:
        """Text HT: each rule word → the position of the most similar unused word of ``instance``."""
        if not isinstance(self.features, TextMemoryFeatures):
            raise ConfigError("horizontal(rule_words, ...) maps words: it is for text inputs")
        return self.features.map_words(rule_words, instance)

    async def _prune(self, run: Explaining, positions: list[int]) -> list[int]:
        """Drop the words whose removal lowers the rule's precision on a light sample by ``prune_margin``
        at most (a rule of one word is compared with the empty rule: VT never drops a word it starts
        with, so a word this input needs not would stay in its anchor)."""
        if not positions or self.prune_samples == 0:
            return positions
        rules = [frozenset(positions)] + [frozenset(positions) - {p} for p in positions]
        full, *without = await self._precisions(run, rules, self.prune_samples, "prune")
        return [p for p, precision in zip(positions, without, strict=True) if precision < full - self.prune_margin]

    async def _precisions(self, run: Explaining, rules: list[Rule], n: int, stage: str) -> list[float]:
        """Precision of each rule on ``n`` fresh perturbations (counted as samples, under ``stage``)."""
        drawn = await draw(self.sampler, run.instance, [SampleRequest(rule, n, stage) for rule in rules], run.rng)
        hits = await self._label(run, [t for texts, _ in drawn for t in texts], stage)
        return [float(x) for x in hits.reshape(len(rules), n).mean(axis=1)]

    def _remember(self, run: Explaining, result: SearchResult, vector: np.ndarray) -> None:
        """Store the input with its intermediate rule (at τ_mid) and its anchor."""
        mid = result.intermediate(self.tau_mid)
        if not mid.rule and not (self.strategy == "guided" and result.success):
            return  # an empty rule maps onto nothing; an empty anchor says a neighbour needs none ("guided")
        instance, names = run.instance, run.instance.features
        anchor = tuple(sorted(result.rule))
        keys = self.features.keys(instance)
        entry = MemoryEntry(
            query=instance.query,
            features=names,
            label=run.target,
            rule_positions=mid.rule,
            rule_features=tuple(names[p] for p in mid.rule),
            rule_vectors=self.features.describe(instance, mid.rule),
            precision=mid.precision,
            coverage=mid.coverage,
            anchor_positions=anchor if result.success else (),
            anchor_features=tuple(names[p] for p in anchor) if result.success else (),
            anchor_keys=tuple(keys[p] for p in anchor) if result.success and keys else (),
            anchor_vectors=self.features.describe(instance, anchor) if result.success else (),
        )
        self.memory.add(entry, vector)


_NOT_SHAPING = ("budget", "on_budget", "max_concurrency", "request_size", "price")
"""Settings that change what an explanation spends or how fast, not what it finds."""


def as_repeat(known: Explanation, elapsed: float) -> Explanation:
    """``known`` as an exact repeat's explanation: the same data and claim, no query, no sample, no cost."""
    m = known.meta
    memory = replace(m.memory or MemoryUse(), repeat=True, similarity=1.0, source=known.data.query, lookup_s=elapsed,
                     asked=None, certified=False)  # fmt: skip
    meta = replace(m, samples=0, queries=0, cost=Cost(), stages={}, wall_time_s=elapsed, memory_hit=True,
                   memory=memory, infill=Cost() if m.infill is not None else None)  # fmt: skip
    return replace(known, meta=meta)
