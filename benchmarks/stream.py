"""Anchors vs MAnchors on the same stream, same classifier, same seed, one run.

    python -m benchmarks.stream --n 200

RT-Polarity held-out sentences in a seeded order (seed 42), explained by
the TF-IDF + random forest (the paper's "text RF"). Metrics as the paper
defines them: speedup = Σ time Anchors / Σ time MAnchors; sampling
reduction = 1 − Σ samples MAnchors / Σ samples Anchors; fidelity:
precision re-estimated on 1,000 fresh samples per anchor, coverage, length.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from llm_anchors import AnchorsExplainer, FunctionClassifier, MAnchorsExplainer, SentenceEmbedder
from llm_anchors.datasets import shuffled

from ._common import ROW_METRICS, explain_rows, summarize, write_json
from ._models import train_text_rf

PAPER = {"text RF": {"speedup": 1.69, "sampling_reduction": 0.32}}


async def run(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    model, texts, _ = train_text_rf(data=args.data)
    order = [int(i) for i in shuffled(len(texts), args.shuffle_seed)[: args.n]]
    stream = [texts[i] for i in order]
    out = {}
    for name, cls in (("anchors", AnchorsExplainer), ("manchors", MAnchorsExplainer)):
        # A classifier of its own for each, so neither profits from the other's query cache.
        clf = FunctionClassifier(model.predict, name=f"tfidf-rf-{name}")
        kwargs: dict[str, Any] = {}
        if name == "manchors":
            embedder = SentenceEmbedder(pooling=args.pooling)
            kwargs = {"tau_sim": args.tau_sim, "tau_mid": args.tau_mid, "embedder": embedder}
        explainer = cls(clf, seed=args.seed, **kwargs)
        if isinstance(explainer, MAnchorsExplainer):
            explainer.embedder.embed(["warm up"])  # model load is a one-off, not a per-input cost
        print(f"--- {name}", flush=True)
        out[name] = await explain_rows(explainer, stream, order, args.fresh_samples)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffle-seed", type=int, default=42)
    parser.add_argument("--tau-sim", type=float, default=0.6)
    parser.add_argument("--tau-mid", type=float, default=0.8)
    parser.add_argument("--fresh-samples", type=int, default=1000)
    parser.add_argument("--pooling", choices=["sentence", "words"], default="words", help="memory embedding")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = asyncio.run(run(args))
    a, m = rows["anchors"], rows["manchors"]
    speedup = sum(r["time_s"] for r in a) / sum(r["time_s"] for r in m)
    reduction = 1 - sum(r["samples"] for r in m) / sum(r["samples"] for r in a)
    summaries = {name: summarize(r, ROW_METRICS) for name, r in rows.items()}
    print(f"\n### Anchors vs MAnchors, TF-IDF + RF on RT-Polarity, N={len(a)}\n")
    print("| metric | Anchors | MAnchors |\n| --- | ---: | ---: |")
    for key in ROW_METRICS:
        sa, sm = summaries["anchors"][key], summaries["manchors"][key]
        print(f"| {key} | {sa['mean']:.4g} ± {sa['ci95']:.2g} | {sm['mean']:.4g} ± {sm['ci95']:.2g} |")
    print(f"\nspeedup {speedup:.2f}× (paper, text RF: 1.69×); sampling reduction {reduction:.0%} (paper: 32%)")
    print(f"memory hits: {sum(bool(r.get('memory_hit')) for r in m)} of {len(m)}")
    path = write_json(
        f"stream_text_rf_{args.pooling}",
        {
            "params": vars(args),
            "total_time_s": time.perf_counter() - started,
            "speedup": speedup,
            "sampling_reduction": reduction,
            "paper": PAPER,
            "summary": summaries,
            "rows": rows,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
