"""MAnchors' guided search: the memory and a proxy propose, growth extends, the certifier certifies.

`GuidedSearch` is the search MAnchors runs by default: this project's
propose-and-verify search, not the MAnchors paper's Algorithms 1–3 (HT,
pruning, VT: ``strategy="paper"``, which resumes `BeamSearch` from the
mapped rule). It spends samples only on rules it chooses to test, and the
`Certifier` judges each on samples drawn after it was chosen:

1. the empty rule is tested first (its samples also estimate every
   one-word rule for free);
2. the rules the memory proposes (earlier anchors mapped onto this input)
   and those a proxy proposes (`proposer`, which sees the root's samples)
   are tested shortest first; one whose reused samples already miss twice
   is passed over without a sample (passing over costs no share of δ);
3. otherwise, and to look for a rule shorter than an accepted proposal,
   the rule grows: the current rule is sampled up to ``parent_samples``
   (``per_feature`` per feature it could still add), and a ridge-logistic
   fit of every sample labelled so far ranks the features it lacks
   (`credit`). The next rule tested adds the most credited one and, at
   once, the next ones while the rule could not pass anyway: its reused
   samples already refuse it (KL upper bound at level ``skip`` below τ),
   or the fit predicts its precision below ``lookahead``. A rule that grew
   by several features and is certified is then bisected: prefixes of the
   features added are tested, halving the gap, and the shortest certified
   one is the anchor (bisection finds *a* shorter certified prefix, not
   necessarily the shortest: whether a prefix passes is itself random).

Choosing never certifies anything; every rule tested spends a share of δ,
so the claim holds of the anchor returned however many were tested.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Generator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from .._logistic import ridge_logistic, sigmoid
from .base import Candidate, SampleRequest, Samples, Search, SearchResult, kl_bounds
from .certify import Certifier
from .params import SearchParams
from .rules import Rule, covers

__all__ = ["GuidedParams", "GuidedSearch", "Proposals", "Proposer", "credit"]


@runtime_checkable
class Proposer(Protocol):
    """Something that suggests rules for the guided search to test; nothing it says certifies anything.

    ``name`` is the stage its rules are judged under ("memory", "proxy"). `propose` is called once, when
    the empty rule was refused, with every sample labelled so far (which features each kept, whether it
    kept the label)."""

    @property
    def name(self) -> str: ...

    def propose(self, present: np.ndarray, kept: np.ndarray) -> Sequence[Rule]: ...


@dataclass(frozen=True)
class Proposals:
    """Rules known before the search (the memory's; a proxy classifier's, found on its own queries).
    ``first``: tested before the empty rule (the memory's, when the input nearest this one needed an
    anchor: its empty rule would most likely be refused, at the cost of a probe); ``final``: one of
    them certified ends the search (the memory's: the search that found it already looked for a
    shorter one), where otherwise growth still looks for a shorter rule."""

    name: str
    rules: tuple[Rule, ...]
    first: bool = False
    final: bool = False

    def propose(self, present: np.ndarray, kept: np.ndarray) -> Sequence[Rule]:
        return self.rules


@dataclass(frozen=True)
class GuidedParams:
    """Every setting of the guided search (see `GuidedSearch`), recorded whole in each explanation.

    probe: samples drawn at a time for a rule being judged (the certifier may refuse it after each).
    proposal_probe: the first probe of a proposed rule (a wrong proposal is refused at its first miss).
    parent_samples, per_feature: a rule gets up to ``parent_samples`` samples, ``per_feature`` for each
        feature it could still add, before growth chooses the next features from them.
    lookahead: growth adds at once the next most credited features while the fit predicts the rule's
        precision below this (None: one feature per step).
    skip: growth also adds the next while the rule's reused samples put its KL upper bound at this
        level below τ (None: never).
    prediction_rows: rows of the coverage pool on which the fit predicts a rule's precision.
    fit_weight: how many of a rule's reused samples the fit's prediction counts as.
    reused_misses: a proposal whose reused samples already miss this many times is passed over.
    credit_l2, credit_bias_l2, credit_iterations: the ridge penalty of growth's logistic fit on the
        features' weights and on its bias (near 0: the base rate is not shrunk), its Newton iterations.
    """

    probe: int = 20
    proposal_probe: int = 10
    parent_samples: int = 75
    per_feature: int = 6
    lookahead: float | None = 0.8
    skip: float | None = 0.5
    prediction_rows: int = 512
    fit_weight: float = 2.0
    reused_misses: int = 2
    credit_l2: float = 1.0
    credit_bias_l2: float = 1e-3
    credit_iterations: int = 15

    def __post_init__(self) -> None:
        for name in ("probe", "proposal_probe", "parent_samples", "per_feature", "prediction_rows", "reused_misses",
                     "credit_iterations"):  # fmt: skip
            check_int(name, getattr(self, name))
        check_number("lookahead", self.lookahead, high=1.0, open_high=False, optional=True)
        check_number("skip", self.skip, high=1.0, optional=True)
        check_number("fit_weight", self.fit_weight, open_low=False, high=math.inf)
        check_number("credit_l2", self.credit_l2, high=math.inf)
        check_number("credit_bias_l2", self.credit_bias_l2, high=math.inf)


Found = Generator[list[SampleRequest], list[Samples], Candidate | None]
"""What `GuidedSearch._propose` runs: it returns the first proposal certified, or None."""


class GuidedSearch(Search):
    """Root, proposals, then growth; every rule tested judged by the certifier.

    ``proposers``: asked once the empty rule is refused (`Proposer`: the memory's rules, a proxy's);
    their rules are tested shortest first, each under its proposer's name as stage. Growth's steps are
    staged "greedy-k" (k the rule's length). ``guided``: every other setting (`GuidedParams`).
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        *,
        guided: GuidedParams | None = None,
        proposers: Sequence[Proposer] = (),
        certifier: Certifier | None = None,
        context: Collection[int] = (),
        max_size: int | None = None,
        rate_per_sample: bool = False,
    ) -> None:
        super().__init__(n_features, coverage_pool, params, certifier, context, max_size, rate_per_sample)
        self.guided = guided or GuidedParams()
        self.proposers = list(proposers)
        self.sources: dict[Rule, str] = {}
        self._tried: set[Rule] = set()
        self._final: set[Rule] = set()  # rules whose certificate ends the search (`Proposals.final`)

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        g = self.guided
        best = None
        if early := [p for p in self.proposers if isinstance(p, Proposals) and p.first]:
            best = yield from self._propose(self._consult(early))
        root = self._candidate(frozenset(), ())
        if best is None and (yield from self._certify(root, "root", g.probe)):
            self._best = root
            return self._result(root)
        if best is None:
            best = yield from self._propose(self._consult([p for p in self.proposers if p not in early]))
        if best is not None and best.rule in self._final:
            return self._result(best)
        path = [root]
        while len(path[-1].rule) < self._max_size and (best is None or len(path[-1].rule) + 1 < len(best.rule)):
            parent = path[-1]
            wanted = min(g.parent_samples, g.per_feature * (len(self.choosable) - len(parent.rule)))
            if parent.n < wanted:
                yield from self._sample([(parent, wanted - parent.n)], f"greedy-{len(parent.rule)}")
            step = self._grow(parent, best)
            if step is None:
                break
            path.append(step)
            self._trace(len(step.rule), 1, [step])
            if (yield from self._certify(step, f"greedy-{len(step.rule)}", g.probe)):
                best = self._best = step
                if len(step.rule) - len(parent.rule) > 1:
                    best = yield from self._bisect(parent, step)
        if best is not None:
            return self._result(best)
        return self._fallback()

    def _consult(self, proposers: Sequence[Proposer]) -> list[Rule]:
        """The rules of ``proposers``, on every sample labelled so far (a rule keeps its first proposer's name)."""
        rules: list[Rule] = []
        present, kept = self.labelled()  # one copy of the samples for every proposer
        for proposer in proposers:
            for rule in self._checked(proposer.propose(present, kept)):
                self.sources.setdefault(rule, proposer.name)
                rules.append(rule)
                if isinstance(proposer, Proposals) and proposer.final:
                    self._final.add(rule)
        return rules

    def _propose(self, rules: Sequence[Rule]) -> Found:
        """The first of ``rules`` certified, if any: shortest first and, among rules of one length
        (one coverage, for text), highest precision on the samples they reuse first."""
        fits = [rule for rule in dict.fromkeys(rules) if len(rule) <= self._max_size]
        order = sorted((self._candidate(r, tuple(sorted(r))) for r in fits), key=lambda c: (len(c.rule), -c.laplace))
        for known in order:
            if known.rule in self._tried:
                continue
            cand = self._candidate(known.rule, known.order)  # with what earlier proposals drew
            self._tried.add(cand.rule)
            if cand.n - cand.positives >= self.guided.reused_misses:
                continue  # refused by samples it reuses: passed over, no share spent
            g = self.guided
            if (yield from self._certify(cand, self.sources[cand.rule], g.probe, first=g.proposal_probe)):
                self._best = cand
                return cand
        return None

    def _checked(self, rules: Sequence[Rule]) -> list[Rule]:
        """Distinct non-empty rules, shortest first, each naming features of this input (a rule holding
        a context feature is passed over)."""
        ordered = sorted(dict.fromkeys(frozenset(r) for r in rules if r), key=len)
        for rule in ordered:
            if not all(0 <= f < self.n_features for f in rule):
                raise ConfigError(f"proposed rule {sorted(rule)} names a feature outside 0..{self.n_features - 1}")
        choosable = set(self.choosable)
        return [rule for rule in ordered if rule <= choosable]

    # -- growth -----------------------------------------------------------

    def _grow(self, parent: Candidate, best: Candidate | None) -> Candidate | None:
        """The next rule to test: ``parent`` and the feature not tried before that keeps the label
        most, by a ridge-logistic fit of every sample of this input labelled so far (`credit`; ties
        by precision on the samples it reuses), then the next most credited while the rule could
        not pass anyway (`_ahead`).

        Each extension reuses only about half of its parent's samples, and the most precise on
        those, among dozens, is mostly the luckiest: growth then adds words the model does not need.
        The fit pools every sample, each feature's weight measured with the others held.
        """
        floor = best.coverage if best is not None else -1.0
        cands = [c for c in self._extend([parent]) if c.coverage > floor and c.rule not in self._tried]
        if not cands:
            return None
        weights, bias = credit(*self.labelled(), self.guided)
        step = max(cands, key=lambda c: (max(weights[f] for f in c.rule - parent.rule), c.laplace))
        limit = len(best.rule) - 1 if best is not None else self._max_size
        step = self._ahead(step, weights, bias, floor, limit)
        self._tried.add(step.rule)
        return step

    def _ahead(self, step: Candidate, weights: np.ndarray, bias: float, floor: float, limit: int) -> Candidate:
        """``step`` with the next most credited features (positive credit only) added while its reused
        samples refuse it or the fit predicts it below ``lookahead``; at most ``limit`` features, its
        coverage above ``floor``, never a rule tried before. A rule its samples refused is not tried
        again; one the fit only predicted to fail may be, by `_bisect`."""
        cand = step
        rest = iter(sorted((f for f in self.choosable if f not in step.rule), key=lambda f: -weights[f]))
        while len(cand.rule) < limit:
            refused = self._refused_by_reuse(cand)
            lookahead = self.guided.lookahead
            if not refused and (lookahead is None or self._predicted(cand, weights, bias) >= lookahead):
                break
            f = next(rest, None)
            if f is None or weights[f] <= 0:
                break
            rule = cand.rule | {f}
            if rule in self._tried or covers(rule, self._pool).mean() <= floor:
                break
            if refused:
                self._tried.add(cand.rule)
            cand = self._candidate(rule, cand.order + (f,))
        return cand

    def _refused_by_reuse(self, c: Candidate) -> bool:
        """The samples ``c`` reuses put its KL upper bound at level ``skip`` below τ."""
        skip = self.guided.skip
        if skip is None or not c.n:
            return False
        return kl_bounds(c.n, c.positives, math.log(1.0 / skip))[1] < self.params.threshold

    def _predicted(self, c: Candidate, weights: np.ndarray, bias: float) -> float:
        """The rule's precision as the fit predicts it (its mean over pool rows with the rule's
        features kept), corrected by the samples the rule reuses (the fit counting as
        ``fit_weight`` samples): a logistic fit cannot express a conjunction, its samples can."""
        g = self.guided
        x = self._pool[: g.prediction_rows].astype(float)
        x[:, sorted(c.rule)] = 1.0
        fitted = float(sigmoid(x @ weights + bias).mean())
        return (g.fit_weight * fitted + c.positives) / (g.fit_weight + c.n)

    def _bisect(self, parent: Candidate, step: Candidate) -> Generator[list[SampleRequest], list[Samples], Candidate]:
        """After ``step`` grew from ``parent`` by several features and was certified: prefixes of
        ``step``'s order between them, halving the gap, each tested on samples of its own (a prefix
        already refused counts as refused); the shortest certified one."""
        best, low, high = step, len(parent.rule), len(step.rule)
        while high - low > 1:
            middle = (low + high) // 2
            rule = frozenset(step.order[:middle])
            if rule in self._tried:
                low = middle
                continue
            cand = self._candidate(rule, step.order[:middle])
            self._tried.add(rule)
            self._trace(len(rule), 1, [cand])
            if (yield from self._certify(cand, f"greedy-{len(rule)}", self.guided.probe)):
                best, high = cand, middle
                self._best = cand
            else:
                low = middle
        return best


def credit(present: np.ndarray, kept: np.ndarray, params: GuidedParams | None = None) -> tuple[np.ndarray, float]:
    """Each feature's weight in a ridge-logistic fit of "label kept" on the features kept, over the
    samples given, and the fit's bias (penalties and Newton steps: ``params``' credit_*)."""
    p = params or GuidedParams()
    x = np.hstack([present.astype(float), np.ones((len(kept), 1))])
    reg = np.full(x.shape[1], p.credit_l2)
    reg[-1] = p.credit_bias_l2
    theta = ridge_logistic(x, kept.astype(float), np.zeros(x.shape[1]), reg, iterations=p.credit_iterations)
    return theta[:-1], float(theta[-1])
