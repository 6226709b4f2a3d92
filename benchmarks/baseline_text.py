"""Plain Anchors on RT-Polarity with TF-IDF + random forest (the paper's text RF).

    python -m benchmarks.baseline_text --n 100

Explains N held-out sentences (seeded shuffle, seed 42) and reports, per
explanation: wall time, samples consumed, queries sent, cache hits, the
anchor's precision re-estimated on 1,000 fresh samples, coverage and length.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier
from llm_anchors.datasets import shuffled

from ._common import summarize, table, write_json
from ._models import train_text_rf

METRICS = ("time_s", "samples", "queries", "cache_hits", "fresh_precision", "coverage", "length")


async def run(n: int, seed: int, shuffle_seed: int, data: str | None) -> list[dict[str, Any]]:
    model, texts, _ = train_text_rf(data=data)
    clf = FunctionClassifier(model.predict, name="tfidf-rf-rt-polarity")
    explainer = AnchorsExplainer(clf, seed=seed)
    order = shuffled(len(texts), shuffle_seed)[:n]
    rows = []
    for i, index in enumerate(order):
        text = texts[index]
        started = time.perf_counter()
        exp = await explainer.explain(text)
        elapsed = time.perf_counter() - started
        fresh = await explainer.estimate_precision(text, exp.data.positions, n=1000)
        rows.append(
            {
                "index": int(index),
                "text": text,
                "anchor": list(exp.data.anchor),
                "success": exp.data.success,
                "time_s": elapsed,
                "samples": exp.meta.samples,
                "queries": exp.meta.queries,
                "cache_hits": exp.meta.cache_hits,
                "precision": exp.data.precision,
                "fresh_precision": fresh,
                "coverage": exp.data.coverage,
                "length": len(exp.data.anchor),
            }
        )
        print(f"[{i + 1}/{n}] {elapsed:6.2f}s {exp.meta.samples:6d} samples  {exp}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="sentences to explain (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="explainer seed")
    parser.add_argument("--shuffle-seed", type=int, default=42, help="seed of the sentence order")
    parser.add_argument("--data", default=None, help="folder holding rt-polarity/ (default ../shared/data)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = asyncio.run(run(args.n, args.seed, args.shuffle_seed, args.data))
    summary = summarize(rows, METRICS)
    summary["success_rate"] = {"mean": sum(r["success"] for r in rows) / len(rows), "ci95": float("nan")}
    print()
    print(table(summary, f"Anchors, TF-IDF + RF on RT-Polarity, N={len(rows)}"))
    path = write_json(
        "baseline_text",
        {
            "params": vars(args),
            "total_time_s": time.perf_counter() - started,
            "summary": summary,
            "rows": rows,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
