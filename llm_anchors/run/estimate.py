"""What explaining a file will cost, before the run pays for it: a seeded pilot, extrapolated.

The pilot explains a seeded sample of the inputs with the run's explainer
(its seed, its label cache: the run does not pay twice for what the pilot
asked). The pilot is a seeded sample of 20% of the inputs (at most 50)
holding at most 20% of the file's words, so that it costs about a fifth of
the run and never much over a quarter.

An input's cost grows with its words but is heavy-tailed (most anchors
cost a few hundred queries, a few cost thousands), so the rest of the file
is forecast in two ways: the expected total by the ratio of cost to words
(a ratio estimator), and the 95% range from a log-normal model of the cost
per word, its parameters' uncertainty included (the posterior predictive
of the rest's total, by 4,000 seeded draws): a 95% range under that model,
which real costs follow only roughly. A pilot of a few inputs can
miss a file's expensive ones: ``benchmarks/forecast.py`` measures how often
the range holds.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any, TypeVar

import numpy as np

from .._exceptions import BudgetExceeded
from ..explain.anchors import AnchorsExplainer
from ..explain.explanation import Explanation
from ..money.budget import BudgetReport
from ..money.charge import Charge

__all__ = ["Forecast", "estimate", "forecast_rest", "pilot_indices"]

R = TypeVar("R")


@dataclass(frozen=True)
class Forecast:
    """What the run of a file will spend after its pilot, with a 95% range, and what the pilot spent.

    ``pilot``: the inputs the pilot explained; ``partial``: the cap stopped it before the
    ``planned`` inputs were explained, so the forecast rests on fewer. When it explained none there is
    no forecast: the expected totals and their ranges are None (``null`` in JSON), never 0.

    The range is the 95% interval of a log-normal model of the pilot's cost per word (its parameters'
    uncertainty included): it holds 95% of the time when costs are so, as simulated in
    ``tests/test_estimate.py``, and on real files as often as ``benchmarks/forecast.py`` measures."""

    inputs: int
    pilot: int
    queries_expected: int | None
    queries_low: int | None
    queries_high: int | None
    usd_expected: Decimal | None
    usd_low: Decimal | None
    usd_high: Decimal | None
    pilot_queries: int
    pilot_usd: Decimal
    planned: int = 0
    partial: bool = False
    explainer: str = ""
    """The explainer the pilot ran, which the forecast prices ("MAnchors' guided search, its memory on")."""
    cached_share: float | None = None
    """The share of the pilot's prompt tokens that is the prompt's constant prefix, which the provider's prompt
    cache may hold (billed at its cached rate when it does: the pilot's spend, and so the forecast, is as
    billed); None: the provider caches no prompt (a local server), or the classifier has no prompt."""

    def summary(self) -> str:
        spent = f"spent {self.pilot_queries:,} queries and ${self.pilot_usd}, and its labels are the run's"
        planned = f"{self.planned:,} inputs"
        if not self.pilot and self.partial:
            return f"the cap stopped the pilot before it explained any of its {planned}: no forecast; it {spent}"
        if not self.pilot:
            return f"none of the pilot's {planned} could be explained (`run` says why): no forecast; it {spent}"
        stopped = f" (partial: the cap stopped it after {self.pilot:,} of {self.planned:,})" if self.partial else ""
        by = f" with {self.explainer}" if self.explainer else ""
        return (
            f"explaining the {self.inputs - self.pilot:,} inputs left of {self.inputs:,}{by} will take about "
            f"{self.queries_expected:,} queries ({self.queries_low:,}–{self.queries_high:,}) and "
            f"${self.usd_expected} (${self.usd_low}–${self.usd_high}; 95% ranges of a log-normal model of the "
            f"pilot's cost per word); the pilot of {self.pilot:,} inputs{stopped} {spent}{self._cached()}"
        )

    def _cached(self) -> str:
        if self.cached_share is None:
            return ""
        return (f"; {self.cached_share:.0%} of each prompt is its constant prefix (system, examples), billed at the "
                "cached rate when the provider's cache holds it")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Decimal) else v for k, v in asdict(self).items()}


def pilot_indices(words: Sequence[int], seed: int) -> list[int]:
    """The inputs a pilot explains, given each input's words: a seeded sample of 20% of them (at most 50,
    at least one) holding at most 20% of all the words, in input order. Inputs of no words are never
    chosen (they cost nothing)."""
    size = min(50, max(1, len(words) // 5))
    allowed = 0.2 * sum(words)
    chosen: list[int] = []
    held = 0
    for i in np.random.default_rng(seed).permutation(len(words)):
        if len(chosen) == size:
            break
        if 0 < words[i] and held + words[i] <= allowed:
            chosen.append(int(i))
            held += words[i]
    if not chosen and any(words):
        chosen = [min((w, i) for i, w in enumerate(words) if w)[1]]
    return sorted(chosen)


async def estimate(explainer: AnchorsExplainer, texts: Sequence[Any], *, seed: int = 0) -> Forecast:
    """Explain a pilot of ``texts`` (`pilot_indices`) with ``explainer`` and forecast the rest. When the
    explainer's cap stops the pilot, the forecast rests on the inputs it explained whole (``partial``).
    The pilot's spend is what the explainer's budget settled while it ran (or, without one, its
    explanations')."""
    words_of = [_words(explainer, text) for text in texts]
    chosen = pilot_indices(words_of, seed)
    before = explainer.budget.report() if explainer.budget is not None else None
    explained: dict[int, Explanation] = {}
    stopped = False
    answered = 0
    try:
        async with contextlib.aclosing(explainer.explain_stream([texts[i] for i in chosen], errors="yield")) as stream:
            async for index, exp in _indexed(chosen, stream):
                answered += 1
                if isinstance(exp, Explanation) and _refused(explainer, before, exp):
                    stopped = True
                    break
                if isinstance(exp, Explanation):
                    explained[index] = exp
    except BudgetExceeded:  # refused before an input had a label
        if before is None:
            raise
        stopped = True
    stopped = stopped or answered < len(chosen)  # on_budget="return": the cap ended the stream early
    sizes = [len(e.data.features) for e in explained.values()]
    spent = sum((e.meta.cost.settled for e in explained.values()), Charge())
    if before is not None and explainer.budget is not None:
        spent = _minus(explainer.budget.report().settled, before.settled)
    rest = [words_of[i] for i in range(len(texts)) if i not in explained]
    queries = forecast_rest(sizes, [e.meta.queries for e in explained.values()], rest, seed=seed)
    usd = forecast_rest(sizes, [float(e.meta.cost.settled.usd) for e in explained.values()], rest, seed=seed)
    cents = Decimal("0.000001")
    known = bool(explained)  # else no forecast: None, not 0
    return Forecast(
        inputs=len(texts),
        pilot=len(explained),
        queries_expected=round(queries[0]) if known else None,
        queries_low=math.floor(queries[1]) if known else None,
        queries_high=math.ceil(queries[2]) if known else None,
        usd_expected=Decimal(usd[0]).quantize(cents) if known else None,
        usd_low=Decimal(usd[1]).quantize(cents) if known else None,
        usd_high=Decimal(usd[2]).quantize(cents) if known else None,
        pilot_queries=spent.queries,
        pilot_usd=spent.usd,
        planned=len(chosen),
        partial=stopped,
        explainer=explainer.describe(),
        cached_share=await _cached_share(explainer, [e.data.query for e in explained.values()]),
    )


async def _cached_share(explainer: AnchorsExplainer, texts: Sequence[str]) -> float | None:
    """`LLMClassifier.cacheable_share` of the texts the pilot explained (None: a classifier with no prompt)."""
    share = getattr(explainer.classifier, "cacheable_share", None)
    said = await share(texts) if share is not None and texts else None
    return None if said is None else round(said, 4)


async def _indexed(indices: Sequence[int], stream: AsyncIterator[R]) -> AsyncIterator[tuple[int, R]]:
    position = 0
    async for item in stream:
        yield indices[position], item
        position += 1


def _refused(explainer: AnchorsExplainer, before: BudgetReport | None, exp: Explanation) -> bool:
    """Whether ``exp`` was cut short by the pilot's cap (not by a cap of its own)."""
    if not exp.meta.budget_exhausted:
        return False
    return before is None or explainer.budget is None or explainer.budget.report().refused > before.refused


def _minus(a: Charge, b: Charge) -> Charge:
    return Charge(a.queries - b.queries, a.prompt_tokens - b.prompt_tokens, a.completion_tokens - b.completion_tokens,
                  a.usd - b.usd)  # fmt: skip


def _words(explainer: AnchorsExplainer, text: Any) -> int:
    """An input's features (0 for one that cannot be explained: it costs nothing)."""
    try:
        return len(explainer.sampler.features(text).features)
    except Exception:  # noqa: BLE001 (an invalid input is a failed line of the run, at no cost)
        return 0


_LOG_FLOAT_MAX = 700.0  # exp of it is finite in float64


def forecast_rest(
    sizes: Sequence[int], costs: Sequence[float], rest: Sequence[int], *, seed: int = 0, draws: int = 4000
) -> tuple[float, float, float]:
    """The total cost of inputs of ``rest`` words, from pilot inputs of ``sizes`` words that cost ``costs``:
    the ratio estimate, and the 2.5% and 97.5% quantiles of a log-normal cost per word's posterior
    predictive (seeded draws). A pilot of one input, or of a single cost per word, gives a range
    from a tenth to ten times the estimate."""
    pilot = [(c, w) for c, w in zip(costs, sizes, strict=True) if w > 0]
    words = sum(rest)
    if not pilot or words == 0 or sum(c for c, _ in pilot) <= 0:
        return 0.0, 0.0, 0.0
    expected = sum(c for c, _ in pilot) / sum(w for _, w in pilot) * words
    floor = min(c for c, _ in pilot if c > 0) / 2  # a free input (all its labels cached) in log space
    logs = np.log([max(c, floor) / w for c, w in pilot])
    k = len(logs)
    spread = float(logs.std(ddof=1)) if k > 1 else 0.0
    if spread == 0.0:
        return expected, expected / 10, expected * 10
    rng = np.random.default_rng([seed, 0xF0CA57])
    variance = (k - 1) * spread**2 / rng.chisquare(k - 1, draws)
    mean = rng.normal(float(logs.mean()), np.sqrt(variance / k))
    sizes_left = np.asarray([w for w in rest if w > 0], dtype=float)
    per_word = rng.normal(mean[:, None], np.sqrt(variance)[:, None], (draws, len(sizes_left)))
    terms = per_word + np.log(sizes_left)  # each draw's total, summed in log space: a wide posterior
    top = terms.max(axis=1)  # (a pilot of two or three inputs) would overflow exp
    log_totals = top + np.log(np.exp(terms - top[:, None]).sum(axis=1))
    low, high = np.exp(np.minimum(np.quantile(log_totals, [0.025, 0.975]), _LOG_FLOAT_MAX))
    return expected, min(float(low), expected), max(float(high), expected)
