"""MAnchors' memory as one proposer (`MemoryProposer`): it looks each input up, cuts what is not similar
enough, proposes what it has when its record says asking pays, and remembers the input once explained.

What it proposes: earlier anchors made of this input's own keys (words, predicates), and similar
inputs' anchors mapped onto it (HT), as `Proposals` (`recalled`). An earlier anchor made only of this
input's keys ends the search when certified: the search that found it already looked for a shorter
one. On a near repeat (`near`) those are tested before the empty rule. A similar input's anchor mapped
by HT is tested after it, and growth still looks for a shorter rule (a mapped rule may hold words this
input does not need). Whether it is asked is its record's (`ProposerRecord`): a seeded control arm of
growth alone measures what asking saves. Its settings are one `MemoryParams`; its store (a `Memory`:
this process's `RuleMemory` by default, a Ray run's view) comes in through one door, `use`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from .._sync import in_thread
from ..memory.features import MemoryFeatures
from ..memory.store import Memory, MemoryEntry, RuleMemory
from ..samplers.base import Instance
from ..search.base import SearchResult
from ..search.rules import Rule
from .base import Proposals, Proposer
from .record import ProposerRecord, RecordParams

__all__ = ["Lookup", "MemoryParams", "MemoryProposer", "MemoryRules", "MemoryUse", "near", "recalled"]


@dataclass(frozen=True)
class MemoryUse:
    """How MAnchors used its memory for one input.

    ``similarity``: the cosine similarity of the nearest remembered input
    with this label (None: none yet); ``lookup_s``: the time to embed this
    input and look it up; ``source``: the remembered input reused, on a hit;
    ``proposals`` ("guided"): the rules the memory proposed, as features;
    ``ht_rule``, ``ht_pruned`` ("paper"): the rule HT mapped onto this input
    and the features pruned from it; ``repeat``: the input was explained
    before with the same settings, and this is that explanation, at no query;
    ``asked`` ("guided"): whether the memory's rules were tested (None: it had
    none; False: the record's control arm, growth alone), ``certified``:
    whether the anchor is one of them, ``saved``:
    the queries asking the memory saved on this stream so far, by its record
    (`ProposerRecord`).
    """

    similarity: float | None = None
    lookup_s: float = 0.0
    source: str | None = None
    proposals: tuple[tuple[str, ...], ...] = ()
    ht_rule: tuple[str, ...] = ()
    ht_pruned: tuple[str, ...] = ()
    repeat: bool = False
    asked: bool | None = None
    certified: bool = False
    saved: float = 0.0


@dataclass(frozen=True)
class MemoryParams:
    """MAnchors' memory, whole (recorded as given in ``meta.settings.manchors``).

    tau_sim: cosine similarity of the inputs' memory vectors from which a remembered input is reused
        (None: the strategy's, 0.4 for "guided", whose every answer is certified whatever the
        neighbour; the paper's 0.6 for "paper").
    tau_mid: precision of the intermediate rule remembered (0.8).
    tau_first: cosine similarity of the nearest remembered input from which ("guided") an earlier
        anchor made of this input's words is tested before the empty rule, when that input needed one.
    k_nearest: similar inputs whose anchors are proposed ("guided"; "paper" maps the nearest).
    max_proposals: most rules the memory proposes per input ("guided").
    max_repeats: exact repeats remembered whole (the least recently asked for dropped).
    record: how its record decides whether to ask it (`RecordParams`; "guided").
    prune_samples: perturbations per rule when pruning the HT rule ("paper").
    prune_margin: a word of the HT rule is kept when the rule without it is less precise, on those
        samples, by more than this ("paper"; 0.1, chosen on the RT-Polarity tuning stream: at 0 the
        anchors' coverage fell 15% short of Anchors', at 0.1 6%).
    """

    tau_sim: float | None = None
    tau_mid: float = 0.8
    tau_first: float = 0.0
    k_nearest: int = 3
    max_proposals: int = 5
    max_repeats: int = 10_000
    record: RecordParams = field(default_factory=RecordParams)
    prune_samples: int = 50
    prune_margin: float = 0.1

    def __post_init__(self) -> None:
        if self.tau_sim is not None:
            check_number("tau_sim", self.tau_sim, low=-1.0, high=1.0, open_low=False, open_high=False)
        check_number("tau_mid", self.tau_mid, high=1.0, open_high=False)
        check_number("tau_first", self.tau_first, low=-1.0, high=1.0, open_low=False, open_high=False)
        for name in ("k_nearest", "max_proposals", "max_repeats", "prune_samples"):
            check_int(name, getattr(self, name), minimum=0)
        check_number("prune_margin", self.prune_margin, low=0.0, high=1.0, open_low=False)
        if not isinstance(self.record, RecordParams):
            raise ConfigError(f"record must be a RecordParams, got {type(self.record).__name__}")

    GUIDED_ONLY = ("tau_first", "k_nearest", "max_proposals", "record")
    PAPER_ONLY = ("prune_samples", "prune_margin")


@dataclass(frozen=True)
class Lookup:
    """One input looked up: its memory ``vector``, the remembered inputs of its label at least τ_sim
    similar (``similar``, nearest first) and the record begun (``use``)."""

    vector: np.ndarray
    similar: tuple[MemoryEntry, ...]
    use: MemoryUse


@dataclass(frozen=True)
class Asked:
    """What the memory put to one input's search: its ``rules``, whether they were asked (None: it had
    none; False: the record's control arm) and the proposers that carry them."""

    rules: MemoryRules
    asked: bool | None
    proposers: tuple[Proposer, ...] = ()


@dataclass(frozen=True)
class MemoryRules:
    """What the memory has for one input, most promising first: ``exact``, earlier anchors of its label
    made only of its keys (shortest and most often found first); ``mapped``, the anchors of similar
    inputs mapped onto it by HT (none of them an exact one)."""

    exact: tuple[Rule, ...] = ()
    mapped: tuple[Rule, ...] = ()

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self.exact + self.mapped

    def limited(self, most: int) -> MemoryRules:
        """The first ``most`` rules, exact ones first."""
        kept = set(self.rules[:most])
        return MemoryRules(tuple(r for r in self.exact if r in kept), tuple(r for r in self.mapped if r in kept))

    def proposers(self, *, first: bool) -> list[Proposals]:
        """The rules as proposers named "memory": the exact ones final, and asked before the empty rule
        when ``first``; otherwise all of them together, after it."""
        if first and self.exact:
            later = [Proposals("memory", self.mapped)] if self.mapped else []
            return [Proposals("memory", self.exact, first=True, final=frozenset(self.exact)), *later]
        return [Proposals("memory", self.rules, final=frozenset(self.exact))] if self.rules else []


def recalled(
    memory: Memory, features: MemoryFeatures, instance: Instance, keys: Sequence[str],
    similar: Sequence[MemoryEntry], label: Hashable,
) -> MemoryRules:  # fmt: skip
    """The memory's rules for ``instance`` (of ``label``; ``keys``: its features' keys), given its
    ``similar`` remembered inputs."""
    first: dict[str, int] = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    exact = [frozenset(first[key] for key in anchor) for anchor, _ in memory.anchored(set(first), label=label)]
    mapped = [frozenset(features.horizontal(_anchor_as_rule(entry), instance))
              for entry in similar if entry.anchor_positions]  # fmt: skip
    exact = list(dict.fromkeys(r for r in exact if r))
    return MemoryRules(tuple(exact), tuple(r for r in dict.fromkeys(mapped) if r and r not in exact))


def near(similar: Sequence[MemoryEntry], similarity: float | None, keys: Sequence[str], tau_first: float) -> bool:
    """Whether this input is a near repeat of the nearest remembered one: it needed an anchor, every key
    of that anchor is one of this input's, and their cosine similarity is at least ``tau_first``."""
    if not similar or not similar[0].anchor_keys:
        return False
    return set(similar[0].anchor_keys) <= set(keys) and (similarity or 0.0) >= tau_first


def _anchor_as_rule(entry: MemoryEntry) -> MemoryEntry:
    """The entry with its anchor in place of its intermediate rule (for `MemoryFeatures.horizontal`)."""
    return replace(entry, rule_positions=entry.anchor_positions, rule_features=entry.anchor_features,
                   rule_vectors=entry.anchor_vectors)  # fmt: skip


class MemoryProposer:
    """MAnchors' memory of earlier explanations as the guided search's proposer (see the module).

    ``features``: what a kind of input gives the memory (its key, HT); ``scope``: what its rules hold
    for (the explained model and, for text, the perturbation); ``tau_sim``: the cut, resolved from
    ``params.tau_sim`` by the explainer's strategy; ``store``: a `Memory` to use from the start.
    """

    name = "memory"

    def __init__(
        self, params: MemoryParams, features: MemoryFeatures, scope: str, *, tau_sim: float, store: Memory | None = None
    ) -> None:
        self.params, self.features, self.scope, self.tau_sim = params, features, scope, tau_sim
        self.record = ProposerRecord()
        """Its record on this stream (`ProposerRecord`): whether it is asked."""
        self._store: Memory | None = None
        if store is not None:
            self.use(store)

    @property
    def identity(self) -> tuple[int, str, str]:
        """What a store for it is made for: vector size, embedder, and what its rules hold for."""
        return self.features.dim, self.features.identity, self.scope

    @property
    def store(self) -> Memory:
        """Where earlier inputs are kept and looked up (a new `RuleMemory` until one is `use`d)."""
        if self._store is None:
            self._store = RuleMemory(*self.identity)
        return self._store

    def use(self, store: Memory) -> None:
        """The one door a store comes in by (one loaded, a Ray run's view); a `RuleMemory` made for
        another embedder or scope is a `ConfigError`."""
        if isinstance(store, RuleMemory) and (made_for := (store.dim, store.embedder_id, store.scope)) != self.identity:
            raise ConfigError(f"this memory was made for {made_for}, not {self.identity}")
        self._store = store

    @property
    def local(self) -> RuleMemory:
        """The store, when it is this process's own `RuleMemory` (what `save` writes); a `ConfigError`
        for one it only looks up (a Ray run's)."""
        store = self.store
        if not isinstance(store, RuleMemory):
            raise ConfigError(f"this explainer's memory is not its own ({store!r}): save or load it where it is")
        return store

    def save(self, directory: str | os.PathLike[str]) -> None:
        self.local.save(directory)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Use the store saved in ``directory`` for this embedder and scope."""
        dim, embedder, scope = self.identity
        self.use(RuleMemory.load(directory, embedder_id=embedder, dim=dim, scope=scope))

    def index_settings(self) -> dict[str, int] | None:
        """The HNSW settings of its own store (the defaults until it makes one); None for one elsewhere."""
        if self._store is None:
            return {"ef": RuleMemory.EF, "m": RuleMemory.M, "per_key": RuleMemory.PER_KEY}
        if isinstance(self._store, RuleMemory):
            return {"ef": self._store.ef, "m": self._store.m, "per_key": self._store.per_key}
        return None

    async def look_up(self, instance: Instance, label: Hashable, k: int) -> Lookup:
        """``instance`` embedded and its ``k`` nearest remembered inputs of ``label`` looked up; those at
        least τ_sim similar kept."""
        started = time.perf_counter()
        vector = (await in_thread(self.features.embed, [instance]))[0]
        near = self.store.neighbours(vector, label=label, k=max(k, 1))
        use = MemoryUse(near[0][1] if near else None, time.perf_counter() - started)
        return Lookup(vector, tuple(entry for entry, similarity in near if similarity >= self.tau_sim), use)

    async def propose(
        self, instance: Instance, keys: Sequence[str], lookup: Lookup, label: Hashable, seed: int
    ) -> Asked:
        """What it has for ``instance`` (``keys``: its features' keys), and whether it is asked (its record's
        seeded draw): the proposers the guided search asks, or none (the control arm)."""
        if not lookup.similar:
            return Asked(MemoryRules(), None)
        args = (self.store, self.features, instance, keys, lookup.similar, label)
        rules = (await in_thread(recalled, *args)).limited(self.params.max_proposals)
        if not rules.rules:
            return Asked(rules, None)
        asked = self.record.ask(self.params.record, seed, instance.query)
        first = near(lookup.similar, lookup.use.similarity, keys, self.params.tau_first)
        return Asked(rules, asked, tuple(rules.proposers(first=first)) if asked else ())

    def outcome(
        self, lookup: Lookup, asked: Asked, instance: Instance, result: SearchResult, sources: dict[Rule, str]
    ) -> MemoryUse:
        """The record of what it did for this input (what ``meta.memory`` says)."""
        if not lookup.similar:
            return lookup.use
        proposed = asked.rules.rules if asked.asked else ()  # the control arm: growth alone, nothing proposed
        named = tuple(tuple(instance.features[p] for p in sorted(r)) for r in proposed)
        certified = sources.get(result.rule) == self.name and result.success
        return replace(lookup.use, source=lookup.similar[0].query, proposals=named, asked=asked.asked,
                       certified=certified)  # fmt: skip

    def count(self, use: MemoryUse, queries: int) -> MemoryUse:
        """Count an input it had rules for in its record (asked, or the control arm); ``use`` with what
        asking it saved on this stream so far."""
        if use.asked is None:
            return use
        self.record.add(use.asked, queries)
        return replace(use, saved=round(self.record.saved, 1))

    def remember(
        self, instance: Instance, label: Hashable, result: SearchResult, vector: np.ndarray, *, empty_anchor: bool
    ) -> None:
        """Store the input with its intermediate rule (at τ_mid) and its anchor; with ``empty_anchor``
        ("guided") also when only the anchor is non-empty (an empty anchor says a neighbour needs none)."""
        mid = result.intermediate(self.params.tau_mid)
        if not mid.rule and not (empty_anchor and result.success):
            return  # an empty rule maps onto nothing
        names, found = instance.features, result.success
        anchor = tuple(sorted(result.rule))
        keys = self.features.keys(instance)
        entry = MemoryEntry(
            query=instance.query,
            features=names,
            label=label,
            rule_positions=mid.rule,
            rule_features=tuple(names[p] for p in mid.rule),
            rule_vectors=self.features.describe(instance, mid.rule),
            precision=mid.precision,
            coverage=mid.coverage,
            anchor_positions=anchor if found else (),
            anchor_features=tuple(names[p] for p in anchor) if found else (),
            anchor_keys=tuple(keys[p] for p in anchor) if found and keys else (),
            anchor_vectors=self.features.describe(instance, anchor) if found else (),
        )
        self.store.add(entry, vector)

    def entry_vectors(self, instances: Sequence[Any]) -> np.ndarray:
        """The memory vectors of stored entries' inputs (their instances), to put them back elsewhere."""
        return self.features.embed(list(instances))
