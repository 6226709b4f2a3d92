"""MAnchors' guided search: the memory and a proxy propose, the model certifies.

`GuidedSearch` is the search MAnchors runs by default. It is this
project's propose-and-verify search, not the MAnchors paper's Algorithms
1–3 (HT, pruning, VT: ``strategy="paper"``, which resumes `BeamSearch` from
the mapped rule and is kept faithful to them). It spends samples where
Anchors' beam search spends most of them (KL-LUCB proving which extension
is best, round after round) only when it must:

1. the empty rule is checked first, as Anchors does, but ``probe`` samples
   at a time: refused at its first misses, accepted once its KL lower bound
   at δ clears τ (50 kept of 50), not only after Anchors' 100 (the root
   sample also estimates every one-word rule, for free);
2. the rules the memory proposes (earlier anchors mapped onto this input)
   and those a proxy proposes (`proposer`, which sees the root's samples)
   are tested shortest first; one whose reused samples already miss twice
   is refused without a sample, any other is probed on fresh samples;
3. otherwise, and to look for a rule shorter than an accepted proposal,
   the rule grows greedily: the current rule is sampled up to
   ``parent_samples``, the word a logistic fit of every sample labelled so
   far credits most is added (no KL-LUCB proof that it is the best one)
   and the rule tested; a refused proposal is never chosen again.

Choosing never certifies anything. Every rule is chosen before the samples
that judge it are drawn, and only those judge it: it is an anchor when, on
at least ``min_fresh`` samples drawn after it was chosen, its precision is
≥ τ and its KL lower bound at δ clears τ − ε_stop (Anchors' criterion,
without the samples that chose it); with ``certify="strict"`` that bound
must then clear τ itself (`BeamSearch._certified`). Samples are drawn
``probe`` at a time, so a wrong rule costs little.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import replace

import numpy as np

from .._checks import check_int
from .._exceptions import ConfigError
from .._logistic import ridge_logistic
from .beam import BeamSearch, SampleRequest, Samples, SearchParams, SearchResult, Step, _Candidate, kl_bounds
from .rules import Rule

__all__ = ["GuidedSearch"]

Proposer = Callable[[np.ndarray, np.ndarray], Sequence[Rule]]
"""Given every sample labelled so far (presence matrix, label kept), rules to test."""


class GuidedSearch(BeamSearch):
    """Root check, proposals, then greedy growth; every rule judged on samples drawn after it was chosen.

    ``proposals``: the memory's rules. ``proposer``: called once the empty
    rule is refused; its rules (a proxy's) join the proposals. Samples are
    counted by stage: "root", "memory-probe"/"memory" and
    "proxy-probe"/"proxy" (a proposal's first ``probe`` samples, then the
    rest), "greedy-k" (growth, k the rule's length), "certify" (strict).
    ``min_fresh``: the fewest fresh samples a rule is accepted on.
    ``parent_samples``: the samples a rule gets before the next word is
    chosen from them. ``root``: samples of the empty rule drawn first.
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        *,
        proposals: Sequence[Rule] = (),
        proposer: Proposer | None = None,
        min_fresh: int = 50,
        probe: int = 25,
        parent_samples: int = 75,
        root: int | None = None,
    ) -> None:
        super().__init__(n_features, coverage_pool, params)
        for name, value in (("min_fresh", min_fresh), ("probe", probe), ("parent_samples", parent_samples)):
            check_int(name, value)
        self.proposals = self._checked(proposals)
        self.proposer = proposer
        self.sources = dict.fromkeys(self.proposals, "memory")
        self.min_fresh = min_fresh
        self.probe = probe
        self.parent_samples = parent_samples
        self.root = params.min_samples_start if root is None else root
        self._tried: set[Rule] = set()

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        root = self._candidate(frozenset(), ())
        self._choose(root)
        yield from self._sample_root(root)
        if (yield from self._accept_root(root)):
            return self._result(root, success=True)
        best = yield from self._propose([*self.proposals, *self._consult()])
        path = [root]
        while len(path) - 1 < self._max_size and (best is None or len(path) < len(best.rule)):
            parent = path[-1]
            if parent.n < self.parent_samples:
                yield from self._sample([(parent, self.parent_samples - parent.n)], f"greedy-{len(parent.rule)}")
            step = self._grow(parent, best)
            if step is None:
                break
            self._choose(step)
            yield from self._verify([step], f"greedy-{len(step.rule)}")
            self._trace(len(step.rule), 1, [step])
            path.append(step)
            if (yield from self._accept(step)):
                best = self._best = step
        if best is not None:
            return self._result(best, success=True)
        if len(path) == 1:
            return self._result(root, success=False)
        (pick,) = yield from self._lucb(path[1:], 1, "fallback")
        return self._result(pick, success=False)

    def _sample_root(self, root: _Candidate) -> Step:
        """Anchors' root check, reached in steps: ``root`` samples first, then ``probe`` at a time
        up to ``min_samples_start`` while the empty rule may still hold (mean ≥ τ) and its bound
        does not yet clear τ (50 kept of 50 do: it is accepted there), then Anchors' rule."""
        p = self.params
        yield from self._sample([(root, min(self.root, p.min_samples_start))], "root")
        while root.mean >= p.threshold and root.n < p.min_samples_start and not self._root_clears(root):
            yield from self._sample([(root, min(self.probe, p.min_samples_start - root.n))], "root")
        if root.mean >= p.threshold:
            yield from super()._continue_root(root)

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

    def _grow(self, parent: _Candidate, best: _Candidate | None) -> _Candidate | None:
        """The extension of ``parent`` not tried before whose feature keeps the label most, by a
        ridge-logistic fit of every sample of this input labelled so far (`credit`); ties by
        precision on the samples it reuses.

        Each extension reuses only about half of its parent's samples, and the most precise on
        those, among dozens, is mostly the luckiest: growth then adds words the model does not need.
        The fit pools every sample, each feature's weight measured with the others held.
        """
        floor = best.coverage if best is not None else -1.0
        cands = [c for c in self._extend([parent]) if c.coverage > floor and c.rule not in self._tried]
        if not cands:
            return None
        weights = credit(*self.labelled())
        step = max(cands, key=lambda c: (max(weights[f] for f in c.rule - parent.rule), _laplace(c)))
        self._tried.add(step.rule)
        return step

    # -- judged on fresh samples ----------------------------------------------

    def _fresh(self, c: _Candidate) -> tuple[int, int] | None:
        """A chosen non-empty rule's samples drawn since it was chosen: (n, kept); else None."""
        if c.fresh is None or not c.rule:
            return None
        return len(c.fresh), sum(c.fresh)

    def _fresh_bounds(self, n: int, kept: int) -> tuple[float, float]:
        return kl_bounds(n, kept, self._verify_beta)

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
        lb, ub = self._fresh_bounds(n, kept)
        if kept / n >= p.threshold:
            return n < self.min_fresh or lb <= p.threshold - p.epsilon_stop
        return ub >= p.threshold + p.epsilon_stop

    def _valid(self, c: _Candidate) -> bool:
        fresh, p = self._fresh(c), self.params
        if fresh is None:
            return super()._valid(c)
        n, kept = fresh
        if n < self.min_fresh or kept / n < p.threshold:
            return False
        return self._fresh_bounds(n, kept)[0] > p.threshold - p.epsilon_stop

    def _result(self, c: _Candidate, *, success: bool) -> SearchResult:
        """A rule judged on fresh samples reports them, and their bounds (strict: its certificate's)."""
        result = super()._result(c, success=success)
        fresh = self._fresh(c)
        if fresh is None or result.certificate is not None or not fresh[0]:
            return result
        lower, upper = self._fresh_bounds(*fresh)
        return replace(result, lower=lower, upper=upper, certificate=fresh)


def credit(present: np.ndarray, kept: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Each feature's weight in a ridge-logistic fit (penalty ``l2``) of "label kept" on the
    features kept, over the samples given."""
    x = np.hstack([present.astype(float), np.ones((len(kept), 1))])
    reg = np.full(x.shape[1], l2)
    reg[-1] = 1e-3  # the base rate is not shrunk
    return ridge_logistic(x, kept.astype(float), np.zeros(x.shape[1]), reg, iterations=15)[:-1]


def _laplace(c: _Candidate) -> float:
    return (c.positives + 1) / (c.n + 2)
