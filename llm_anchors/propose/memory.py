"""The memory as a proposer: earlier anchors made of this input's own words, and similar inputs'
anchors mapped onto it (HT), as `Proposals`.

Which rules it has for an input is `recalled`; whether it is asked for them is its record's
(`ProposerRecord`, in the explainer). An earlier anchor made only of this input's keys (words,
predicates) ends the search when certified: the search that found it already looked for a shorter one.
On a near repeat (`near`) those are tested before the empty rule. A similar input's anchor mapped by
HT is tested after it, and growth still looks for a shorter rule (a mapped rule may hold words this
input does not need).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from ..memory.features import MemoryFeatures
from ..memory.store import Memory, MemoryEntry
from ..samplers.base import Instance
from ..search.rules import Rule
from .base import Proposals

__all__ = ["MemoryRules", "near", "recalled"]


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
