"""What suggests rules for the guided search: the `Proposer` protocol, its steps, and `Proposals`.

A proposer looks at what the search has paid for (its `Guide`: every sample labelled, each rule's
reused samples, the rules tried, the anchor so far) and says what to do next: `Judge` a rule (the
search chooses it, and the certifier judges it on samples drawn from then on) or `Draw` samples of
a rule without testing it (to choose better). ``None``: it has nothing more. Nothing a proposer says
certifies anything, and nothing it is handed can change what the certifier counts: rules are
read-only views (`RuleView`), arrays copies or read-only. The search writes nothing into a proposer,
and a proposer changes only its own state, in `propose`. A step counts under its proposer's name
(``stage``: the name, or the name, a dash and more); a step the search cannot take is a `ConfigError`
naming the proposer.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from .._exceptions import ConfigError
from ..search.base import RuleView
from ..search.rules import Rule

__all__ = ["Draw", "Guide", "Judge", "Proposals", "Proposer", "Step", "check_features"]


@dataclass(frozen=True)
class Judge:
    """Judge ``candidate`` under ``stage``. ``refusable`` (a proposal): passed over, unsampled and
    untested, when its reused samples already refuse it (`Guide.refused`); ``probe``: the samples of its
    first probe (by default the search's ``initial_probe``); ``final``: certified, it ends the search; ``traced``: a
    round of the search's trace."""

    candidate: RuleView
    stage: str
    probe: int | None = None
    final: bool = False
    refusable: bool = False
    traced: bool = False


@dataclass(frozen=True)
class Draw:
    """Draw ``n`` (at least 1) samples of ``candidate`` under ``stage`` without testing it."""

    candidate: RuleView
    n: int
    stage: str


Step = Judge | Draw


class Guide(Protocol):
    """What a proposer sees of the search (`GuidedSearch`)."""

    @property
    def n_features(self) -> int: ...

    @property
    def choosable(self) -> tuple[int, ...]: ...

    @property
    def max_size(self) -> int: ...

    @property
    def pool(self) -> np.ndarray: ...

    @property
    def best(self) -> RuleView | None: ...

    @property
    def tried(self) -> Set[Rule]: ...

    def candidate(self, rule: Rule, order: tuple[int, ...] | None = None) -> RuleView: ...

    def labelled(self) -> tuple[np.ndarray, np.ndarray]: ...

    def scored(self) -> np.ndarray | None: ...

    def refused(self, c: RuleView) -> bool: ...

    def owed(self, c: RuleView) -> int: ...

    @property
    def threshold(self) -> float: ...


@runtime_checkable
class Proposer(Protocol):
    """Something that suggests rules for the guided search to test (see the module).

    ``name``: the stage its tests are counted under, and who found an anchor ("memory",
    "growth"); ``first``: asked before the empty rule is tested (the empty rule is then tested only
    if none of its rules is certified)."""

    @property
    def name(self) -> str: ...

    @property
    def first(self) -> bool: ...

    def propose(self, guide: Guide) -> Step | None: ...


@dataclass
class Proposals:
    """Rules known before the search (the memory's; a user's, found their own way),
    tested shortest first and, among rules of one length, most precise on the samples they reuse first
    (ordered when first asked), until one is certified. Each is a refusable `Judge`. ``first``: asked
    before the empty rule; ``final``: the rules whose certificate ends the search (growth does not look
    for a shorter one: the memory's earlier anchors, found by a search that did)."""

    name: str
    rules: Sequence[Rule]
    first: bool = False
    final: Set[Rule] = frozenset()
    _queue: list[Rule] | None = field(default=None, init=False, repr=False)  # ordered when first asked

    def propose(self, guide: Guide) -> Judge | None:
        if self._queue is None:
            self._queue = _ordered(self.rules, guide)
        if guide.best is not None:
            return None  # one of them (or an earlier proposer's) is certified
        while self._queue:
            rule = self._queue.pop(0)
            if rule not in guide.tried:
                cand = guide.candidate(rule, tuple(sorted(rule)))
                return Judge(cand, self.name, final=rule in self.final, refusable=True)
        return None


def _ordered(rules: Sequence[Rule], guide: Guide) -> list[Rule]:
    """The distinct non-empty ``rules`` a rule of this search may be (no context feature, at most
    ``max_size`` features), shortest first, then by precision on the samples they reuse."""
    distinct = [check_features(r, guide.n_features) for r in dict.fromkeys(frozenset(r) for r in rules) if r]
    choosable = set(guide.choosable)
    fits = [r for r in distinct if r <= choosable and len(r) <= guide.max_size]
    known = [guide.candidate(r, tuple(sorted(r))) for r in fits]
    return [c.rule for c in sorted(known, key=lambda c: (len(c.rule), -c.laplace))]


def check_features(rule: Rule, n_features: int) -> Rule:
    """``rule``, when it names only features of an input of ``n_features``; else a `ConfigError`."""
    if not all(0 <= f < n_features for f in rule):
        raise ConfigError(f"proposed rule {sorted(rule)} names a feature outside 0..{n_features - 1}")
    return rule
