"""MAnchors' guided search: the memory proposes, samples certify.

`GuidedSearch` is the search MAnchors runs on a memory hit (its default
strategy). It is this project's propose-and-verify search, not the MAnchors
paper's Algorithms 1–3 (HT, pruning, VT: ``strategy="paper"``, which
resumes `BeamSearch` from the mapped rule and is kept faithful to them).
It spends samples where Anchors' beam search spends most of them (KL-LUCB
proving which extension is best, round after round) only when it must:

1. the empty rule is checked first, exactly as Anchors does (the root
   sample also estimates every one-word rule, for free);
2. the rules the memory proposes (earlier anchors mapped onto this input)
   are tested shortest first, each certified by Anchors' verification;
3. otherwise, and to look for a rule shorter than an accepted proposal,
   the rule grows greedily: the current rule is sampled up to
   ``parent_samples``, the extension of highest precision on the samples it
   reuses from them is chosen (no KL-LUCB proof that it is the best one),
   and verified.

Selection never certifies anything: a rule is returned as an anchor only
when its KL bounds, on samples drawn for it and its sub-rules, clear
τ − ε_stop (`BeamSearch._valid`), as in Anchors, and, with
``certify="strict"``, when fresh samples drawn after it was chosen clear τ. A rule chosen greedily was
picked by the same samples that estimate it, so it must also hold on at
least ``min_accept`` samples before it is accepted: about what backs the
rules Anchors accepts (median 215–245 samples on RT-Polarity); with fewer,
more of the anchors fell below τ on fresh samples than Anchors'.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import numpy as np

from .._exceptions import ConfigError
from .beam import BeamSearch, SampleRequest, Samples, SearchParams, SearchResult, _Candidate
from .rules import Rule

__all__ = ["GuidedSearch"]


class GuidedSearch(BeamSearch):
    """Root check, memory proposals, then greedy growth; every answer verified.

    ``proposals``: rules to test, in order of preference (tested shortest
    first, each first on ``probe`` samples, so a wrong one costs little).
    ``min_accept``: the fewest samples a greedily chosen rule must hold on
    before it is accepted. ``parent_samples``: the samples a rule gets
    before the next word is chosen from them.
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        *,
        proposals: Sequence[Rule] = (),
        min_accept: int = 250,
        probe: int = 25,
        parent_samples: int = 75,
        root: int | None = None,
        min_accept_proposed: int = 100,
    ) -> None:
        super().__init__(n_features, coverage_pool, params)
        for name, value in (("min_accept", min_accept), ("probe", probe), ("parent_samples", parent_samples)):
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        ordered = sorted(dict.fromkeys(frozenset(r) for r in proposals if r), key=len)
        for rule in ordered:
            if not all(0 <= f < n_features for f in rule):
                raise ConfigError(f"proposed rule {sorted(rule)} names a feature outside 0..{n_features - 1}")
        self.proposals = ordered
        self.min_accept = min_accept
        self.probe = probe
        self.parent_samples = parent_samples
        self.root = params.min_samples_start if root is None else root
        self.min_accept_proposed = min_accept_proposed
        self._proposed: set[Rule] = set()
        self._chosen: set[Rule] = set()

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        root = self._candidate(frozenset(), ())
        self._choose(root)
        yield from self._sample_root(root)
        if (yield from self._accept_root(root)):
            return self._result(root, success=True)
        best = yield from self._propose()
        path = [root]
        while len(path) - 1 < self._max_size and (best is None or len(path) < len(best.rule)):
            parent = path[-1]
            if parent.n < self.parent_samples:
                yield from self._sample([(parent, self.parent_samples - parent.n)], f"greedy-{len(parent.rule)}")
            step = self._grow(parent, best)
            if step is None:
                break
            self._choose(step)
            self._chosen.add(step.rule)
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

    def _sample_root(self, root: _Candidate) -> Generator[list[SampleRequest], list[Samples], None]:
        """Anchors' root check, reached in steps: ``root`` samples first, then ``probe`` at a time
        up to ``min_samples_start`` while the empty rule may still hold (mean ≥ τ), then Anchors' rule."""
        p = self.params
        yield from self._sample([(root, min(self.root, p.min_samples_start))], "root")
        while root.mean >= p.threshold and root.n < p.min_samples_start:
            yield from self._sample([(root, min(max(self.probe, 1), p.min_samples_start - root.n))], "root")
        if root.mean >= p.threshold:
            yield from super()._continue_root(root)

    def _propose(self) -> Generator[list[SampleRequest], list[Samples], _Candidate | None]:
        """The first proposed rule that verifies, if any: shortest first and, among rules of one
        length (one coverage, for text), highest precision on the samples they reuse first."""
        cands = [self._candidate(rule, tuple(sorted(rule))) for rule in self.proposals if len(rule) <= self._max_size]
        cands.sort(key=lambda c: (len(c.rule), -(c.positives + 1) / (c.n + 2)))
        for cand in cands:
            cand = self._candidate(cand.rule, cand.order)  # reuse what earlier proposals drew
            self._choose(cand)  # chosen by the memory, before its probe
            self._proposed.add(cand.rule)
            if cand.n < self.probe:
                yield from self._sample([(cand, self.probe - cand.n)], "propose")
            yield from self._verify([cand], "propose")
            if (yield from self._accept(cand)):
                self._best = cand
                return cand
        return None

    def _grow(self, parent: _Candidate, best: _Candidate | None) -> _Candidate | None:
        """The extension of ``parent`` of highest (Laplace-smoothed) precision on the samples it reuses."""
        floor = best.coverage if best is not None else -1.0
        cands = [c for c in self._extend([parent]) if c.coverage > floor]
        if not cands:
            return None
        return max(cands, key=lambda c: (c.positives + 1) / (c.n + 2))

    def _floor(self, c: _Candidate) -> int:
        """Samples a rule must hold on before it may be accepted."""
        if c.rule in self._chosen:
            return self.min_accept
        return self.min_accept_proposed if c.rule in self._proposed else 0

    def _undecided(self, c: _Candidate) -> bool:
        if c.mean >= self.params.threshold and c.n < self._floor(c):
            return True
        return super()._undecided(c)

    def _valid(self, c: _Candidate) -> bool:
        return c.n >= self._floor(c) and super()._valid(c)
