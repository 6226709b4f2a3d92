"""Anchors' beam search with KL-LUCB: it chooses, the certifier certifies.

The rounds follow Ribeiro et al. (2018) and their reference implementation:
the empty rule first, then each round extends the beam by one feature and
KL-LUCB picks the ``beam_size`` most precise extensions. What makes a rule
an anchor is not the search's own samples (the reference accepts a rule on
the samples that also chose it, among many rivals): each rule the beam keeps
is chosen, given its share of δ, and judged by the `Certifier` on samples
drawn after. The differences from the reference are noted where they occur.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Generator, Sequence

import numpy as np

from .._exceptions import ConfigError
from .bandit import kl_lower_bound, kl_upper_bound, lucb
from .base import Candidate, Search, SearchResult
from .certify import Certifier
from .params import SearchParams
from .rules import Rule
from .samples import SampleRequest, Samples

__all__ = ["BeamSearch"]


class BeamSearch(Search):
    """One Anchors search over the features of one input.

    ``start`` resumes the search from a rule (MAnchors' paper strategy, its
    vertical transformation): it is tested first, and the beam grows from it.
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams | None = None,
        start: Rule | None = None,
        certifier: Certifier | None = None,
        context: Collection[int] = (),
        max_size: int | None = None,
        rate_per_sample: bool = False,
    ) -> None:
        params = params or SearchParams()
        super().__init__(n_features, coverage_pool, params, certifier, context, max_size, rate_per_sample)
        if start is not None and not set(start) <= set(self.choosable):
            raise ConfigError(
                f"start rule {sorted(start)} names a feature outside 0..{n_features - 1} or in the context"
            )
        self.start = frozenset(start) if start is not None else None

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        """Run the search; see `llm_anchors.search.base` for the protocol."""
        p = self.params
        best: Candidate | None = None
        if self.start is None:
            root = self._candidate(frozenset(), ())
            self._choose(root)  # every sample of the empty rule is drawn after it was chosen
            yield from self._sample([(root, p.min_samples_start)], "root")  # every one-feature rule reuses these
            if (yield from self._certify(root, "root", p.batch_size)):
                self._best = root
                return self._result(root)
            beam = [root]
        else:
            start = self._candidate(self.start, tuple(sorted(self.start)))
            self._trace(len(self.start), 1, [start])
            if (yield from self._certify(start, "start", p.batch_size)):
                best = self._best = start
            beam = [start]
        by_size = {len(beam[0].rule): beam}
        best_coverage = best.coverage if best else -1.0
        size = len(beam[0].rule) + 1
        while size <= self._max_size and best_coverage < 1.0:
            cands = [c for c in self._extend(by_size[size - 1]) if c.coverage > best_coverage]
            if not cands:
                break
            k = size - len(beam[0].rule)
            arms = self._arms(cands)
            chosen = yield from self._lucb(arms, min(p.beam_size, len(arms)), f"round-{k}")
            self._trace(size, len(cands), chosen, len(arms))
            by_size[size] = chosen
            for c in chosen:
                if c.coverage > best_coverage and (yield from self._certify(c, "certify", p.batch_size)):
                    best, best_coverage = c, c.coverage
                    self._best = best
            size += 1
        if best is not None:
            return self._result(best)
        return self._fallback()

    def _path_start(self) -> int:
        return len(self.start) if self.start is not None else 0

    def _lucb(
        self, cands: Sequence[Candidate], top_n: int, stage: str
    ) -> Generator[list[SampleRequest], list[Samples], list[Candidate]]:
        p = self.params
        bandit = lucb(
            [c.n for c in cands],
            [c.positives for c in cands],
            top_n=top_n,
            epsilon=p.epsilon,
            delta=p.delta,
            batch_size=p.batch_size,
        )
        try:
            pulls = next(bandit)
            while True:
                got = yield from self._sample([(cands[arm], k) for arm, k in pulls], stage)
                pulls = bandit.send(got)
        except StopIteration as stop:
            return [cands[i] for i in stop.value]

    def _arms(self, cands: list[Candidate]) -> list[Candidate]:
        """The candidates KL-LUCB runs over: those of highest precision on their reused samples.

        Precision is smoothed (Laplace), so a candidate with no reused sample ranks at ½; ties keep
        feature order.
        """
        p = self.params
        if p.arms == "plausible":
            level = math.log(1.0 / p.delta)
            lows = sorted((kl_lower_bound(c.mean, level / c.n) if c.n else 0.0 for c in cands), reverse=True)
            bar = lows[min(p.beam_size, len(lows)) - 1]
            return [c for c in cands if not c.n or kl_upper_bound(c.mean, level / c.n) >= bar]
        limit = p.max_arms
        if limit is None or len(cands) <= max(limit, p.beam_size):
            return cands
        keep = max(limit, p.beam_size)
        ranked = sorted(range(len(cands)), key=lambda i: -cands[i].laplace)
        return [cands[i] for i in sorted(ranked[:keep])]
