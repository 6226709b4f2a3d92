"""Anchors vs MAnchors on UCI Adult: the paper's tabular table.

    python -m benchmarks.tabular --n 400               # random forest, gradient-boosted trees, 3-layer MLP
    python -m benchmarks.tabular --models rf --n 1600  # the paper's N, one model

Each model is trained on Adult's train split and explains the first N rows
of its test split in a seeded order (seed 42): plain Anchors, then MAnchors
(memory starting empty), same seed, one run. Metrics as the paper:
speedup = Σ time Anchors / Σ time MAnchors, sampling reduction = 1 − Σ
samples MAnchors / Σ samples Anchors; fidelity: precision on 1,000 fresh
samples per anchor, coverage on 10,000 training rows, anchor length.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from llm_anchors import MAnchorsExplainer, TabularClassifier, TabularExplainer, TabularSampler
from llm_anchors.datasets import load_adult, shuffled

from ._common import (
    FIDELITY,
    add_comparison_args,
    compare,
    explain_rows,
    plots,
    run_suffix,
    search_settings,
    tau_sim,
    with_memory,
    write_json,
)
from ._models import train_adult

PAPER = {
    "rf": {"speedup": 2.11, "sampling_reduction": 0.54},
    "mlp": {"speedup": 1.87, "sampling_reduction": 0.51},
    "gbt": {"speedup": 1.76, "sampling_reduction": 0.46},
}
MODELS = {"rf": "random forest (50 trees)", "gbt": "gradient-boosted trees (scikit-learn)",
          "mlp": "MLP, 3 layers (50, 50)"}  # fmt: skip


async def run_model(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    adult = load_adult(args.data)
    model, accuracy = train_adult(kind, args.seed, args.data)
    sampler = TabularSampler(adult.train, adult.feature_names, adult.categorical_names)
    order = [int(i) for i in shuffled(len(adult.test), args.shuffle_seed)[: args.n]]
    rows = [adult.test[i] for i in order]
    settings = search_settings(args)
    async with TabularExplainer(model.predict, sampler, seed=args.seed, name=f"{kind}-anchors", **settings) as plain:
        a = await explain_rows(plain, rows, order, args.fresh_samples, label=f"{kind} Anchors")
    classifier = TabularClassifier(model.predict, sampler, name=f"{kind}-manchors")
    options = with_memory(
        dict(strategy=args.strategy, tau_sim=tau_sim(args, args.strategy), tau_mid=args.tau_mid, **settings)
    )
    async with MAnchorsExplainer(classifier, sampler=sampler, seed=args.seed, **options) as memory:
        m = await explain_rows(memory, rows, order, args.fresh_samples, label=f"{kind} MAnchors")
    return {"accuracy": accuracy, "anchors": a, "manchors": m}


def markdown(results: dict[str, dict[str, Any]], args: argparse.Namespace, n: int) -> str:
    lines = [
        f"### Anchors vs MAnchors ({args.strategy}) on UCI Adult, N={n} test rows "
        f"(τ_sim {tau_sim(args, args.strategy)}, "
        f"τ_mid {args.tau_mid}{'; reference Anchors settings' if args.reference else ''})",
        "",
        "| model | test accuracy | speedup (paper) | sampling reduction (paper) | memory hits "
        "| fresh precision A → M | coverage A → M | length A → M | empty A → M "
        "| coverage, both non-empty A → M | length, both non-empty A → M | success A → M |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, r in results.items():
        c, paper = r["compare"], PAPER[kind]
        a, m = c["anchors"], c["manchors"]
        keys = (*FIDELITY, "empty", "coverage_both_non_empty", "length_both_non_empty")
        fidelity = " | ".join(f"{a[k]['mean']:.3f} → {m[k]['mean']:.3f}" for k in keys)
        rates = [sum(x["success"] for x in rows) / len(rows) for rows in (r["anchors"], r["manchors"])]
        success = " → ".join(f"{rate:.0%}" for rate in rates)
        lines.append(
            f"| {MODELS[kind]} | {r['accuracy']:.3f} | {c['speedup']:.2f}× ({paper['speedup']}×) "
            f"| {c['sampling_reduction']:.0%} ({paper['sampling_reduction']:.0%}) | {c['memory_hits']} / {n} "
            f"| {fidelity} | {success} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="rf,gbt,mlp", help="comma-separated: rf, gbt, mlp")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--strategy", default="guided", choices=["guided", "paper"], help="MAnchors' strategy")
    add_comparison_args(parser)
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    kinds = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = set(kinds) - set(PAPER)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; choose from {sorted(PAPER)}")
    results = {}
    for kind in kinds:
        runs = asyncio.run(run_model(kind, args))
        runs["compare"] = compare(runs["anchors"], runs["manchors"], "gpt-4o-mini")
        stem = f"tabular_adult_{kind}_n{args.n}{run_suffix(args)}"
        runs["plots"] = [str(p) for p in plots(runs["anchors"], runs["manchors"], stem)]
        results[kind] = runs
    print()
    print(markdown(results, args, args.n))
    path = write_json(
        f"tabular_adult_n{args.n}"
        + ("_paper" if args.strategy == "paper" else "")
        + ("_reference" if args.reference else ""),
        {"params": vars(args), "total_time_s": time.perf_counter() - started, "paper": PAPER, "results": results},
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
