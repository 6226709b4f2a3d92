"""`MAnchorsExplainer`: the guided search, with MAnchors' memory of earlier explanations as a proposer.

- ``"guided"`` (the default) is a propose-and-verify search, not the
  paper's algorithms: proposers (the user's, ``proposers=``; the memory,
  `MemoryProposer`: earlier anchors made of this input's words, and the
  anchors of similar inputs mapped onto it; the proxy) propose rules,
  shortest first; failing that, the rule grows (`GuidedSearch`). Every rule
  tested is judged by the one certifier on samples drawn after it was
  chosen. The memory is on by default: an exact repeat is answered at no
  query, and its record (a seeded control arm of growth alone) asks it only
  while it pays.
- ``"paper"``: MAnchors (ICML 2026, Algorithms 1–3). For an input whose
  nearest remembered input is similar enough (cosine ≥ τ_sim), the
  remembered intermediate rule is mapped word by word onto the most similar
  words of the new input (horizontal transformation, HT), words that add
  nothing are pruned by light sampling, and the beam search resumes from
  the result (vertical transformation, VT). Otherwise plain Anchors runs
  and the intermediate rule it passed through (the shortest rule on the
  path to the answer whose estimated precision ≥ τ_mid) is remembered.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Literal, Unpack

import numpy as np

from .._exceptions import ConfigError
from .._sync import in_thread
from ..memory.features import MemoryFeatures
from ..memory.store import Memory, MemoryEntry
from ..models.classifier import Classifier, require_stable_identity
from ..money.budget import SpendCap
from ..propose.base import Proposals, Proposer
from ..propose.growth import Growth, GrowthParams
from ..propose.guided import GuidedParams, GuidedSearch
from ..propose.memory import Lookup, MemoryParams, MemoryProposer
from ..propose.proxy import Proxy, ProxyRun
from ..propose.search import ProxyParams
from ..propose.surrogate import SurrogateProposer
from ..samplers.base import Instance, draw
from ..samplers.embedder import SentenceEmbedder
from ..samplers.text import TextSampler
from ..samplers.text_instance import TextInstance
from ..samplers.text_memory import TextMemoryFeatures
from ..search.base import STAGES, SampleRequest, SearchResult
from ..search.certify import Certifier
from ..search.rules import Rule
from .anchors import AnchorsExplainer
from .explaining import Explaining, input_seed, scope
from .explanation import Explanation
from .meta import MemorySettings, MemoryUse, ProxyUse, Settings
from .options import ExplainerOptions
from .progress import Progress
from .repeats import Repeats

__all__ = ["MAnchorsExplainer", "ProposerFactory"]

Strategy = Literal["guided", "paper"]
ProposerFactory = Callable[[Instance, Hashable], Proposer | None]
"""What ``proposers=`` takes: given an input (each level of it: a document's sentences, then the words
inside its anchor) and the label explained, the `Proposer` its guided search asks (None: none here)."""


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
    proposers: the user's (``ProposerFactory``: an input and its label to a `Proposer`), asked in the
        order given, before the memory's and the proxy's, growth last; their tests are judged, paid,
        cached and counted (``meta.stages`` under each proposer's name) as every other ("guided").
    guided: the guided search's own settings (`GuidedParams`); growth: growth's (`GrowthParams`).
    proxy: who else proposes ("guided"): None (default: growth alone; on
        the tuning streams the surrogate cost more queries (RF) or lost
        coverage (LLM)), "surrogate" (a logistic model learned from the
        model's own labels, this input's and earlier inputs'; no query), or
        a `Classifier` (a cheap model standing in for the explained one;
        its calls are reported in ``meta.proxy`` and reserve against the
        same budget). ``proxy_params``: its settings (`ProxyParams`).
    embedder: for text, the `SentenceEmbedder` (default: packaged all-MiniLM-L6-v2 word table).
    memory_store: where earlier explanations are kept and looked up (a `Memory`; default: a new
        `RuleMemory`, HNSW in this process); later, `load` or `MemoryProposer.use`.
    memory_features: the memory key and HT (`MemoryFeatures`); by default
        the sampler's ``memory_features()`` (`TabularSampler`,
        `ImageSampler`), or text's over ``embedder``.
    Other arguments as `AnchorsExplainer`. The memory lives in the
    explainer (``memory_proposer``): each explanation can reuse the earlier
    ones; `save` and `load` keep it across runs. Every setting is recorded
    in ``meta.settings.memory`` (`MemorySettings`).
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
        proposers: Sequence[ProposerFactory] = (),
        guided: GuidedParams | None = None,
        growth: GrowthParams | None = None,
        proxy: Literal["surrogate"] | Classifier | None = None,
        proxy_params: ProxyParams | None = None,
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
        if isinstance(proxy, str) and proxy != "surrogate":
            raise ConfigError(f"proxy must be 'surrogate', a Classifier or None, got {proxy!r}")
        if not all(callable(p) for p in proposers):
            raise ConfigError("proposers must be callables: an input and its label to a Proposer (or None)")
        _refuse_unused(strategy, memory, proposers=proposers, guided=guided, growth=growth, proxy=proxy,
                       proxy_params=proxy_params)  # fmt: skip
        self.strategy: Strategy = strategy
        self.memory_params = memory
        params = memory or MemoryParams()
        tau_sim = params.tau_sim if params.tau_sim is not None else self.default_tau_sim[strategy]
        self.proposers = tuple(proposers)
        self.guided = guided or GuidedParams()
        self.growth = growth or GrowthParams()
        features = memory_features or self._default_features(embedder)
        self.memory_proposer = MemoryProposer(params, features, self._scope(), tau_sim=tau_sim, store=memory_store)
        """The memory (`MemoryProposer`): looked up, asked and told only when ``memory`` is not None."""
        self.repeats = Repeats(self.sampler, params.max_repeats)
        self.proxy: Proxy | None = None
        if proxy is not None:
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

    def _scope(self) -> str:
        """What the memory's rules hold for: the explained model and, for text, the perturbation (a rule
        learned under one operator is never proposed under another)."""
        if isinstance(self.sampler, TextSampler):
            return f"{self.classifier.identity}|perturbation:{self.sampler.perturbation}"
        return self.classifier.identity

    @property
    def use_memory(self) -> bool:
        """Whether earlier explanations are remembered and reused (``memory`` not None)."""
        return self.memory_params is not None

    @property
    def features(self) -> MemoryFeatures:
        """The memory key and HT of this explainer's inputs."""
        return self.memory_proposer.features

    @property
    def memory(self) -> Memory:
        """Where earlier explanations are kept and looked up (the memory proposer's store)."""
        return self.memory_proposer.store

    @property
    def embedder(self) -> SentenceEmbedder | None:
        """The text embedder (None for other kinds of input)."""
        return self.features.embedder if isinstance(self.features, TextMemoryFeatures) else None

    def settings(self) -> Settings:
        recorded = (
            replace(self.memory_params, tau_sim=self.memory_proposer.tau_sim)
            if self.memory_params is not None
            else None
        )
        memory = MemorySettings(
            strategy=self.strategy, memory=recorded, embedder=self.features.identity, guided=self.guided,
            growth=self.growth, proxy=self.proxy.kind if self.proxy else None,
            proxy_params=self.proxy.params if self.proxy else None,
            proposers=tuple(_named(p) for p in self.proposers), index=self.memory_proposer.index_settings(),
        )  # fmt: skip
        return replace(super().settings(), memory=memory)

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Save the memory (atomically: a crash leaves the previous save loadable), and with
        ``proxy="surrogate"`` what the surrogate learned of the model across inputs.

        The memory is for this classifier's identity: an unnamed
        `FunctionClassifier` (a random identity) cannot be saved.
        """
        require_stable_identity(self.classifier, f"a memory saved to {directory}")
        self.memory_proposer.save(directory)
        if self.proxy is not None and self.proxy.classifier is None:
            self.proxy.save(directory, self._scope())

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Use the memory saved in ``directory`` for this classifier and embedder (and, with
        ``proxy="surrogate"``, what its surrogate learned, when it was saved there too)."""
        self.memory_proposer.load(directory)
        if self.proxy is not None and self.proxy.classifier is None:
            self.proxy.load(directory, self._scope())

    def entry_vectors(self, entries: Sequence[MemoryEntry]) -> np.ndarray:
        """The memory vectors of stored entries' inputs (to put back entries recorded elsewhere)."""
        return self.memory_proposer.entry_vectors([self.sampler.features(e.query) for e in entries])

    def recall(self, text: Any, explanation: Explanation) -> None:
        """Remember ``explanation`` as this explainer's own of ``text``: an exact repeat gets it back (a
        resumed run puts back those its results file holds). One cut short by a cap is not remembered."""
        self.repeats.recall(text, explanation)

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

        if not self.use_memory:
            return await explained()
        return await self.repeats.explained(text, self.settings(), self.classifier.identity, explained)

    async def _find(self, run: Explaining) -> tuple[SearchResult, dict[str, Any]]:
        """The memory looked up, its rules proposed (or, "paper", mapped and resumed), the input
        remembered; without the memory, the guided search alone (nothing embedded, looked up or
        remembered)."""
        if not self.use_memory:
            alone, _, proxy_use = await self._guided_levels(run, None)
            return alone, {"proxy": proxy_use}
        memory = self.memory_proposer
        k = memory.params.k_nearest if self.strategy == "guided" else 1
        lookup = await memory.look_up(run.instance, run.target, k)
        if self.strategy == "paper" and lookup.similar:
            return await self._vertical(run, lookup.similar[0], lookup.use)
        proxied: ProxyUse | None = None
        used = lookup.use
        if self.strategy == "guided":
            result, used, proxied = await self._guided_levels(run, lookup)
        else:
            result = await self._levels(run, lambda: self._search(run, None))
        if not run.budget_exhausted:
            memory.remember(run.instance, run.target, result, lookup.vector, empty_anchor=self.strategy == "guided")
            used = memory.count(used, run.stats.queries)
        return result, {"memory_hit": bool(lookup.similar), "memory": used, "proxy": proxied}

    # -- "guided" ----------------------------------------------------------------

    async def _guided_levels(
        self, run: Explaining, lookup: Lookup | None
    ) -> tuple[SearchResult, MemoryUse, ProxyUse | None]:
        """`_guided` at each level of the input (`_levels`): the memory proposes at the first; the proxy's
        use is the last level's."""
        uses: list[tuple[MemoryUse, ProxyUse | None]] = []

        async def search() -> SearchResult:
            result, memory, proxy = await self._guided(run, None if uses else lookup)
            uses.append((memory, proxy))
            return result

        result = await self._levels(run, search)
        return result, uses[0][0], uses[-1][1]

    async def _guided(self, run: Explaining, lookup: Lookup | None) -> tuple[SearchResult, MemoryUse, ProxyUse | None]:
        """The user's proposers, the memory's and the proxy's propose rules, growth its own, `GuidedSearch`
        certifies."""
        memory, instance = self.memory_proposer, run.instance
        keys = memory.features.keys(instance)
        proposers = [p for make in self.proposers if (p := _made(make, instance, run.target)) is not None]
        asked = None
        if lookup is not None:
            asked = await memory.propose(instance, keys, lookup, run.target, run.choice_seed)
            proposers += asked.proposers
            if asked.rules.rules:  # its draws seeded with them too: a rule is never judged on the masks that chose it
                given = run.run_seed if run.run_seed is not None else run.seed
                run.seed = input_seed(given, instance, self.drawn_by(), asked.rules.rules)
                run.rng = np.random.default_rng(run.seed)
        proxied, proxy = await self._proxy_proposer(run, keys)
        proposers += [proxy] if proxy is not None else []
        pool = await self._coverage_pool(run)
        search = self.guided_search(len(instance.features), pool, proposers, run.certifier, *scope(instance))
        result = await self._drive(run, search)
        used = MemoryUse()
        if lookup is not None and asked is not None:
            used = memory.outcome(lookup, asked, instance, result, search.sources)
        if self.proxy is None:
            return result, used, None
        if isinstance(proxy, SurrogateProposer):
            proxied = replace(proxied, samples=proxy.samples, proposals=proxy.proposals)
        learned = self.proxy.learn(proxied, instance, keys, search.labelled(), run.target, result, run.stats.queries)
        return result, used, learned

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
        rng = np.random.default_rng([run.choice_seed, 0x9A0])  # the proxy's draws leave the model's unchanged
        n = len(run.instance.features)
        max_size = min(self.params.max_anchor_size or n, n)
        if proxy.classifier is None:
            made, asked = proxy.surrogate_proposer(
                self.sampler, run.instance, keys, run.target, rng, max_size, run.choice_seed
            )
            return ProxyRun(asked=asked), made
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
        if not positions or self.memory_proposer.params.prune_samples == 0:
            return positions
        rules = [frozenset(positions)] + [frozenset(positions) - {p} for p in positions]
        full, *without = await self._precisions(run, rules, self.memory_proposer.params.prune_samples, "prune")
        return [
            p
            for p, precision in zip(positions, without, strict=True)
            if precision < full - self.memory_proposer.params.prune_margin
        ]

    async def _precisions(self, run: Explaining, rules: list[Rule], n: int, stage: str) -> list[float]:
        """Precision of each rule on ``n`` fresh perturbations (counted as samples, under ``stage``)."""
        drawn = await draw(self.sampler, run.instance, [SampleRequest(rule, n, stage) for rule in rules], run.rng)
        hits = await self._label(run, [t for texts, _ in drawn for t in texts], stage)
        return [float(x) for x in hits.reshape(len(rules), n).mean(axis=1)]


def _made(make: ProposerFactory, instance: Instance, label: Hashable) -> Proposer | None:
    """The proposer ``make`` gives this input; `ConfigError` (before its search samples anything) for
    anything that is not a `Proposer` (name, first, propose) or None, or a proposer named as one of the
    search's own (a step counts under its proposer's name)."""
    made = make(instance, label)
    if made is not None and not isinstance(made, Proposer):
        raise ConfigError(f"proposer {_named(make)} gave {type(made).__name__}, not a Proposer (name, first, propose)")
    if made is not None and (not isinstance(made.name, str) or made.name.partition("-")[0] in _BUILT_IN):
        raise ConfigError(f"proposer {_named(make)} is named {made.name!r}: the names of the search's own stages "
                          f"({', '.join(sorted(_BUILT_IN))}) are not a user's proposer's")  # fmt: skip
    return made


_BUILT_IN = frozenset(stage.partition("-")[0] for stage in STAGES)
"""The names the search's own stages and proposers count under (`STAGES`: root, growth, memory, ...)."""


def _named(factory: ProposerFactory) -> str:
    """A user's proposer as the settings record it: its module and qualified name."""
    kind = factory if callable(factory) and hasattr(factory, "__qualname__") else type(factory)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', repr(kind))}"


def _refuse_unused(strategy: Strategy, memory: MemoryParams | None, **given: Any) -> None:
    """`ConfigError` for a setting the strategy would ignore: "paper" takes none of the guided search's
    (proposers, guided, growth, the proxy, the memory's proposing), "guided" none of the paper's
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
