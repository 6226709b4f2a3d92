"""Growth: the guided search's own proposer, which grows a rule a feature (or a few) at a time.

The current rule is sampled up to ``parent_samples`` (``per_feature`` per feature it could still
add), ``early_draw`` at a time, until the rule growth would test next has ``early`` reused samples
all keeping the label (while that rule adds several features, the samples drawn keep the first of
them too: ``draw_first``); a ridge-logistic fit of every sample labelled so far ranks the features it
lacks (`credit`; when the model gives probabilities, a fit of the probability it gave the input's label
ranks them instead: a probability says more than the label it decides, so growth samples a rule up to
``scored_samples`` instead). The next rule tested adds the most credited one and, at once, the next ones while the
rule could not pass anyway: its reused samples already refuse it (`Guide.refused`), or the fit
predicts its precision below ``lookahead``. A rule that grew by several features at once and is
certified when tested (not one refused, then certified by its bet going on: reducing those cost more
than it saved, docs/benchmarks.md) is then reduced: prefixes of the features added are tested,
halving the gap between the longest refused and the shortest certified (bisection finds *a* shorter
certified prefix, not necessarily the shortest: whether a prefix passes is itself random); then each
feature the jump added that the shortest certified prefix still holds is dropped in turn, the last
added first (a feature the fit ranked before one the rule needs is not in a prefix's way), the rule
without it tested unless it was tried or its reused samples refuse it, until ``drop_misses`` of them
in a row are refused (a long jump's words are then mostly needed, and each try is a test). Growth
stops when no rule shorter than the anchor so far (and covering more) is left to try.

A rule refused on its first samples (one miss in 10 refuses a rule of precision 0.99 one time in 10)
becomes the rule growth grows from, and is sampled to choose; those samples go on with its bet (see
`Certifier`). Once its fresh precision is back at τ, growth draws what the bet still needs (and
chooses no earlier than that): a good rule refused by bad luck is then the anchor, not a superset of
it.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from .._logistic import ridge_logistic, sigmoid
from ..search.base import RuleView
from ..search.rules import Rule
from .base import Draw, Guide, Judge, Step

__all__ = ["Growth", "GrowthParams", "credit"]


@dataclass(frozen=True)
class GrowthParams:
    """Growth's settings (see the module), recorded whole in each explanation.

    parent_samples, per_feature: a rule gets up to ``parent_samples`` samples, ``per_feature`` for each
        feature it could still add, before growth chooses the next features from them.
    scored_samples: ``parent_samples`` when the model gives probabilities (`Batch.probabilities`), which
        rank the features on fewer samples (docs/benchmarks.md, issue 59).
    early, early_draw: growth samples a rule to choose from ``early_draw`` samples at a time, and chooses
        as soon as the rule it would test next has ``early`` reused samples all keeping the label (None:
        it samples the whole ``parent_samples`` first).
    draw_first: while the rule growth would test next adds several features at once, the samples it
        draws to choose keep the first of them too (the most credited): when that feature is one the
        rule needs, twice as many of them are the next rule's (for two features, half of them against a
        quarter of the parent's).
    drop_misses: reducing a certified jump, growth stops dropping features once this many rules in a row,
        each without one of them, are refused (None: it tries every feature the jump added).
    lookahead: growth adds at once the next most credited features while the fit predicts the rule's
        precision below this (None: one feature per step, unless its reused samples refuse it).
    prediction_rows: rows of the coverage pool on which the fit predicts a rule's precision.
    fit_weight: how many of a rule's reused samples the fit's prediction counts as.
    credit_l2, credit_bias_l2, credit_iterations: the ridge penalty of the logistic fit on the
        features' weights and on its bias (near 0: the base rate is not shrunk), its Newton iterations.
    """

    parent_samples: int = 75
    scored_samples: int = 40
    per_feature: int = 5
    early: int | None = 10
    early_draw: int = 10
    draw_first: bool = True
    drop_misses: int | None = 3
    lookahead: float | None = 0.9
    prediction_rows: int = 512
    fit_weight: float = 2.0
    credit_l2: float = 1.0
    credit_bias_l2: float = 1e-3
    credit_iterations: int = 15

    def __post_init__(self) -> None:
        for name in ("parent_samples", "scored_samples", "per_feature", "prediction_rows", "credit_iterations"):
            check_int(name, getattr(self, name))
        check_int("early", self.early, optional=True)
        check_int("early_draw", self.early_draw)
        check_int("drop_misses", self.drop_misses, optional=True)
        if not isinstance(self.draw_first, bool):
            raise ConfigError(f"draw_first must be True or False, got {self.draw_first!r}")
        check_number("lookahead", self.lookahead, high=1.0, open_high=False, optional=True)
        check_number("fit_weight", self.fit_weight, open_low=False, high=math.inf)
        check_number("credit_l2", self.credit_l2, high=math.inf)
        check_number("credit_bias_l2", self.credit_bias_l2, high=math.inf)


@dataclass
class Growth:
    """The guided search's growth, as a `Proposer` (see the module); ``params``: `GrowthParams`.

    ``shortest``: no rule shorter than this is tested (grown past as if its reused samples refused it:
    growth told the anchor's length); ``final``: the first rule it certifies ends the search. Its steps
    come from one generator (`_steps`), read top to bottom: sample the rule grown so far, test the next
    rule, and after a certified jump, reduce it.
    """

    params: GrowthParams = field(default_factory=GrowthParams)
    name: str = "growth"
    first: bool = False
    shortest: int = 0
    final: bool = False
    _run: Generator[Step, None, None] | None = field(default=None, init=False, repr=False)

    def propose(self, guide: Guide) -> Step | None:
        if self._run is None:
            self._run = self._steps(guide)
        return next(self._run, None)

    def _steps(self, guide: Guide) -> Generator[Step, None, None]:
        """Every step growth takes on one search: the rule grown so far sampled until choosing can (`_draw`,
        `_early`), the next rule tested, and a rule that grew by several features and was certified reduced
        (`_reduce`); until no rule shorter than the anchor so far is left to try."""
        path = [guide.candidate(frozenset(), ())]
        passed: set[Rule] = set()  # refused by reuse, grown past
        aside = 0  # drawn keeping a jump's first feature, this step
        while True:
            parent, best = path[-1], guide.best
            if len(parent.rule) >= guide.max_size or (best is not None and len(parent.rule) + 1 >= len(best.rule)):
                return
            chosen, owed = None, guide.owed(parent)
            if (draw := self._draw(guide, parent, owed, aside)) is not None:
                draw, chosen = self._early(guide, parent, best, draw, owed, passed)
                if draw is not None:
                    aside += draw.n if draw.candidate.rule != parent.rule else 0
                    yield draw
                    continue
            step, grown_past = chosen if chosen is not None else self._grow(guide, parent, best, passed)
            if step is None:
                return
            passed |= grown_past
            aside = 0
            path.append(step)
            yield self._judge(step)
            if step.certified and len(step.rule) - len(parent.rule) > 1:  # its verdict, once judged
                yield from self._reduce(guide, step, len(parent.rule), passed)

    def _judge(self, c: RuleView) -> Judge:
        return Judge(c, f"{self.name}-{len(c.rule)}", final=self.final, traced=True)

    def _refused(self, guide: Guide, c: RuleView) -> bool:
        """Its reused samples refuse ``c``, or it is shorter than ``shortest``."""
        return len(c.rule) < self.shortest or guide.refused(c)

    def _draw(self, guide: Guide, parent: RuleView, owed: int, aside: int) -> Draw | None:
        """Samples of ``parent`` still to draw before growing from it: up to what choosing needs
        (``parent_samples``, ``per_feature`` per feature it could add; ``aside``: drawn keeping a jump's
        first feature count too); for a refused parent whose fresh precision is back at τ and whose bet
        could still certify it (``owed``: `Guide.owed`), what the bet needs; None when choosing can."""
        p, stage = self.params, f"{self.name}-{len(parent.rule)}"
        if owed and parent.fresh and sum(parent.fresh) >= guide.threshold * len(parent.fresh):
            return Draw(parent, owed, stage)  # refused on a bad start, since recovered: its bet decides
        most = p.parent_samples if guide.scored() is None else p.scored_samples
        wanted = min(most, p.per_feature * (len(guide.choosable) - len(parent.rule)))
        have = parent.n + aside
        return Draw(parent, wanted - have, stage) if have < wanted else None

    def _early(
        self, guide: Guide, parent: RuleView, best: RuleView | None, draw: Draw, owed: int, passed: set[Rule]
    ) -> tuple[Draw | None, tuple[RuleView | None, set[Rule]] | None]:
        """``draw``, ``early_draw`` samples at a time, until the rule growth would test next has ``early``
        reused samples all keeping the label: then no draw, and that rule (not while a refused parent's
        bet could still certify it, or with ``early`` None). While that rule adds several features, the
        samples drawn keep the first of them too (``draw_first``; they count toward ``draw``'s)."""
        p = self.params
        if p.early is None or owed:
            return draw, None
        chosen = self._grow(guide, parent, best, passed)
        step = chosen[0]
        if step is not None and step.n >= p.early and step.positives == step.n:
            return None, chosen
        n = min(p.early_draw, draw.n)
        if p.draw_first and step is not None and len(step.rule) - len(parent.rule) > 1:
            order = step.order[: len(parent.rule) + 1]
            return Draw(guide.candidate(frozenset(order), order), n, f"{self.name}-{len(order)}"), None
        return Draw(parent, n, draw.stage), None

    @staticmethod
    def _tried(guide: Guide, rule: Rule, passed: set[Rule]) -> bool:
        return rule in guide.tried or rule in passed

    def _grow(
        self, guide: Guide, parent: RuleView, best: RuleView | None, passed: set[Rule]
    ) -> tuple[RuleView | None, set[Rule]]:
        """The next rule to test: ``parent`` and the feature not tried before that keeps the label
        most, by a ridge-logistic fit of every sample of this input labelled so far (`credit`: of the
        probability the model gave the input's label, when it gives them; ties by precision on the
        samples it reuses), then the next most credited while the rule could
        not pass anyway (`_ahead`); and the rules grown past because their reused samples refuse them.

        Each extension reuses only about half of its parent's samples, and the most precise on
        those, among dozens, is mostly the luckiest: growth then adds words the model does not need.
        The fit pools every sample, each feature's weight measured with the others held.
        """
        floor = best.coverage if best is not None else -1.0
        lacking = [f for f in guide.choosable if f not in parent.rule]
        made = [guide.candidate(parent.rule | {f}, parent.order + (f,)) for f in lacking]
        cands = [c for c in made if c.coverage > floor and not self._tried(guide, c.rule, passed)]
        if not cands:
            return None, set()
        present, kept = guide.labelled()
        weights, bias = credit(present, kept, self.params)
        scores = guide.scored()
        rank = weights if scores is None else credit(present, scores, self.params)[0]
        step = max(cands, key=lambda c: (max(rank[f] for f in c.rule - parent.rule), c.laplace))
        limit = len(best.rule) - 1 if best is not None else guide.max_size
        return self._ahead(guide, step, (rank, weights, bias), floor, limit, passed)

    def _ahead(
        self, guide: Guide, step: RuleView, fits: tuple[np.ndarray, np.ndarray, float], floor: float, limit: int,
        passed: set[Rule],
    ) -> tuple[RuleView, set[Rule]]:  # fmt: skip
        """``step`` with the next most credited features (positive credit only, ``rank``) added while its
        reused samples refuse it or the fit of the labels (``weights``, ``bias``) predicts it below
        ``lookahead``; at most ``limit`` features, its coverage above ``floor``, never a rule tried
        before; and the rules its samples refused, grown past (not tried again; one the fit only
        predicted to fail may be, when the jump is reduced)."""
        rank, weights, bias = fits
        cand, grown_past = step, set[Rule]()
        rest = iter(sorted((f for f in guide.choosable if f not in step.rule), key=lambda f: -rank[f]))
        lookahead = self.params.lookahead
        while len(cand.rule) < limit:
            refused = self._refused(guide, cand)
            if not refused and (lookahead is None or self._predicted(guide, cand, weights, bias) >= lookahead):
                break
            f = next(rest, None)
            if f is None or rank[f] <= 0:
                break
            rule = cand.rule | {f}
            if self._tried(guide, rule, passed):
                break
            grown = guide.candidate(rule, cand.order + (f,))
            if grown.coverage <= floor:
                break
            if refused:
                grown_past.add(cand.rule)
            cand = grown
        return cand, grown_past

    def _predicted(self, guide: Guide, c: RuleView, weights: np.ndarray, bias: float) -> float:
        """The rule's precision as the fit predicts it (its mean over pool rows with the rule's
        features kept), corrected by the samples the rule reuses (the fit counting as
        ``fit_weight`` samples): a logistic fit cannot express a conjunction, its samples can."""
        p = self.params
        x = guide.pool[: p.prediction_rows].astype(float)
        x[:, sorted(c.rule)] = 1.0
        fitted = float(sigmoid(x @ weights + bias).mean())
        return (p.fit_weight * fitted + c.positives) / (p.fit_weight + c.n)

    def _reduce(self, guide: Guide, jump: RuleView, start: int, passed: set[Rule]) -> Generator[Step, None, None]:
        """After ``jump`` (grown from a rule of ``start`` features by several at once) was certified: prefixes
        of its order tested, halving the gap between the longest refused and the shortest certified; then
        the shortest certified without each feature the jump added (the last added first), unless it was
        tried or its reused samples refuse it, until ``drop_misses`` dropped rules in a row are refused."""
        low, high, kept = start, len(jump.rule), jump
        while high - low > 1:
            middle = (low + high) // 2
            rule = frozenset(jump.order[:middle])
            if self._tried(guide, rule, passed):
                low = middle  # a prefix tried before counts as refused
                continue
            prefix = guide.candidate(rule, jump.order[:middle])
            yield self._judge(prefix)
            if prefix.certified:
                kept, high = prefix, middle
            else:
                low = middle
        misses, most = 0, self.params.drop_misses
        for f in list(reversed(kept.order[start:])):
            rule = kept.rule - {f}
            if f not in kept.rule or self._tried(guide, rule, passed):
                continue
            dropped = guide.candidate(rule, tuple(g for g in kept.order if g != f))
            if self._refused(guide, dropped):
                passed.add(rule)
                continue
            yield self._judge(dropped)
            if dropped.certified:
                kept, misses = dropped, 0
            elif most is not None and (misses := misses + 1) >= most:
                return  # the features left are likely needed too; each try costs a test


def credit(present: np.ndarray, kept: np.ndarray, params: GrowthParams | None = None) -> tuple[np.ndarray, float]:
    """Each feature's weight in a ridge-logistic fit of "label kept" (or its probability) on the
    features kept, over the samples given, and the fit's bias (penalties and Newton steps: ``params``' credit_*)."""
    p = params or GrowthParams()
    x = np.hstack([present.astype(float), np.ones((len(kept), 1))])
    reg = np.full(x.shape[1], p.credit_l2)
    reg[-1] = p.credit_bias_l2
    theta = ridge_logistic(x, kept.astype(float), np.zeros(x.shape[1]), reg, iterations=p.credit_iterations)
    return theta[:-1], float(theta[-1])
