"""The certifier: one explanation's error budget δ, and the one test every search's rules pass.

Every rule a search chooses to test is given, when it is chosen and
before any sample that judges it is drawn, the next share of δ: the first
(the empty rule, in every search but a resumed one) ``first_share``·δ, the
m-th after it (1 − ``first_share``)·δ·6/(π²m²) (the shares sum to δ). It is then judged only on the
samples drawn for it after it was chosen, at fixed looks (1, 2, 4, … times
its first look), its share split evenly among them:
certified at the first look where its precision reaches τ and its KL lower
bound at that look's share clears the claimed bound (τ − ε_stop by
default, τ strict); refused when its KL upper bound at ``refute`` falls
below τ, or after the last look. The first look is at the fewest samples
on which the rule could be certified at its share if every one kept the
label (at least ``first_look``).

Why the anchor returned then has precision ≥ the bound with probability
≥ 1 − δ, whatever the search: a rule's share is fixed when it is chosen,
its judging samples are drawn after, independently of what chose it, and
each look's event depends only on a fixed number of them; a false claim
needs some chosen rule of precision below the bound to pass some look, and
by the union bound that happens with probability at most Σ_m Σ_looks
δ_m / looks = δ. Refusing a rule never makes a claim, so refusals (early,
heuristic, free of δ) cannot break it. The searches choose; only this
certifies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .bandit import kl_lower_bound, kl_upper_bound
from .params import SearchParams

__all__ = ["Certificate", "Certifier", "Trial", "Verdict", "fewest_agreeing", "share_of"]

Verdict = Literal["certified", "refused", "more"]


def share_of(delta: float, rank: int, first: float) -> float:
    """The share of ``delta`` given to the ``rank``-th rule chosen (from 1): ``first``·δ to the first (the
    empty rule, in every search but a resumed one), then (1 − ``first``)·δ·6/(π²(rank − 1)²): the
    shares sum to δ."""
    if rank == 1:
        return delta * first
    return delta * (1.0 - first) * 6.0 / (math.pi**2 * (rank - 1) ** 2)


def fewest_agreeing(beta: float, bound: float) -> int:
    """The fewest samples, all keeping the label, whose KL lower bound at ``beta`` (log 1/level) clears
    ``bound``: the smallest n with exp(−beta/n) > bound."""
    return math.floor(beta / -math.log(bound)) + 1


@dataclass(frozen=True)
class Certificate:
    """Why a rule is an anchor: at the look of ``n`` samples drawn after it was chosen, ``kept``
    kept the label; ``lower`` and ``upper`` are their KL bounds at ``level`` (the look's share of
    δ); the rule was the ``rank``-th the search chose to test."""

    n: int
    kept: int
    lower: float
    upper: float
    level: float
    rank: int


@dataclass
class Trial:
    """One chosen rule's test: its rank and share, the looks judged so far, and its outcome."""

    rank: int
    share: float
    looked: int = 0
    verdict: Verdict = "more"
    certificate: Certificate | None = None


class Certifier:
    """An explanation's δ, shared among the rules its search chooses; the verdict on each (see the
    module's docstring). ``chosen`` counts the rules given a share."""

    def __init__(self, params: SearchParams) -> None:
        self.params = params
        self.chosen = 0

    @property
    def bound(self) -> float:
        return self.params.bound

    def sizes(self, trial: Trial) -> list[int]:
        """The numbers of fresh samples at which a rule is looked at: from the fewest on which it could
        be certified at its share if every one kept the label (at least ``first_look``), doubling."""
        p = self.params
        first = max(p.first_look, fewest_agreeing(math.log(p.looks / trial.share), self.bound))
        return [first * 2**k for k in range(p.looks)]

    def choose(self) -> Trial:
        """Give the next rule chosen its share of δ (before any sample that judges it is drawn)."""
        self.chosen += 1
        return Trial(self.chosen, share_of(self.params.delta, self.chosen, self.params.first_share))

    def judge(self, trial: Trial, fresh: Sequence[bool]) -> Verdict:
        """The verdict on a rule from its samples since it was chosen, in the order drawn: every look
        these reach is judged (once), then the refutation; "more" asks for samples up to `wanted`."""
        if trial.verdict != "more":
            return trial.verdict
        p, sizes = self.params, self.sizes(trial)
        level = trial.share / p.looks
        while trial.looked < len(sizes) and sizes[trial.looked] <= len(fresh):
            n = sizes[trial.looked]
            kept = sum(fresh[:n])
            trial.looked += 1
            beta = math.log(1.0 / level) / n
            lower = kl_lower_bound(kept / n, beta)
            if kept / n >= p.threshold and lower > self.bound:
                trial.certificate = Certificate(n, kept, lower, kl_upper_bound(kept / n, beta), level, trial.rank)
                trial.verdict = "certified"
                return trial.verdict
        if trial.looked == len(sizes) or self.refuted(fresh):
            trial.verdict = "refused"
        return trial.verdict

    def refuted(self, fresh: Sequence[bool]) -> bool:
        """Its KL upper bound at ``refute`` below τ: the rule is refused (no share is spent)."""
        if not fresh:
            return False
        n = len(fresh)
        return kl_upper_bound(sum(fresh) / n, math.log(1.0 / self.params.refute) / n) < self.params.threshold

    def wanted(self, trial: Trial) -> int:
        """The fresh samples the next look needs."""
        return self.sizes(trial)[min(trial.looked, self.params.looks - 1)]
