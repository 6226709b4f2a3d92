"""The certifier: one explanation's error budget δ, and the one test every search's rules pass.

Every rule a search chooses to test is given, when it is chosen and before any sample that judges it
is drawn, the next share of δ: the first (the empty rule, in every search but a resumed one)
``empty_share``·δ, the m-th after it (1 − ``empty_share``)·δ·6/(π²m²) (the shares sum to δ). It is
then judged only on the samples drawn for it after it was chosen, one at a time in the order drawn, by
a bet against "its precision is below the claimed bound b" (τ − ε_stop by default, τ strict): before
each sample the certifier stakes a fraction λ of its wealth (starting at 1) on the sample keeping the
label, λ = (q − b)/(b(1 − b)) for its current guess q of the precision (1 − ``bet_gap``·(1 − b),
held as ``bet_weight`` samples, updated by the samples so far;
λ = 0 when q ≤ b), so that its wealth is multiplied by q/b when the sample keeps the label and by
(1 − q)/(1 − b) when not. The rule is certified at the first sample where the wealth reaches
1/share and (by default, Anchors' criterion) the precision of its samples so far reaches τ; refused
when the KL upper bound of its samples at ``refute`` falls below τ, or as soon as it could not be
certified within ``patience`` times the fewest samples that could certify it (`fewest_agreeing`) even
if every sample left kept the label (`Certifier.soonest`). Samples are drawn in requests no larger
than what could still certify it if all kept the label (`Certifier.wanted`).

Why the anchor returned then has precision ≥ b with probability ≥ 1 − δ, whatever the search: a rule's
share is fixed when it is chosen, and its judging samples are
drawn after, independently of what chose it, each keeping the label with its precision p. Each stake is
chosen from the samples before it only, so when p ≤ b a sample multiplies the wealth by 1 + λ(p − b) ≤ 1
on average: the wealth is a nonnegative supermartingale starting at 1, and by Ville's inequality it ever
reaches 1/share with probability at most the share — however often it is looked at, and wherever the
search stops. A false claim needs some chosen rule of precision below b to reach its 1/share, which by
the union bound happens with probability at most Σ_m share_m ≤ δ. Refusing a rule never makes a claim,
so refusals (early, heuristic, free of δ) cannot break it. A refused rule is no longer sampled to be
judged, but a sample of it drawn later (growth samples a refused rule to choose what to add to it) goes
on with its bet: the bet never depended on why a sample was drawn, only on its being drawn from the rule
after the rule was chosen, and Ville's inequality holds at any stopping time; such a rule may still be
certified, at its own share. The searches choose; only this certifies.

Against three fixed looks that split a rule's share (this module's earlier schedule), the bet looks
after every sample at the whole share: a rule that keeps the label on every sample is certified within
a few samples of the floor, the fewest all-agreeing samples that certify it at its share in one look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .bandit import kl_bounds, kl_upper_bound
from .params import SearchParams

__all__ = ["Certificate", "Certifier", "Trial", "Verdict", "fewest_agreeing", "share_of"]

Verdict = Literal["certified", "refused", "more"]


def share_of(delta: float, rank: int, empty: float) -> float:
    """The share of ``delta`` given to the ``rank``-th rule chosen (from 1): ``empty``·δ to the first (the
    empty rule, in every search but a resumed one), then the m-th after it (1 − ``empty``)·δ·6/(π²m²):
    the shares sum to δ."""
    if rank == 1:
        return delta * empty
    return delta * (1.0 - empty) * 6.0 / (math.pi**2 * (rank - 1) ** 2)


def fewest_agreeing(beta: float, bound: float) -> int:
    """The fewest samples, all keeping the label, whose KL lower bound at ``beta`` (log 1/level) clears
    ``bound``: the smallest n with exp(−beta/n) > bound."""
    return math.floor(beta / -math.log(bound)) + 1


@dataclass(frozen=True)
class Certificate:
    """Why a rule is an anchor: of the first ``n`` samples drawn after it was chosen, ``kept`` kept the
    label, and the bet against it (see the module) reached 1/``level`` there (``wealth``: its log);
    ``lower`` and ``upper`` are their KL bounds at ``level``, the rule's share of δ; the rule was the
    ``rank``-th the search chose to test."""

    n: int
    kept: int
    lower: float
    upper: float
    level: float
    rank: int
    wealth: float = 0.0


@dataclass
class Trial:
    """One chosen rule's test: its rank and share, the bet on the samples judged so far (``seen``, of
    which ``kept`` kept the label; ``wealth``: its log), and its outcome."""

    rank: int
    share: float
    seen: int = 0
    kept: int = 0
    wealth: float = 0.0
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

    def choose(self) -> Trial:
        """Give the next rule chosen its share of δ (before any sample that judges it is drawn)."""
        self.chosen += 1
        return Trial(self.chosen, share_of(self.params.delta, self.chosen, self.params.empty_share))

    def guess(self, seen: int, kept: int) -> float:
        """The precision the next stake bets on: ``bet_gap`` of the way from 1 down to the bound, held as
        ``bet_weight`` samples, and the ``kept`` of ``seen`` so far."""
        p = self.params
        prior = 1.0 - p.bet_gap * (1.0 - self.bound)
        return (kept + p.bet_weight * prior) / (seen + p.bet_weight)

    def step(self, seen: int, kept: int, agreed: bool) -> float:
        """The log of what one sample multiplies the wealth by, after ``kept`` of ``seen``."""
        q, b = self.guess(seen, kept), self.bound
        if q <= b:
            return 0.0
        return math.log(q / b) if agreed else math.log((1.0 - q) / (1.0 - b))

    def patience(self, trial: Trial) -> int:
        """The most fresh samples a rule is given: ``patience`` × the fewest that could certify it."""
        return math.ceil(self.params.patience * fewest_agreeing(math.log(1.0 / trial.share), self.bound))

    def judge(self, trial: Trial, fresh: Sequence[bool]) -> Verdict:
        """The verdict on a rule from its samples since it was chosen, in the order drawn: the bet goes on
        over every sample not yet judged (certified at the first that reaches 1/share), then the
        refutation, and futility (refused once no sample left within its patience could certify it: what
        waiting out the patience would say, sooner); "more" asks for samples up to `wanted`. A refused
        rule's bet goes on over samples drawn later, and may still certify it."""
        if trial.verdict == "certified":
            return trial.verdict
        for agreed in fresh[trial.seen :]:
            trial.wealth += self.step(trial.seen, trial.kept, agreed)
            trial.seen += 1
            trial.kept += int(agreed)
            if self._passes(trial, trial.seen, trial.kept, trial.wealth):
                trial.certificate = self._certificate(trial)
                trial.verdict = "certified"
                return trial.verdict
        if trial.verdict == "more" and (self.refuted(fresh) or self.soonest(trial) is None):
            trial.verdict = "refused"
        return trial.verdict

    def refuted(self, fresh: Sequence[bool]) -> bool:
        """Its KL upper bound at ``refute`` below τ: the rule is refused (no share is spent)."""
        if not fresh:
            return False
        n = len(fresh)
        return kl_upper_bound(sum(fresh) / n, math.log(1.0 / self.params.refute) / n) < self.params.threshold

    def wanted(self, trial: Trial) -> int:
        """The fresh samples at which the rule could be certified soonest (`soonest`; a rule that could not
        is refused), at least one more than those judged."""
        soonest = self.soonest(trial)
        return max(soonest if soonest is not None else self.patience(trial), trial.seen + 1)

    def soonest(self, trial: Trial) -> int | None:
        """The fresh samples at which the rule would be certified if every one not yet judged kept the
        label: those judged and as many more as it takes (None: not within its `patience`; by default,
        at once when even then its precision would be below τ there)."""
        seen, kept, wealth, limit = trial.seen, trial.kept, trial.wealth, self.patience(trial)
        if self.params.certify == "default" and kept + (limit - seen) < self.params.threshold * limit:
            return None  # its precision, rising with every sample kept, is below τ even at its patience
        while seen < limit:
            wealth += self.step(seen, kept, True)
            seen += 1
            kept += 1
            if self._passes(trial, seen, kept, wealth):
                return seen
        return None

    def _passes(self, trial: Trial, seen: int, kept: int, wealth: float) -> bool:
        """Whether a bet at ``wealth`` (its log) after ``kept`` of ``seen`` certifies ``trial``'s rule: the
        wealth reaches 1/share and, by default, the precision reaches τ."""
        p = self.params
        return wealth >= math.log(1.0 / trial.share) and (p.certify == "strict" or kept >= p.threshold * seen)

    def _certificate(self, trial: Trial) -> Certificate:
        n, kept = trial.seen, trial.kept
        lower, upper = kl_bounds(n, kept, math.log(1.0 / trial.share))
        return Certificate(n, kept, lower, upper, trial.share, trial.rank, trial.wealth)
