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

from ._common import ROW_METRICS, anchor_shape, explain_rows, summarize, table, write_json
from ._models import train_text_rf


async def run(n: int, seed: int, shuffle_seed: int, data: str | None) -> list[dict[str, Any]]:
    model, texts, _ = train_text_rf(data=data)
    explainer = AnchorsExplainer(FunctionClassifier(model.predict, name="tfidf-rf-rt-polarity"), seed=seed)
    order = [int(i) for i in shuffled(len(texts), shuffle_seed)[:n]]
    return await explain_rows(explainer, [texts[i] for i in order], order)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="sentences to explain (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="explainer seed")
    parser.add_argument("--shuffle-seed", type=int, default=42, help="seed of the sentence order")
    parser.add_argument("--data", default=None, help="folder holding rt-polarity/ (default ../shared/data)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = asyncio.run(run(args.n, args.seed, args.shuffle_seed, args.data))
    summary = summarize(rows, ROW_METRICS) | anchor_shape(rows)
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
