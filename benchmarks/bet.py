"""The certifier alone, at the precision a rule really has: what its bet pays against the floor.

    python -m benchmarks.bet [--runs 2000] [--precision 0.95 0.97 0.99 1.0] [--rank 2 4] [--set NAME=VALUE ...]

One rule, chosen ``--rank``-th (its share of δ as a search gives it), judged by `Certifier` on samples
that keep the label with probability ``--precision``, drawn as the searches draw them (up to
`Certifier.wanted` at a time) until the verdict. Per precision, mode and rank: the share certified and
refused, the samples spent to the verdict (mean, unconditional: what a search pays whatever the
verdict), the median samples of a certificate, and the floor: Wald's bound on any sequential test's
expected samples at that precision and share, log(1/share)/kl(p, bound) (at p = 1 the fewest
all-agreeing samples). Unlike `benchmarks.power`'s median of certified searches, the spend here is not
conditioned on success. Prints a markdown table and writes JSON (``benchmarks/results/bet.json``).
"""

from __future__ import annotations

import argparse
import math
import statistics
from typing import Any

import numpy as np

from llm_anchors import SearchParams
from llm_anchors.search import Certifier

from ._common import markdown_table, run_suffix, search_overrides, write_json
from .power import floor


def judged(params: SearchParams, precision: float, rank: int, rng: np.random.Generator) -> tuple[str, int, int | None]:
    """One rule's test: its verdict, the samples spent to it, and the certificate's samples (None: none)."""
    certifier = Certifier(params)
    for _ in range(rank):
        trial = certifier.choose()
    fresh: list[bool] = []
    verdict = "more"
    while verdict == "more":
        more = certifier.wanted(trial) - len(fresh)
        fresh.extend(bool(x) for x in rng.random(max(1, more)) < precision)
        verdict = certifier.judge(trial, fresh)
    return verdict, len(fresh), trial.certificate.n if trial.certificate is not None else None


def cell(params: SearchParams, precision: float, rank: int, runs: int, seed: int = 0) -> dict[str, Any]:
    """``runs`` tests of one rule at ``precision``, chosen ``rank``-th."""
    rng = np.random.default_rng([seed, rank, round(precision * 1000)])
    outcomes = [judged(params, precision, rank, rng) for _ in range(runs)]
    certified = [n for verdict, _, n in outcomes if verdict == "certified" and n is not None]
    spent = statistics.mean(s for _, s, _ in outcomes)
    wall = floor(params, rank, precision)
    return {
        "precision": precision, "certify": params.certify, "rank": rank, "runs": runs,
        "certified": len(certified) / runs, "spent_mean": spent,
        "certificate_median": statistics.median(certified) if certified else None, "floor": wall,
        "spent_over_floor": spent / wall if math.isfinite(wall) else None,
    }  # fmt: skip


HEADER = (
    "| precision | certify | rank | certified | samples spent, mean (any verdict) | certificate, median | "
    "floor at its precision and share | spent / floor |",
    "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
)


def markdown(rows: list[dict[str, Any]]) -> str:
    return markdown_table(HEADER, map(_row, rows))


def _row(r: dict[str, Any]) -> str:
    ratio = f"{r['spent_over_floor']:.2f}" if r["spent_over_floor"] is not None else "—"
    median = r["certificate_median"] if r["certificate_median"] is not None else "—"
    wall = f"{r['floor']:.0f}" if math.isfinite(r["floor"]) else "∞ (p ≤ bound)"
    return (f"| {r['precision']} | {r['certify']} | {r['rank']} | {r['certified']:.1%} | {r['spent_mean']:.1f} | "
            f"{median} | {wall} | {ratio} |")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--precision", type=float, nargs="+", default=[0.95, 0.97, 0.99, 1.0])
    parser.add_argument("--rank", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--set", action="append", default=[], help="a SearchParams field: bet_gap=0.1")
    args = parser.parse_args(argv)
    if args.runs < 1 or not all(r >= 1 for r in args.rank) or not all(0 < p <= 1 for p in args.precision):
        parser.error("--runs and --rank must be at least 1 and --precision in (0, 1]")
    search = search_overrides(parser, args.set)
    rows = [
        cell(SearchParams(certify=certify, **search), p, rank, args.runs)
        for p in args.precision
        for certify in ("default", "strict")
        for rank in args.rank
    ]
    print(markdown(rows))
    body = {"runs": args.runs, "set": search, "rows": rows}
    print(f"\nwrote {write_json('bet' + run_suffix(args), body)}")


if __name__ == "__main__":
    main()
