"""Does `llm-anchors estimate`'s range hold what the run then spends? Pilots of 10 seeds on a 40-input file.

    python -m benchmarks.forecast --n 40 --seeds 10 --skip 40

For each pilot seed: a fresh label cache; the pilot (`llm_anchors.run.estimate`, what
`llm-anchors estimate` runs) with the run's explainer; then the run itself
(`explain_resumable`, a fresh explainer on the same cache, so the pilot's labels are
not paid twice) and whether its queries fell in the forecast's range. The inputs
are N sentences of the seeded RT-Polarity order after the first ``--skip`` (the
forecast's model was chosen on the first 40; the table reports the next 40), the
model the TF-IDF + random forest; plain Anchors and MAnchors (guided), the run's
default.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer, QueryCache
from llm_anchors.datasets import shuffled
from llm_anchors.run import ResultsFile, estimate, explain_resumable

from ._common import write_json
from ._models import train_text_rf


async def one(kind: type[AnchorsExplainer], clf: FunctionClassifier, texts: list[str], seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        cache = QueryCache(Path(folder) / "labels.sqlite")
        async with kind(clf, seed=0, cache=cache) as pilot:
            forecast = await estimate(pilot, texts, seed=seed)
        with ResultsFile(Path(folder) / "out.jsonl") as results:
            async with kind(clf, seed=0, cache=cache) as explainer:
                report = await explain_resumable(explainer, texts, results)
            spent = sum(exp.meta.queries for _, exp in results.explanations())
        cache.close()
    low, high = forecast.queries_low, forecast.queries_high
    held = low is not None and high is not None and low <= spent <= high
    return {"seed": seed, "forecast": forecast.to_dict(), "run_queries": spent, "held": held, "done": report.done}


async def run(n: int, skip: int, seeds: int, data: str | None) -> dict[str, list[dict[str, Any]]]:
    model, texts, _ = train_text_rf(data=data)
    chosen = [texts[int(i)] for i in shuffled(len(texts), 42)[skip : skip + n]]
    clf = FunctionClassifier(model.predict, name="tfidf-rf-rt-polarity")
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in (AnchorsExplainer, MAnchorsExplainer):
        out[kind.__name__] = [await one(kind, clf, chosen, seed) for seed in range(seeds)]
    return out


def markdown(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| explainer | range held | pilot inputs | pilot queries (mean) | pilot's share of all (mean, max) "
             "| run queries (mean) | forecast (median, and median range) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, rows in results.items():
        forecasts = [r["forecast"] for r in rows]

        def mean(values: list[Any]) -> float:
            return float(sum(values)) / len(values)

        expected, low, high = (median([f[key] for f in forecasts]) for key in ("queries_expected", "queries_low",
                                                                               "queries_high"))  # fmt: skip
        shares = [
            f["pilot_queries"] / max(1, f["pilot_queries"] + r["run_queries"])
            for f, r in zip(forecasts, rows, strict=True)
        ]
        pilots = sorted({f["pilot"] for f in forecasts})
        lines.append(
            f"| {name} | {sum(r['held'] for r in rows)}/{len(rows)} | {pilots[0]}–{pilots[-1]} | "
            f"{mean([f['pilot_queries'] for f in forecasts]):,.0f} | {mean(shares):.0%}, {max(shares):.0%} | "
            f"{mean([r['run_queries'] for r in rows]):,.0f} | {expected:,.0f} ({low:,.0f}–{high:,.0f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=40, help="inputs in the file (default 40)")
    parser.add_argument("--seeds", type=int, default=10, help="pilot seeds (default 10)")
    parser.add_argument("--skip", type=int, default=40, help="inputs of the order skipped first (default 40)")
    parser.add_argument("--data", default=None, help="folder holding rt-polarity/ (default ../shared/data)")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.n, args.skip, args.seeds, args.data))
    print(markdown(results))
    payload = {"n": args.n, "skip": args.skip, "seeds": args.seeds, "results": results}
    print(f"wrote {write_json(f'forecast_n{args.n}_skip{args.skip}', payload)}")


if __name__ == "__main__":
    main()
