"""Power: does the search find a true anchor, and how close to the floor does it certify it?

    python -m benchmarks.power [--seeds 200] [--features 20] [--precision 0.95 0.97 0.99 1.0] [--set NAME=VALUE ...]

A synthetic input of ``--features`` words (``w0 … w19``) and one true anchor, two of its words chosen by
the seed: a perturbation that keeps both keeps the label with probability ``--precision`` (0.99 unless
told; several values: a block of rows each), any other with 0.2, so
every rule without both words has precision ≤ 0.6 and the pair is the only anchor (τ = 0.95, δ = 0.1; the
query cache off: every sample is a paid query). Each explainer and mode runs the search it runs on an
input (Anchors' `BeamSearch`, MAnchors' `GuidedSearch`: growth), built by the explainer, its samples
drawn as an explanation draws them. Per explainer and mode: the share of seeds whose anchor is exactly
the pair, the mean queries, the median samples certifying the anchor (drawn after it was chosen), and
the floor: the fewest samples any sequential test at the share of δ it was tested with needs on average
at the anchor's precision p, log(1/share)/kl(p, bound) (Wald's bound; at p = 1 the fewest all-agreeing
samples, in one look), and at all of δ, the least any schedule could need. ``--set refute=0.7``: another value
of a `SearchParams` field, for both explainers. Prints a markdown table and writes JSON
(``benchmarks/results/power.json``, or ``power_refute0.7.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import Any

import numpy as np

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer, SearchParams, TextSampler
from llm_anchors.search import (
    BeamSearch,
    SampleRequest,
    Samples,
    Search,
    SearchResult,
    fewest_agreeing,
    kl_bernoulli,
    run_sync,
    share_of,
)

from ._common import markdown_table, run_suffix, search_overrides, write_json

KEPT_WITH_PAIR = 0.99
KEPT_WITHOUT = 0.2


def floor(params: SearchParams, rank: int | None = None, precision: float = 1.0) -> float:
    """The fewest fresh samples that certify, on average, a rule of ``precision`` tested ``rank``-th at its
    whole share of δ (None: at all of δ): log(1/share)/kl(precision, bound), Wald's bound on any
    sequential test's expected sample size; at precision 1 the fewest all-agreeing samples (the smallest
    n with exp(−log(1/share)/n) above the bound). Infinite at or below the bound."""
    share = params.delta if rank is None else share_of(params.delta, rank, params.empty_share)
    if precision >= 1.0:
        return fewest_agreeing(math.log(1.0 / share), params.bound)
    if precision <= params.bound:
        return math.inf
    return math.ceil(math.log(1.0 / share) / kl_bernoulli(precision, params.bound))


def one(
    e: AnchorsExplainer, seed: int, n_features: int, precision: float = KEPT_WITH_PAIR
) -> tuple[SearchResult, frozenset[int]]:
    """One search on the synthetic input of ``seed``; its result and the true pair."""
    rng = np.random.default_rng(seed)
    pair = frozenset(int(f) for f in rng.choice(n_features, 2, replace=False))
    sampler = TextSampler()
    instance = sampler.features(" ".join(f"w{i}" for i in range(n_features)))
    pool = sampler.sample_present(instance, frozenset(), e.params.coverage_samples, rng)
    search: Search
    if isinstance(e, MAnchorsExplainer):
        search = e.guided_search(n_features, pool)
    else:
        search = BeamSearch(n_features, pool, e.params)
    both = sorted(pair)

    def answer(requests: list[SampleRequest]) -> list[Samples]:
        out = []
        for r in requests:
            present = sampler.sample_present(instance, r.rule, r.n, rng)
            chance = np.where(present[:, both].all(axis=1), precision, KEPT_WITHOUT)
            out.append(Samples(present, rng.random(r.n) < chance))
        return out

    return run_sync(search.run(), answer), pair


def run(kind: str, certify: str, seeds: int, n_features: int, precision: float = 0.99, **search: Any) -> dict[str, Any]:
    clf = FunctionClassifier(lambda texts: ["pos"] * len(texts), name="power")
    params = SearchParams(certify=certify, **search)  # type: ignore[arg-type]
    e = AnchorsExplainer(clf, search=params) if kind == "anchors" else MAnchorsExplainer(clf, search=params)
    exact = queries = 0
    certifying: list[int] = []
    floors: list[float] = []
    for seed in range(seeds):
        result, pair = one(e, seed, n_features, precision)
        exact += int(result.success and result.rule == pair)
        queries += result.samples_used
        if result.certificate is not None:
            certifying.append(result.certificate.n)
            floors.append(floor(e.params, result.certificate.rank, precision))
    ratio = statistics.median(c / f for c, f in zip(certifying, floors, strict=True)) if certifying else math.nan
    return {
        "explainer": kind, "certify": certify, "precision": precision, "seeds": seeds, "features": n_features,
        "exact_pair": exact / seeds, "queries": queries / seeds,
        "certifying_median": statistics.median(certifying) if certifying else None,
        "floor_median": statistics.median(floors) if floors else None, "certifying_over_floor": ratio,
        "floor_at_delta": floor(e.params, None, precision),
    }  # fmt: skip


HEADER = (
    "| precision | explainer | certify | exact pair | queries, mean | certifying samples, median | floor at its "
    "precision and share, median | certifying / floor, median | floor at all of δ |",
    "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
)


def markdown(rows: list[dict[str, Any]]) -> str:
    return markdown_table(HEADER, (
        f"| {r['precision']} | {r['explainer']} | {r['certify']} | {r['exact_pair']:.1%} | {r['queries']:,.0f} | "
        f"{r['certifying_median']} | {r['floor_median']} | {r['certifying_over_floor']:.2f} | {r['floor_at_delta']} |"
        for r in rows
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--precision", type=float, nargs="+", default=[KEPT_WITH_PAIR], help="the anchor's precision")
    parser.add_argument("--set", action="append", default=[], help="a SearchParams field: refute=0.7")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines too")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.features < 2:
        parser.error(f"--seeds must be at least 1 and --features at least 2, got {args.seeds} and {args.features}")
    search = search_overrides(parser, args.set)
    if not all(KEPT_WITHOUT < p <= 1.0 for p in args.precision):
        parser.error(f"--precision must lie in ({KEPT_WITHOUT}, 1], got {args.precision}")
    kinds = [(kind, certify) for kind in ("manchors", "anchors") for certify in ("default", "strict")]
    rows = [
        run(kind, certify, args.seeds, args.features, p, **search) for p in args.precision for kind, certify in kinds
    ]
    print(markdown(rows))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    precisions = "" if args.precision == [KEPT_WITH_PAIR] else "_p" + "-".join(f"{p:g}" for p in args.precision)
    name = "power" + precisions + run_suffix(args)
    body = {"seeds": args.seeds, "features": args.features, "precision": args.precision, "set": search, "rows": rows}
    print(f"\nwrote {write_json(name, body)}")


if __name__ == "__main__":
    main()
