"""MAnchors' guided search: test the empty rule, ask the proposers in turn, certify what they propose.

`GuidedSearch` is the search MAnchors runs by default: this project's propose-and-verify search, not
the MAnchors paper's Algorithms 1–3 (HT, pruning, VT: ``strategy="paper"``, which resumes `BeamSearch`
from the mapped rule). It spends samples only on rules a proposer asks it to (`llm_anchors.propose`:
the memory's, a user's, growth's), and the `Certifier` judges each on samples drawn after it was
chosen:

1. the proposers asked first (the memory's earlier anchors, on a near repeat) are asked;
2. then, unless one of their rules is certified, the empty rule is tested (its samples also estimate
   every one-word rule for free);
3. then each other proposer in turn (the user's, the memory's, growth last), each until it has
   nothing more to propose or a rule whose certificate is final is certified. A proposal whose reused
   samples already refuse it is passed over without a sample (`refused`: the one refusal rule; passing
   over costs no share of δ).

Choosing never certifies anything; every rule tested spends a share of δ, so the claim holds of the
anchor returned however many were tested.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Generator, Sequence, Set
from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from ..search.bandit import kl_bounds
from ..search.base import Candidate, RuleView, Search, SearchResult
from ..search.certify import Certifier
from ..search.params import SearchParams
from ..search.rules import Rule
from ..search.samples import SampleRequest, Samples
from .base import Draw, Judge, Proposer, check_features
from .growth import Growth

__all__ = ["GuidedParams", "GuidedSearch"]


@dataclass(frozen=True)
class GuidedParams:
    """The guided search's own settings (see `GuidedSearch`; each proposer has its own), recorded whole.

    probe: samples drawn at a time for a rule being judged (the certifier may refuse it after each).
    initial_probe: the first probe of every rule tested after the empty rule (most wrong rules are refused
        on their first few samples).
    refuse: a rule's reused samples refuse it when its KL upper bound at this level is below τ: a
        proposal is then passed over, and growth adds the next feature at once (None: never).
    max_draw: the most samples one step may draw (a `Draw` asking more is a `ConfigError`); within it,
        the cap stops a draw part-way and every sample paid for is kept.
    """

    probe: int = 20
    initial_probe: int = 10
    refuse: float | None = 0.5
    max_draw: int = 10_000

    def __post_init__(self) -> None:
        for name in ("probe", "initial_probe", "max_draw"):
            check_int(name, getattr(self, name))
        check_number("refuse", self.refuse, high=1.0, optional=True)


Guided = Generator[list[SampleRequest], list[Samples], bool]
"""What `GuidedSearch._ask` runs: it returns whether a final rule was certified."""


class GuidedSearch(Search):
    """The empty rule and the proposers, every rule tested judged by the certifier (see the module).

    ``proposers``: asked in turn (those whose ``first`` is set before the empty rule), each until it
    has nothing more (default: `Growth` alone); ``guided``: `GuidedParams`. ``sources`` names, for
    every rule tested, the proposer that asked for it.
    """

    def __init__(
        self,
        n_features: int,
        coverage_pool: np.ndarray,
        params: SearchParams,
        *,
        guided: GuidedParams | None = None,
        proposers: Sequence[Proposer] | None = None,
        certifier: Certifier | None = None,
        context: Collection[int] = (),
        max_size: int | None = None,
        rate_per_sample: bool = False,
    ) -> None:
        super().__init__(n_features, coverage_pool, params, certifier, context, max_size, rate_per_sample)
        self.guided = guided or GuidedParams()
        self.proposers: list[Proposer] = list(proposers) if proposers is not None else [Growth()]
        self.sources: dict[Rule, str] = {}
        self._tried: set[Rule] = set()

    # -- what a proposer sees (`Guide`) -------------------------------------

    @property
    def max_size(self) -> int:
        """The most features a rule of this search may hold."""
        return self._max_size

    @property
    def pool(self) -> np.ndarray:
        """The coverage pool (unlabelled perturbations × features), read-only."""
        view = self._pool.view()
        view.flags.writeable = False
        return view

    @property
    def threshold(self) -> float:
        """τ, the precision an anchor must reach."""
        return self.params.threshold

    @property
    def best(self) -> RuleView | None:
        """The shortest rule certified so far."""
        return RuleView(self._best) if self._best is not None else None

    @property
    def tried(self) -> Set[Rule]:
        """Every rule tested or passed over (a copy)."""
        return frozenset(self._tried)

    def candidate(self, rule: Rule, order: tuple[int, ...] | None = None) -> RuleView:
        """The rule as the search knows it, with every sample so far that is one of its (see
        `Search._candidate`): a read-only view."""
        check_features(rule, self.n_features)
        return RuleView(self._candidate(rule, order if order is not None else tuple(sorted(rule))))

    def refused(self, c: RuleView | Candidate) -> bool:
        """The samples ``c`` reuses put its KL upper bound at level ``refuse`` below τ."""
        level = self.guided.refuse
        if level is None or not c.n:
            return False
        return kl_bounds(c.n, c.positives, math.log(1.0 / level))[1] < self.params.threshold

    def owed(self, c: RuleView) -> int:
        """More fresh samples that would certify ``c``, a rule refused after it was chosen, if all kept the
        label (0: it is not refused, or could not be certified within its patience)."""
        trial = self._own(c).trial
        if trial is None or trial.verdict != "refused":
            return 0
        soonest = self.certifier.soonest(trial)
        return soonest - trial.seen if soonest is not None else 0

    # -- the search ---------------------------------------------------------

    def run(self) -> Generator[list[SampleRequest], list[Samples], SearchResult]:
        early = [p for p in self.proposers if p.first]
        for proposer in early:
            if (yield from self._ask(proposer)):
                return self._result(self._best)  # type: ignore[arg-type]
        if self._best is None:
            root = self._candidate(frozenset(), ())
            self._tried.add(root.rule)
            if (yield from self._certify(root, "root", self.guided.probe)):
                self._best = root
                return self._result(root)
        for proposer in self.proposers:
            if proposer not in early and (yield from self._ask(proposer)):
                break
        return self._result(self._best) if self._best is not None else self._fallback()

    def _ask(self, proposer: Proposer) -> Guided:
        """Do what ``proposer`` asks until it has nothing more; whether a final rule was certified."""
        while (step := proposer.propose(self)) is not None:
            c = self._checked(proposer, step)
            if isinstance(step, Draw):
                yield from self._sample([(c, step.n)], step.stage)
                self._take(c)  # a refused rule drawn to choose from may be certified by its bet going on
                continue
            if c.rule in self._tried:
                raise ConfigError(f"proposer {proposer.name!r} proposed {sorted(c.rule)} again: a rule is judged once")
            self._tried.add(c.rule)
            if step.refusable and self.refused(c):
                continue  # refused by samples it reuses: passed over, no share spent
            self.sources.setdefault(c.rule, proposer.name)
            if step.traced:
                self._trace(len(c.rule), 1, [c])
            g = self.guided
            probe = step.probe if step.probe is not None else g.initial_probe
            if (yield from self._certify(c, step.stage, g.probe, probe=probe)):
                self._take(c)
                if step.final:
                    return True
        return False

    def _checked(self, proposer: Proposer, step: object) -> Candidate:
        """The search's own candidate a proposer's step names; a `ConfigError` naming the proposer and what it
        returned when the search cannot take it: not a `Judge` or `Draw`, not a rule this search handed it,
        a stage not its own, a draw of no sample."""
        name = proposer.name
        if not isinstance(step, Judge | Draw) or not isinstance(step.candidate, RuleView):
            raise ConfigError(f"proposer {name!r} returned {step!r}: a Judge or Draw of a rule from guide.candidate")
        c = step.candidate._candidate
        if c is not self._cands.get(c.rule):
            raise ConfigError(f"proposer {name!r} proposed {step!r}: not a rule of this search as it stands "
                              "(ask guide.candidate for it)")  # fmt: skip
        if not isinstance(step.stage, str) or not (step.stage == name or step.stage.startswith(f"{name}-")):
            raise ConfigError(f"proposer {name!r} named the stage {step.stage!r}: its steps count under its own name "
                              f"({name!r}, or {name}-…)")  # fmt: skip
        most = self.guided.max_draw
        if isinstance(step, Draw) and (
            isinstance(step.n, bool) or not isinstance(step.n, int) or not 1 <= step.n <= most
        ):
            raise ConfigError(f"proposer {name!r} asked to draw {step.n!r} samples: a whole number from 1 to {most:,} "
                              "(GuidedParams.max_draw)")  # fmt: skip
        return c

    def _own(self, view: RuleView) -> Candidate:
        """The candidate ``view`` shows, when it is this search's current one for its rule."""
        c = view._candidate
        if c is not self._cands.get(c.rule):
            raise ConfigError(f"{view!r} is not a rule of this search as it stands: ask guide.candidate for it")
        return c

    def _take(self, c: Candidate) -> None:
        """``c`` is the anchor so far if it is certified and shorter (or as short and covering more)."""
        best = self._best
        if c.certified and (best is None or (len(c.rule), -c.coverage) < (len(best.rule), -best.coverage)):
            self._best = c
