"""What every search shares: the sample protocol, the samples labelled so far, candidate rules, the
certifier's verdicts, and the result. `BeamSearch` (Anchors') and `GuidedSearch` (MAnchors') are
siblings built on `Search`: each chooses rules its own way; both ask the same `Certifier`.

A search is a generator that does no I/O: it yields lists of `SampleRequest` ("label n perturbations
that keep this rule") and is sent back one `Samples` per request. All the requests of one round come
in one list, so a caller can send them as one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from .._exceptions import ConfigError
from .bandit import kl_bounds
from .certify import Certificate, Certifier, Trial
from .params import SearchParams
from .rules import Rule, covers
from .samples import SampleRequest, Samples, SampleStore

__all__ = ["Answer", "Candidate", "RoundTrace", "RuleStats", "RuleView", "Search", "SearchResult", "run_sync"]


@dataclass(frozen=True)
class RuleStats:
    """What the search knows of one rule; ``order`` is how it was built."""

    rule: tuple[int, ...]
    order: tuple[int, ...]
    n_samples: int
    positives: int
    coverage: float

    @property
    def precision(self) -> float:
        return self.positives / self.n_samples if self.n_samples else 0.0


@dataclass(frozen=True)
class RoundTrace:
    """One round of a search: rule length, candidates (every extension that could beat the best
    coverage so far), arms (those KL-LUCB ran over), the rules kept."""

    size: int
    n_candidates: int
    beam: tuple[RuleStats, ...]
    n_arms: int = 0


@dataclass(frozen=True)
class SearchResult:
    """The answer of a search and how it got there.

    ``rows`` index the samples (in the order they were sent back) drawn for
    or reused by the answer. ``path`` holds the rules the answer was built
    through, from the starting rule to the answer itself. ``certificate``:
    why the answer is an anchor (None: it is not, ``success`` is False);
    ``lower`` and ``upper`` are then its KL bounds, else those of the
    samples the answer was tested on (drawn after it was chosen), or of
    every sample it has when it was never tested. ``tested``: the rules the
    search chose to test, among which δ was shared.
    """

    stats: RuleStats
    lower: float
    upper: float
    success: bool
    rows: np.ndarray
    path: tuple[RuleStats, ...]
    rounds: tuple[RoundTrace, ...]
    samples_used: int
    certificate: Certificate | None = None
    effects: tuple[float, ...] = ()
    """For an empty answer whose samples disagree at least 3 times: per feature, the share of the
    samples that kept the label with the feature present, less the share with it absent."""
    tested: int = 0

    @property
    def rule(self) -> Rule:
        return frozenset(self.stats.rule)

    def intermediate(self, tau_mid: float) -> RuleStats:
        """The shortest non-empty rule on the path whose precision ≥ ``tau_mid``.

        Falls back to the answer itself (empty when the empty rule held).
        """
        for step in self.path:
            if step.rule and step.precision >= tau_mid:
                return step
        return self.stats


@dataclass
class Candidate:
    """A rule the search knows: its samples (reused and drawn), and, once chosen to be tested, its
    trial (share of δ, verdict) and the labels of the samples drawn for it since (``fresh``)."""

    rule: Rule
    order: tuple[int, ...]
    coverage: float
    rows: list[np.ndarray] = field(default_factory=list)
    n: int = 0
    positives: int = 0
    trial: Trial | None = None
    fresh: list[bool] | None = None

    @property
    def mean(self) -> float:
        return self.positives / self.n if self.n else 0.0

    @property
    def laplace(self) -> float:
        """Its precision smoothed: (positives + 1) / (n + 2) (½ with no sample)."""
        return (self.positives + 1) / (self.n + 2)

    @property
    def certified(self) -> bool:
        return self.trial is not None and self.trial.verdict == "certified"

    def stats(self) -> RuleStats:
        return RuleStats(tuple(sorted(self.rule)), self.order, self.n, self.positives, self.coverage)


class RuleView:
    """A rule the search knows, as a proposer sees it: read-only and live (it follows what the search
    draws and judges). Nothing a proposer does to it reaches the samples, counts or trial the
    certificate is computed from."""

    __slots__ = ("_candidate",)
    _candidate: Candidate

    def __init__(self, candidate: Candidate) -> None:
        object.__setattr__(self, "_candidate", candidate)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a proposer cannot change the search's rule {sorted(self.rule)} (its {name})")

    def __repr__(self) -> str:
        return f"RuleView({sorted(self.rule)}, n={self.n}, positives={self.positives})"

    @property
    def rule(self) -> Rule:
        return self._candidate.rule

    @property
    def order(self) -> tuple[int, ...]:
        """Its features in the order they were added."""
        return self._candidate.order

    @property
    def coverage(self) -> float:
        return self._candidate.coverage

    @property
    def n(self) -> int:
        """Its samples (reused and drawn)."""
        return self._candidate.n

    @property
    def positives(self) -> int:
        """Of them, those that kept the label."""
        return self._candidate.positives

    @property
    def mean(self) -> float:
        return self._candidate.mean

    @property
    def laplace(self) -> float:
        return self._candidate.laplace

    @property
    def certified(self) -> bool:
        return self._candidate.certified

    @property
    def fresh(self) -> tuple[bool, ...] | None:
        """The labels of the samples drawn since it was chosen to be tested (None: it was not)."""
        fresh = self._candidate.fresh
        return None if fresh is None else tuple(fresh)


Step = Generator[list[SampleRequest], list[Samples], None]
R = TypeVar("R")
Answer = Callable[[list[SampleRequest]], list[Samples]]


def run_sync(search: Generator[list[SampleRequest], list[Samples], R], answer: Answer) -> R:
    """Run a search generator to its end, answering each round of requests with ``answer`` (the
    explainers' async `drive` is the same loop, awaiting)."""
    try:
        requests = next(search)
        while True:
            requests = search.send(answer(requests))
    except StopIteration as stop:
        result: R = stop.value
        return result


class Search:
    """One search over the features of one input: its samples, its candidates, its certifier.

    ``coverage_pool`` is a boolean (perturbations × features) matrix of unlabelled perturbations; a
    rule's coverage is the fraction of its rows that keep every feature of the rule. ``certifier``:
    one shared with an earlier search of the same explanation (its rules' shares go on from that
    search's, so δ covers both); by default a new one. ``context``: features perturbed like the others
    but never part of a rule (coarse to fine: the sentences around the ones refined); ``max_size``: the
    most features a rule may hold, below ``params.max_anchor_size`` (coarse to fine: a finer anchor
    must be short to be worth more than the coarse one); ``rate_per_sample``: whether the hiding rate
    is drawn per sample (a document's), so that a rule's reused samples are weighed (`SampleStore.counts`).
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        certifier: Certifier | None = None,
        context: Collection[int] = (),
        max_size: int | None = None,
        rate_per_sample: bool = False,
    ) -> None:
        if n_features < 1:
            raise ConfigError("an input needs at least one feature to be explained")
        if coverage_pool.ndim != 2 or coverage_pool.shape[1] != n_features:
            raise ConfigError(f"coverage pool must have {n_features} columns, got {coverage_pool.shape}")
        self.n_features = n_features
        self.params = params
        if certifier is not None and certifier.params != params:
            raise ConfigError("a shared certifier must hold the search's own parameters (its δ, τ and bet)")
        self.certifier = certifier or Certifier(params)
        self._pool = coverage_pool
        self._store = SampleStore(n_features, rate_per_sample)
        self._cands: dict[Rule, Candidate] = {}
        self._rounds: list[RoundTrace] = []
        self._samples_used = 0
        self._best: Candidate | None = None
        hidden = set(context)
        if not all(0 <= f < n_features for f in hidden) or len(hidden) >= n_features:
            raise ConfigError(f"context {sorted(context)} must be some, not all, of the {n_features} features")
        self.choosable = tuple(f for f in range(n_features) if f not in hidden)
        """The features a rule may hold (all but the context), in order."""
        self._max_size = min(params.max_anchor_size or n_features, max_size or n_features, len(self.choosable))

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        raise NotImplementedError

    def labelled(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sample labelled so far: which features each kept, and whether it kept the label."""
        n = self._store.size
        return self._store.present[:n].copy(), self._store.labels[:n].copy()

    def scored(self) -> np.ndarray | None:
        """Per sample labelled so far (as `labelled`), the probability the model gave the input's label
        (its label, 0 or 1, where it gave none); None while the model has given no probability."""
        if not self._store.scored:
            return None
        return self._store.scores[: self._store.size].copy()

    def best_so_far(self) -> SearchResult:
        """The answer if the search had to stop now (its budget ran out): the anchor found, if any;
        else `_fallback` among the rules tested; else the non-empty rule sampled whose KL lower bound
        is highest (not certified: ``success`` False)."""
        if self._best is not None:
            return self._result(self._best)
        if any(c.trial is not None and c.rule for c in self._cands.values()):
            return self._fallback()
        sampled = [c for c in self._cands.values() if c.n and c.rule]
        if not sampled:
            return self._fallback()
        level = -np.log(self.params.delta)
        return self._result(max(sampled, key=lambda c: (kl_bounds(c.n, c.positives, level)[0], c.coverage)))

    # -- choosing and certifying ----------------------------------------------

    def _choose(self, c: Candidate) -> None:
        """Choose ``c`` to be tested: it gets its share of δ now, and only the samples drawn for it from
        now on (``fresh``) judge it. A rule is chosen once."""
        if c.trial is None:
            c.trial = self.certifier.choose()
            c.fresh = []

    def _certify(
        self, c: Candidate, stage: str, step: int, probe: int | None = None
    ) -> Generator[list[SampleRequest], list[Samples], bool]:
        """Choose ``c`` if it is not yet, and sample it ``step`` at a time (``probe`` the first time) until
        the certifier decides; whether it is certified."""
        self._choose(c)
        assert c.trial is not None and c.fresh is not None
        while self.certifier.judge(c.trial, c.fresh) == "more":
            size = probe if probe is not None and not c.fresh else step
            more = min(size, self.certifier.wanted(c.trial) - len(c.fresh))
            yield from self._sample([(c, max(1, more))], stage)
        return c.certified

    def _fallback(self) -> SearchResult:
        """No anchor: the tested rule whose precision on the samples it had before it was chosen was
        highest (its bounds, reported, are those of the samples drawn after: they did not pick it);
        the empty rule when nothing else was tested."""
        tested = [c for c in self._cands.values() if c.trial is not None and c.rule]
        if not tested:
            return self._result(self._cands.get(frozenset()) or self._candidate(frozenset(), ()))
        pick = max(tested, key=lambda c: (_before(c), len(c.rule), c.coverage))
        return self._result(pick)

    # -- samples and candidates -----------------------------------------------

    def _sample(
        self, pulls: Sequence[tuple[Candidate, int]], stage: str
    ) -> Generator[list[SampleRequest], list[Samples], list[int]]:
        answers = yield [SampleRequest(c.rule, k, stage) for c, k in pulls]
        if len(answers) != len(pulls):
            raise ValueError(f"sent {len(answers)} answers to {len(pulls)} sample requests")
        positives = []
        for (cand, k), got in zip(pulls, answers, strict=True):
            m = len(got.labels)  # fewer than asked only when the cap refused the rest: each one paid for is kept
            if m > k or got.present.shape != (m, self.n_features) or got.labels.shape != (m,):
                raise ValueError(f"asked for {k} samples, got {got.present.shape} / {got.labels.shape}")
            if got.scores is not None and got.scores.shape != (m,):
                raise ValueError(f"asked for {k} samples, got {got.scores.shape} scores")
            rows = self._store.add(cand.rule, got)
            if cand.fresh is not None:
                cand.fresh.extend(got.labels.tolist())
                if cand.trial is not None and cand.trial.verdict == "refused":
                    self.certifier.judge(cand.trial, cand.fresh)  # its bet goes on (see `Certifier`)
            cand.rows.append(rows)
            cand.n += m
            cand.positives += int(got.labels.sum())
            positives.append(int(got.labels.sum()))
            self._samples_used += m
        return positives

    def _candidate(self, rule: Rule, order: tuple[int, ...]) -> Candidate:
        """The rule as a candidate, with every sample so far that is one of its (its coverage measured the
        first time, then kept); a rule already chosen to be tested is returned as it is (its own
        samples, its trial)."""
        known = self._cands.get(rule)
        if known is not None and known.trial is not None:
            return known
        coverage = known.coverage if known is not None else float(covers(rule, self._pool).mean())
        cand = Candidate(rule, order, coverage)
        reused = self._store.reusable(rule)
        if len(reused):
            cand.rows.append(reused)
            cand.n, cand.positives = self._store.counts(rule, reused)
        self._cands[rule] = cand
        return cand

    def _extend(self, beam: Sequence[Candidate]) -> list[Candidate]:
        """Every parent in the beam extended by every feature it lacks."""
        made: dict[Rule, Candidate] = {}
        for f in self.choosable:
            for parent in beam:
                rule = parent.rule | {f}
                if f in parent.rule or rule in made:
                    continue
                made[rule] = self._candidate(rule, parent.order + (f,))
        return [made[r] for r in sorted(made, key=lambda r: sorted(r))]

    def _trace(self, size: int, n_candidates: int, beam: Sequence[Candidate], n_arms: int | None = None) -> None:
        arms = n_candidates if n_arms is None else n_arms
        self._rounds.append(RoundTrace(size, n_candidates, tuple(c.stats() for c in beam), arms))

    def _result(self, c: Candidate) -> SearchResult:
        certificate = c.trial.certificate if c.trial is not None else None
        if certificate is not None:
            lower, upper = certificate.lower, certificate.upper
        elif c.fresh:
            level = c.trial.share if c.trial is not None else self.params.delta
            lower, upper = kl_bounds(len(c.fresh), sum(c.fresh), -np.log(level))
        else:
            lower, upper = kl_bounds(c.n, c.positives, -np.log(self.params.delta))
        path = tuple(
            self._cands[frozenset(c.order[:k])].stats()
            for k in range(self._path_start(), len(c.order) + 1)
            if frozenset(c.order[:k]) in self._cands
        )
        rows = np.unique(np.concatenate(c.rows)) if c.rows else np.zeros(0, dtype=np.int64)
        disagree = len(rows) - int(self._store.labels[rows].sum()) if len(rows) else 0
        effects = self._store.effects(rows) if not c.rule and disagree >= 3 else ()
        return SearchResult(
            c.stats(), float(lower), float(upper), certificate is not None, rows, path, tuple(self._rounds),
            self._samples_used, certificate, effects, self.certifier.chosen,
        )  # fmt: skip

    def _path_start(self) -> int:
        return 0


def _before(c: Candidate) -> float:
    """A chosen rule's precision on its samples from before it was chosen (smoothed)."""
    fresh = len(c.fresh or ())
    kept = sum(c.fresh or ())
    return (c.positives - kept + 1) / (c.n - fresh + 2)
