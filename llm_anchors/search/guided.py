"""MAnchors' guided search: the memory and a proxy propose, the model certifies.

`GuidedSearch` is the search MAnchors runs by default. It is this
project's propose-and-verify search, not the MAnchors paper's Algorithms
1–3 (HT, pruning, VT: ``strategy="paper"``, which resumes `BeamSearch` from
the mapped rule and is kept faithful to them). It spends samples where
Anchors' beam search spends most of them (KL-LUCB proving which extension
is best, round after round) only when it must:

1. the empty rule is checked first, ``probe`` samples at a time: refused at
   its first misses, accepted as soon as it passes like any other rule
   (below; 40 kept of 40 do), the root sample also estimating every
   one-word rule for free;
2. the rules the memory proposes (earlier anchors mapped onto this input)
   and those a proxy proposes (`proposer`, which sees the root's samples)
   are tested shortest first; one whose reused samples already miss twice
   is refused without a sample, any other is probed on fresh samples;
3. otherwise, and to look for a rule shorter than an accepted proposal,
   the rule grows: the current rule is sampled up to ``parent_samples``
   (``per_feature`` per feature it could still add), and a ridge-logistic
   fit of every sample labelled so far ranks the features it lacks
   (`credit`). The next rule tested adds the most credited one and, at
   once, the next ones while the rule could not pass anyway: its reused
   samples already refuse it (KL upper bound at level ``skip`` below τ),
   or the fit predicts its precision below ``lookahead``. A rule that
   grew by several features and is accepted is then bisected: the
   shortest accepted prefix of the features added is the anchor. A
   refused rule is never tested again.

Choosing never certifies anything. Every rule is chosen before the samples
that judge it are drawn, and only those judge it: it is an anchor when, on
at least ``min_fresh`` samples drawn after it was chosen, its precision is
≥ τ and its KL lower bound at δ clears τ − ε_stop (Anchors' criterion,
without the samples that chose it); with ``certify="strict"`` that bound
must then clear τ itself (`BeamSearch._certified`). Samples are drawn
``probe`` at a time, so a wrong rule costs little.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from .._logistic import ridge_logistic, sigmoid
from .beam import BeamSearch, SampleRequest, Samples, SearchParams, SearchResult, Step, _Candidate, kl_bounds
from .rules import Rule, covers

__all__ = ["GuidedSearch"]

Proposer = Callable[[np.ndarray, np.ndarray], Sequence[Rule]]
"""Given every sample labelled so far (presence matrix, label kept), rules to test."""

Search = Generator[list[SampleRequest], list[Samples], _Candidate]

PREDICTION_ROWS = 512
"""Rows of the coverage pool on which the fit predicts a rule's precision (`GuidedSearch._predicted`)."""
FIT_WEIGHT = 2.0
"""How many of a rule's reused samples the fit's prediction of its precision counts as."""


class GuidedSearch(BeamSearch):
    """Root check, proposals, then growth; every rule judged on samples drawn after it was chosen.

    ``proposals``: the memory's rules. ``proposer``: called once the empty
    rule is refused; its rules (a proxy's) join the proposals. Samples are
    counted by stage: "root", "memory-probe"/"memory" and
    "proxy-probe"/"proxy" (a proposal's first ``probe`` samples, then the
    rest), "greedy-k" (growth, k the rule's length), "certify" (strict).
    ``min_fresh``: the fewest fresh samples a rule is accepted on.
    ``parent_samples``, ``per_feature``: a rule gets up to
    ``parent_samples`` samples, ``per_feature`` for each feature it could
    still add, before the next features are chosen from them. ``root``:
    samples of the empty rule drawn first. ``lookahead`` (None: one
    feature per step) and ``skip`` (None: never): see the module's
    docstring.
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        *,
        proposals: Sequence[Rule] = (),
        proposer: Proposer | None = None,
        min_fresh: int = 40,
        probe: int = 20,
        parent_samples: int = 75,
        per_feature: int = 6,
        root: int | None = None,
        lookahead: float | None = 0.8,
        skip: float | None = 0.5,
    ) -> None:
        super().__init__(n_features, coverage_pool, params)
        for name, value in (("min_fresh", min_fresh), ("probe", probe), ("parent_samples", parent_samples),
                            ("per_feature", per_feature)):  # fmt: skip
            check_int(name, value)
        check_number("lookahead", lookahead, high=1.0, open_high=False, optional=True)
        check_number("skip", skip, high=1.0, optional=True)
        self.proposals = self._checked(proposals)
        self.proposer = proposer
        self.sources = dict.fromkeys(self.proposals, "memory")
        self.min_fresh = min_fresh
        self.probe = probe
        self.parent_samples = parent_samples
        self.per_feature = per_feature
        self.root = params.min_samples_start if root is None else root
        self.lookahead = lookahead
        self.skip = skip
        self._tried: set[Rule] = set()

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        root = self._candidate(frozenset(), ())
        self._choose(root)
        yield from self._sample_root(root)
        if (yield from self._accept_root(root)):
            return self._result(root, success=True)
        best = yield from self._propose([*self.proposals, *self._consult()])
        path = [root]
        while len(path[-1].rule) < self._max_size and (best is None or len(path[-1].rule) + 1 < len(best.rule)):
            parent = path[-1]
            wanted = min(self.parent_samples, self.per_feature * (self.n_features - len(parent.rule)))
            if parent.n < wanted:
                yield from self._sample([(parent, wanted - parent.n)], f"greedy-{len(parent.rule)}")
            step = self._grow(parent, best)
            if step is None:
                break
            path.append(step)
            if (yield from self._test(step)):
                best = self._best = step
                if len(step.rule) - len(parent.rule) > 1:
                    best = yield from self._bisect(parent, step)
        if best is not None:
            return self._result(best, success=True)
        if len(path) == 1:
            return self._result(root, success=False)
        (pick,) = yield from self._lucb(path[1:], 1, "fallback")
        return self._result(pick, success=False)

    def _sample_root(self, root: _Candidate) -> Step:
        """The empty rule sampled, ``root`` samples first, then ``probe`` at a time (no more than it
        needs to pass if all keep the label) while it may still pass (mean ≥ τ), up to
        ``min_samples_start``."""
        p = self.params
        yield from self._sample([(root, min(self.root, p.min_samples_start))], "root")
        while root.mean >= p.threshold and root.n < p.min_samples_start and not self._root_clears(root):
            more = min(self.probe, self._to_pass(root), p.min_samples_start - root.n)
            yield from self._sample([(root, more)], "root")

    def _root_clears(self, root: _Candidate) -> bool:
        """The empty rule passes as every rule does (`_passes`): all its samples were drawn after it
        was chosen."""
        return self._passes(root.n, root.positives)

    def _to_pass(self, c: _Candidate) -> int:
        """The fewest more samples after which ``c`` passes if every one keeps the label."""
        misses, n = c.n - c.positives, c.n + 1
        while n < self.params.min_samples_start and not self._passes(n, n - misses):
            n += 1
        return n - c.n

    def _consult(self) -> list[Rule]:
        """The proxy's proposals on every sample labelled so far."""
        if self.proposer is None:
            return []
        extra = self._checked(self.proposer(*self.labelled()))
        for rule in extra:
            self.sources.setdefault(rule, "proxy")
        return extra

    def _propose(self, rules: Sequence[Rule]) -> Generator[list[SampleRequest], list[Samples], _Candidate | None]:
        """The first of ``rules`` accepted, if any: shortest first and, among rules of one length
        (one coverage, for text), highest precision on the samples they reuse first."""
        fits = [rule for rule in dict.fromkeys(rules) if len(rule) <= self._max_size]
        cands = sorted((self._candidate(r, tuple(sorted(r))) for r in fits), key=lambda c: (len(c.rule), -_laplace(c)))
        for cand in cands:
            if cand.rule in self._tried:
                continue
            cand = self._candidate(cand.rule, cand.order)  # reuse what earlier proposals drew
            self._tried.add(cand.rule)
            if cand.n - cand.positives >= 2:
                continue  # refused by samples it reuses, at no cost
            self._choose(cand)
            source = self.sources.get(cand.rule, "memory")
            yield from self._sample([(cand, self.probe)], f"{source}-probe")
            yield from self._verify([cand], source)
            if (yield from self._accept(cand)):
                self._best = cand
                return cand
        return None

    def _checked(self, rules: Sequence[Rule]) -> list[Rule]:
        """Distinct non-empty rules, shortest first, each naming features of this input."""
        ordered = sorted(dict.fromkeys(frozenset(r) for r in rules if r), key=len)
        for rule in ordered:
            if not all(0 <= f < self.n_features for f in rule):
                raise ConfigError(f"proposed rule {sorted(rule)} names a feature outside 0..{self.n_features - 1}")
        return ordered

    # -- growth -----------------------------------------------------------

    def _grow(self, parent: _Candidate, best: _Candidate | None) -> _Candidate | None:
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
        weights, bias = credit(*self.labelled())
        step = max(cands, key=lambda c: (max(weights[f] for f in c.rule - parent.rule), _laplace(c)))
        limit = len(best.rule) - 1 if best is not None else self._max_size
        step = self._ahead(step, weights, bias, floor, limit)
        self._tried.add(step.rule)
        return step

    def _ahead(self, step: _Candidate, weights: np.ndarray, bias: float, floor: float, limit: int) -> _Candidate:
        """``step`` with the next most credited features (positive credit only) added while its reused
        samples refuse it or the fit predicts it below ``lookahead``; at most ``limit`` features, its
        coverage above ``floor``, never a rule tried before. A rule its samples refused is not tried
        again; one the fit only predicted to fail may be, by `_bisect`."""
        cand = step
        rest = iter(sorted((f for f in range(self.n_features) if f not in step.rule), key=lambda f: -weights[f]))
        while len(cand.rule) < limit:
            refused = self._refused_by_reuse(cand)
            if not refused and (self.lookahead is None or self._predicted(cand, weights, bias) >= self.lookahead):
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

    def _refused_by_reuse(self, c: _Candidate) -> bool:
        """The samples ``c`` reuses put its KL upper bound at level ``skip`` below τ."""
        if self.skip is None or not c.n:
            return False
        return kl_bounds(c.n, c.positives, math.log(1.0 / self.skip))[1] < self.params.threshold

    def _predicted(self, c: _Candidate, weights: np.ndarray, bias: float) -> float:
        """The rule's precision as the fit predicts it (its mean over pool rows with the rule's
        features kept), corrected by the samples the rule reuses (the fit counting as
        ``FIT_WEIGHT`` samples): a logistic fit cannot express a conjunction, its samples can."""
        x = self._pool[:PREDICTION_ROWS].astype(float)
        x[:, sorted(c.rule)] = 1.0
        fitted = float(sigmoid(x @ weights + bias).mean())
        return (FIT_WEIGHT * fitted + c.positives) / (FIT_WEIGHT + c.n)

    def _test(self, c: _Candidate, stage: str | None = None) -> Generator[list[SampleRequest], list[Samples], bool]:
        """Choose ``c``, judge it on fresh samples (stage "greedy-k"), and say whether it is accepted."""
        self._choose(c)
        yield from self._verify([c], stage or f"greedy-{len(c.rule)}")
        self._trace(len(c.rule), 1, [c])
        return (yield from self._accept(c))

    def _bisect(self, parent: _Candidate, step: _Candidate) -> Search:
        """After ``step`` grew from ``parent`` by several features and was accepted: the shortest
        accepted prefix of ``step``'s order between them, by bisection, each prefix judged on
        fresh samples of its own (a prefix already refused counts as refused)."""
        best, low, high = step, len(parent.rule), len(step.rule)
        while high - low > 1:
            middle = (low + high) // 2
            rule = frozenset(step.order[:middle])
            if rule in self._tried:
                low = middle
                continue
            cand = self._candidate(rule, step.order[:middle])
            self._tried.add(rule)
            if (yield from self._test(cand)):
                best, high = cand, middle
                self._best = cand
            else:
                low = middle
        return best

    # -- judged on fresh samples ----------------------------------------------

    def _fresh(self, c: _Candidate) -> tuple[int, int] | None:
        """A chosen rule's samples drawn since it was chosen (all of the empty rule's): (n, kept);
        None before it was chosen."""
        if c.fresh is None:
            return None
        return len(c.fresh), sum(c.fresh)

    def _fresh_bounds(self, n: int, kept: int) -> tuple[float, float]:
        return kl_bounds(n, kept, self._verify_beta)

    def _passes(self, n: int, kept: int) -> bool:
        """Whether a rule is accepted on ``n`` fresh samples of which ``kept`` keep the label."""
        p = self.params
        if n < self.min_fresh or kept / n < p.threshold:
            return False
        return self._fresh_bounds(n, kept)[0] > p.threshold - p.epsilon_stop

    def _verify(self, cands: Sequence[_Candidate], stage: str) -> Step:
        """Sample each rule ``probe`` at a time until it is decided (`_undecided`)."""
        while pending := [c for c in cands if self._undecided(c)]:
            yield from self._sample([(c, self.probe) for c in pending], stage)

    def _undecided(self, c: _Candidate) -> bool:
        fresh, p = self._fresh(c), self.params
        if fresh is None:
            return super()._undecided(c)
        n, kept = fresh
        if n < self.probe:
            return True
        if kept / n >= p.threshold:
            return not self._passes(n, kept)
        return self._fresh_bounds(n, kept)[1] >= p.threshold + p.epsilon_stop

    def _valid(self, c: _Candidate) -> bool:
        fresh = self._fresh(c)
        if fresh is None:
            return super()._valid(c)
        return self._passes(*fresh)

    def _result(self, c: _Candidate, *, success: bool) -> SearchResult:
        """A rule judged on fresh samples reports them, and their bounds (strict: its certificate's)."""
        result = super()._result(c, success=success)
        fresh = self._fresh(c)
        if fresh is None or result.certificate is not None or not fresh[0]:
            return result
        lower, upper = self._fresh_bounds(*fresh)
        return replace(result, lower=lower, upper=upper, certificate=fresh)


def credit(present: np.ndarray, kept: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Each feature's weight in a ridge-logistic fit (penalty ``l2``) of "label kept" on the
    features kept, over the samples given, and the fit's bias."""
    x = np.hstack([present.astype(float), np.ones((len(kept), 1))])
    reg = np.full(x.shape[1], l2)
    reg[-1] = 1e-3  # the base rate is not shrunk
    theta = ridge_logistic(x, kept.astype(float), np.zeros(x.shape[1]), reg, iterations=15)
    return theta[:-1], float(theta[-1])


def _laplace(c: _Candidate) -> float:
    return (c.positives + 1) / (c.n + 2)
