"""Would the surrogate pay as a control variate near τ? A replay of logged tuning runs, with no query.

    python -m benchmarks.control_variate trace OUT.json.gz --tuning --n 400 --strategy guided [stream options]
    python -m benchmarks.control_variate replay OUT.json.gz [--bins 2 | --quantiles 0.1] [--refit 10] [--peek]

``trace`` runs `benchmarks.stream` and logs every rule each guided search tested (`benchmarks.search_trace`):
its share of δ, the samples labelled in the input before it was chosen, the samples that judged it (which
words each kept, whether the label held) in the order drawn, and its verdict.

``replay`` reads the log. A surrogate (`Surrogate`: its cross-input layer learned from the earlier inputs,
fitted to this input's samples from before the rule was chosen, or refitted every ``--refit`` of the rule's
samples) splits the rule's perturbations into cells by its score, each cell's share μ_g computed from free
draws of the rule's perturbations. Per tested rule, on the logged samples in their order:

- today's bet, replayed after every sample (it must give the logged verdict: the replay's check);
- the cell bet: each cell's rate p̂_g estimated from the samples before (its prior: the mean score in the
  cell), projected onto the null Σ μ_g q_g ≤ b' (the reverse information projection), the wealth multiplied
  by p̂_g/q_g when a sample keeps the label, (1 − p̂_g)/(1 − q_g) when not: under any law of the null with
  those shares the factor's mean is at most 1 (a test supermartingale); b' = b + the shares' error at α′ (a
  tenth of the rule's share); averaged with today's bet (the hedge), it certifies at 1/(0.9·share);
- stratified refusal: samples drawn only where the surrogate predicts a flip, the rule refused once
  μ_other + μ_low·(the low cell's KL upper bound at ``refute``) < τ: told which rules fail (the rules
  refused today), and as a policy a search could run (`_probe`: up to m such draws before every rule).

A rule the log does not settle is continued by drawing its own logged samples again. Prints the table and
writes JSON: paid queries (texts new to their input) of the rules tested, today and replayed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors.samplers.base import keep_independently
from llm_anchors.search.bandit import kl_upper_bound
from llm_anchors.search.certify import Certifier, Trial
from llm_anchors.search.params import SearchParams

from . import stream
from ._common import markdown_table, write_json
from .search_trace import Tracer, row, save
from .surrogate import Surrogate, SurrogateFit

__all__ = ["main", "replay"]


# -- the trace ------------------------------------------------------------------------------------------


def trace(out: Path, argv: list[str]) -> None:
    """Run `benchmarks.stream` with ``argv``, its guided searches logged to ``out``."""
    with Tracer().installed() as tracer:
        stream.main(argv)
    save(out, argv, tracer.searches)
    print(f"wrote {out}: {len(tracer.searches)} searches, {sum(len(s['rules']) for s in tracer.searches):,} rules")


# -- the replay -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cells:
    """A rule's perturbations split by the surrogate's score: per sample its cell, per cell its share μ
    (from free draws), its error at α′, and the prior of its rate (the mean score in the cell)."""

    of: np.ndarray
    mu: np.ndarray
    error: float
    prior: np.ndarray


class Refits:
    """The cells of a rule's samples under the surrogate as fitted before sample i (``at(i)``): fitted once
    before the rule, or again every ``how.refit`` samples on the rule's samples before (each fit made once)."""

    def __init__(
        self,
        fit: Callable[[np.ndarray, np.ndarray], SurrogateFit],
        masks: np.ndarray,
        kept: np.ndarray,
        draws: np.ndarray,
        how: Replayed,
        alpha: float,
    ) -> None:
        self.fit, self.masks, self.kept, self.draws, self.how, self.alpha = fit, masks, kept, draws, how, alpha
        self.fits: dict[int, SurrogateFit] = {}
        """The surrogate of each refit (0: the one fixed before the rule)."""
        self._made: dict[int, Cells] = {}

    def at(self, i: int) -> Cells:
        chunk = i // self.how.refit if self.how.refit else 0
        if chunk not in self._made:
            upto = chunk * self.how.refit
            self.fits[chunk] = self.fit(self.masks[:upto], self.kept[:upto])
            self._made[chunk] = cells(self.fits[chunk], self.masks, self.draws, self.how, self.alpha)
        return self._made[chunk]


@dataclass(frozen=True)
class Replayed:
    """How the replay splits and bets: ``bins`` equal bins of the score on [0, 1] (2: predicted kept above
    ½, flipped below), or cells at these ``quantiles`` of the score under the rule's perturbations (0.1:
    its lowest-scored tenth apart); ``hedge``: half the wealth on today's bet; ``weight``: each cell's prior
    rate (the surrogate's mean score in it) held as this many samples; ``draws``: free draws for the shares."""

    bins: int = 2
    quantiles: tuple[float, ...] = ()
    hedge: bool = True
    weight: float = 20.0
    draws: int = 20_000
    seed: int = 0
    refit: int = 0
    """Refit the surrogate every this many of the rule's samples, on those before too (0: fixed before the rule)."""
    peek: bool = False
    """The surrogate fitted to the rule's own judging samples too: not a test (its cells are not predictable),
    the most any surrogate refitted along the rule's samples could know."""


def cells(fit: SurrogateFit, judged: np.ndarray, draws: np.ndarray, how: Replayed, alpha: float) -> Cells:
    """A rule's cells (see `Replayed`), their shares from ``draws`` with their error at ``alpha``."""
    score = fit(draws)
    edges = np.quantile(score, how.quantiles) if how.quantiles else np.linspace(0.0, 1.0, how.bins + 1)[1:-1]
    k = len(edges) + 1
    drawn = np.searchsorted(edges, score, side="right")
    mu = np.bincount(drawn, minlength=k) / len(draws)
    prior = np.array([score[drawn == g].mean() if (drawn == g).any() else (g + 0.5) / k for g in range(k)])
    # Bernstein on each share, α′ split over the cells; the null's slack is at most the shares' total error.
    log = math.log(2 * k / alpha)
    error = float(sum(math.sqrt(2 * m * (1 - m) * log / len(draws)) + log / (3 * len(draws)) for m in mu))
    return Cells(np.searchsorted(edges, fit(judged), side="right"), mu, error, np.clip(prior, 0.01, 0.99))


def projection(p: np.ndarray, mu: np.ndarray, bound: float) -> np.ndarray:
    """The cells' rates q closest to ``p`` (KL, weighted by ``mu``) with Σ μ_g q_g ≤ ``bound``: (p_g −
    q_g) = ν q_g (1 − q_g) for one ν ≥ 0, found by bisection."""
    if float(mu @ p) <= bound:
        return p.copy()

    def q(nu: float) -> np.ndarray:
        if nu == 0:
            return p.copy()
        a = nu + 1.0
        return (a - np.sqrt(a * a - 4 * nu * p)) / (2 * nu)

    low, high = 0.0, 1.0
    while float(mu @ q(high)) > bound:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if float(mu @ q(mid)) > bound else (low, mid)
    return q(high)


def today(params: SearchParams, share: float, kept: Sequence[bool]) -> tuple[int, str]:
    """Today's verdict on a rule, judged after every sample: (samples judged, verdict)."""
    certifier, trial = Certifier(params), Trial(1, share)
    for n in range(1, len(kept) + 1):
        verdict = certifier.judge(trial, kept[:n])
        if verdict != "more":
            return n, verdict
    return len(kept), "more"


def cell_bet(
    params: SearchParams, share: float, refits: Refits, kept: Sequence[bool], how: Replayed, stratified: bool
) -> tuple[int, str]:
    """The hedged cell bet on a rule's judging samples, judged after every sample: (samples, verdict).
    Before each sample, each cell's rate is estimated from the samples before it in that cell (under the
    surrogate of the moment: predictable). It certifies when half its wealth and half today's reach
    1/(0.9·share) and (by default) the precision estimate reaches τ (``stratified``: Σ μ_g p̂_g, else the
    share kept); today's refutation and futility refuse, on the same samples."""
    certifier, trial = Certifier(params), Trial(1, share)
    goal, mine = math.log(1.0 / (0.9 * share)), 0.0
    y_all = np.array(kept, dtype=bool)
    for i, y in enumerate(kept):
        c = refits.at(i)
        k, g = len(c.mu), int(c.of[i])
        seen = np.bincount(c.of[:i], minlength=k)
        agreed = np.bincount(c.of[:i], weights=y_all[:i], minlength=k)
        p = (agreed + how.weight * c.prior) / (seen + how.weight)
        q = projection(p, c.mu, min(params.bound + c.error, 0.999))
        mine += math.log(p[g] / q[g]) if y else math.log((1 - p[g]) / (1 - q[g]))
        trial.wealth += certifier.step(trial.seen, trial.kept, bool(y))
        n, trial.kept = i + 1, trial.kept + int(y)
        trial.seen = n
        wealth = float(np.logaddexp(mine, trial.wealth)) - math.log(2) if how.hedge else mine
        seen, agreed = seen + np.eye(k)[g], agreed + np.eye(k)[g] * int(y)
        estimate = float(c.mu @ (agreed / np.maximum(seen, 1))) if stratified and seen.all() else trial.kept / n
        if wealth >= goal and (params.certify == "strict" or estimate >= params.threshold):
            return n, "certified"
        if certifier.refuted(kept[:n]) or certifier.soonest(trial) is None:
            return n, "refused"
    return len(kept), "more"


def stratified_refusal(params: SearchParams, refits: Refits, kept: Sequence[bool]) -> int | None:
    """Samples drawn only in the cell the surrogate of the moment says flips most (the logged samples that
    fell there), the rule refused once the precision it could at most have is below τ: μ of the other cells
    at 1, that cell's at its KL upper bound at ``refute``, from the samples drawn that are in it now; the
    samples drawn, or None when the logged ones do not refuse it."""
    level, drawn = math.log(1.0 / params.refute), []
    y_all = np.array(kept, dtype=bool)
    for i in range(len(kept)):
        c = refits.at(i)
        low = int(np.argmin(c.prior))
        if c.of[i] != low:
            continue
        drawn.append(i)
        mine = [j for j in drawn if c.of[j] == low]
        n, k = len(mine), int(y_all[mine].sum())
        most = 1.0 - c.mu[low] + c.mu[low] * kl_upper_bound(k / n, level / n)
        if most < params.threshold:
            return len(drawn)
    return None


def replay(path: Path, how: Replayed) -> dict[str, Any]:
    """Replay every rule a trace logged (see the module): a row per rule, and the search's totals."""
    with gzip.open(path, "rt") as file:
        data = json.load(file)
    params = SearchParams()
    surrogate, rng = Surrogate(), np.random.default_rng(how.seed)
    rows: list[dict[str, Any]] = []
    near: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for search in data["searches"]:
        f, target = len(search["words"]), search["target"]
        keys = [w.lower() for w in search["words"]]
        present = np.array([row(b, f) for b in search["present"]]).reshape(-1, f)
        labels = np.array([c == "1" for c in search["kept"]])
        for rule in search["rules"]:
            if rule["kept"] and rule["verdict"] is not None:
                rows.append(_replayed(rule, search, keys, present, labels, surrogate, params, how, rng, near))
        if len(labels):
            surrogate.learn(keys, present, labels, target)
    paid_total = sum(len(set(s["present"])) + 1 for s in data["searches"])
    result = {"rows": rows, "argv": data["argv"], "inputs": len(data["searches"]), "paid_total": paid_total}
    return result | near_tau(near)


def _replayed(
    rule: dict[str, Any], search: dict[str, Any], keys: list[str], present: np.ndarray, labels: np.ndarray,
    surrogate: Surrogate, params: SearchParams, how: Replayed, rng: np.random.Generator, near: list[Any],
) -> dict[str, Any]:  # fmt: skip
    f, before, target = len(keys), rule["before"], search["target"]
    logged = np.array([row(b, f) for b in rule["fresh"]])
    kept = [bool(k) for k in rule["kept"]]
    n_today, verdict = today(params, rule["share"], kept)
    patience = Certifier(params).patience(Trial(1, rule["share"]))
    order = np.concatenate([np.arange(len(kept)), rng.integers(0, len(kept), size=max(patience - len(kept), 0))])
    masks, longer = logged[order], [kept[i] for i in order]  # past the log: its own samples drawn again

    def fit(x: np.ndarray, y: np.ndarray) -> SurrogateFit:
        x, y = np.vstack([present[:before], x]), np.concatenate([labels[:before], y])
        if how.peek:
            x, y = np.vstack([x, logged]), np.concatenate([y, np.array(kept)])
        if len(y):
            return surrogate.fit(keys, x, y, target)
        shared, bias = surrogate.shared(keys, target)
        return SurrogateFit(shared, bias, 1.0, np.zeros(f), 0.0)

    draws = keep_independently(how.draws, f, frozenset(rule["rule"]), search["p_hide"], rng)
    refits = Refits(fit, masks, np.array(longer), draws, how, 0.1 * rule["share"])
    n_bet, v_bet = cell_bet(params, rule["share"], refits, longer, how, stratified=False)
    n_strat, v_strat = cell_bet(params, rule["share"], refits, longer, how, stratified=True)
    refusal = stratified_refusal(params, refits, longer)  # asked of every rule: a policy cannot know which
    first = refits.at(0)
    scores = refits.fits[0](logged)
    if 0.9 <= float(np.mean(kept)) < 1.0:
        near.append((scores, np.array(kept), first.of[: len(kept)] == int(np.argmin(first.prior))))
    seen, fresh = set(search["present"][:before]), []
    for b in rule["fresh"]:
        fresh.append(b not in seen)
        seen.add(b)
    paid = _paid(fresh)
    return {
        "rule": len(rule["rule"]), "share": rule["share"], "verdict": verdict, "logged": rule["verdict"],
        "n": n_today, "logged_n": len(kept), "precision": sum(kept) / len(kept),
        "disagree": float(np.mean((scores >= 0.5) != np.array(kept))),
        "mu_flip": float(first.mu[int(np.argmin(first.prior))]), "error": first.error,
        "bet": n_bet, "bet_verdict": v_bet, "stratified": n_strat, "stratified_verdict": v_strat,
        "refusal": refusal, "paid_n": paid(n_today), "paid_bet": paid(n_bet), "paid_stratified": paid(n_strat),
        "paid_refusal": paid(refusal) if refusal is not None else None,
        **{f"paid_probe_{m}": _probe(refusal, m, paid, n_today) for m in PROBES},
    }  # fmt: skip


def near_tau(near: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, float]:
    """How well the surrogate finds the flips of rules near τ: its AUC (a kept sample scored above a flipped
    one), and the share of the flips, and of the samples, in each rule's lowest cell."""
    if not near:
        return {"auc": math.nan, "low_flips": math.nan, "low_share": math.nan}
    scores = np.concatenate([s for s, _, _ in near])
    kept = np.concatenate([k for _, k, _ in near])
    low = np.concatenate([c for _, _, c in near])
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    n_kept, n_flipped = int(kept.sum()), int((~kept).sum())
    auc = (ranks[kept].sum() - n_kept * (n_kept + 1) / 2) / max(n_kept * n_flipped, 1)
    return {"auc": float(auc), "low_flips": float((low & ~kept).sum() / max(n_flipped, 1)),
            "low_share": float(low.mean())}  # fmt: skip


def _paid(fresh: Sequence[bool]) -> Any:
    """The paid queries among a rule's first n judging samples: those whose text was not labelled before in
    the input (a repeat is a cache hit); past the log, the log's share of new texts."""
    rate = sum(fresh) / len(fresh) if fresh else 1.0

    def paid(n: int) -> float:
        return float(sum(fresh[:n]) + max(n - len(fresh), 0) * rate)

    return paid


PROBES = (5, 10, 20)
"""Stratified draws asked of every rule before it is judged as today (see `_probe`)."""


def _probe(refusal: int | None, m: int, paid: Any, n_today: int) -> float:
    """A policy a search could run: draw up to ``m`` samples where the surrogate predicts a flip; refused
    there, the rule costs those; else they are lost (they may not feed the certificate unweighted) and the
    rule is judged as today."""
    if refusal is not None and refusal <= m:
        return float(paid(refusal))
    return float(paid(m) + paid(n_today))


def summary(rows: list[dict[str, Any]], total: float) -> list[str]:
    """A markdown row per group of rules: their paid queries today, and what each replayed change saves
    (negative: it costs more); the last row, all rules as a share of every paid query of the run."""

    def group(name: str, chosen: list[dict[str, Any]], share: bool = False) -> str:
        paid = sum(r["paid_n"] for r in chosen)
        saved = [
            sum(r["paid_n"] - r["paid_bet"] for r in chosen if r["verdict"] == "certified"),
            sum(r["paid_n"] - r["paid_stratified"] for r in chosen if r["verdict"] == "certified"),
            sum(r["paid_n"] - r["paid_refusal"] for r in chosen if r["verdict"] == "refused" and r["refusal"]),
            *(sum(r["paid_n"] - r[f"paid_probe_{m}"] for r in chosen) for m in PROBES),
        ]
        shown = [f"{v:,.0f} ({v / total:.1%})" if share else f"{v:,.0f}" for v in saved]
        lost = sum(r["verdict"] == "certified" and r["refusal"] is not None and r["refusal"] <= 10 for r in chosen)
        dis = float(np.mean([r["disagree"] for r in chosen])) if chosen else math.nan
        return f"| {name} | {len(chosen):,} | {paid:,.0f} | {dis:.3f} | {' | '.join(shown)} | {lost} |"

    certified = [r for r in rows if r["verdict"] == "certified"]
    refused = [r for r in rows if r["verdict"] == "refused"]
    return [
        group("certified at precision 1", [r for r in certified if r["precision"] == 1.0]),
        group("certified, precision < 1", [r for r in certified if r["precision"] < 1.0]),
        group("refused, precision ≥ 0.85", [r for r in refused if r["precision"] >= 0.85]),
        group("refused, precision < 0.85", [r for r in refused if r["precision"] < 0.85]),
        group("all rules tested (share of all paid)", rows, share=True),
    ]


HEADER = (
    "| rules tested (precision: on their judging samples) | rules | paid today | surrogate disagrees "
    "| saved: cell bet | saved: + stratified precision | saved: stratified refusal, told which rules fail "
    "| saved: probe 5 | saved: probe 10 | saved: probe 20 | certified rules a probe of 10 refuses |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "trace":
        trace(Path(argv[1]), argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["replay"])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--bins", type=int, default=2, help="cells: equal bins of the score (2: split at ½)")
    parser.add_argument("--quantiles", type=float, nargs="*", default=[], help="cells at these quantiles instead")
    parser.add_argument("--no-hedge", action="store_true", help="the cell bet alone, not averaged with today's")
    parser.add_argument("--weight", type=float, default=20.0, help="the cells' priors, held as this many samples")
    parser.add_argument("--draws", type=int, default=20_000, help="free draws per rule for the cells' shares")
    parser.add_argument("--refit", type=int, default=0, help="refit the surrogate every K of a rule's samples")
    parser.add_argument("--peek", action="store_true", help="fit to the rule's own samples too (not a test: a bound)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default=None)
    args = parser.parse_args(argv)
    how = Replayed(args.bins, tuple(args.quantiles), not args.no_hedge, args.weight, args.draws, args.seed,
                   args.refit, args.peek)  # fmt: skip
    result = replay(args.trace, how)
    rows = result["rows"]
    check = sum(r["verdict"] == r["logged"] for r in rows)
    total = result["paid_total"]
    print(markdown_table(HEADER, summary(rows, total)))
    print(
        f"\n{result['inputs']:,} searches, {total:,.0f} paid queries in all (texts new to their input, and each "
        "input's own)"
    )
    print(
        f"the replay gives the logged verdict for {check:,} of {len(rows):,} rules (judged after every sample, "
        "not after every request: it may decide a few samples sooner)"
    )
    name = args.name or args.trace.name.split(".")[0]
    print(
        f"near τ (0.9 ≤ precision < 1 on the judging samples): the surrogate's AUC {result['auc']:.3f}; its "
        f"lowest cell holds {result['low_flips']:.2f} of the flips and {result['low_share']:.3f} of the samples"
    )
    print(f"wrote {write_json(f'control_variate_{name}', {**result, 'settings': asdict(how)})}")


if __name__ == "__main__":
    main()
