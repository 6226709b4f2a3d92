"""What the perturbation changes: anchors found under each operator, measured under every other.

    python -m benchmarks.perturbations --n 100                    # TF-IDF + RF on RT-Polarity
    python -m benchmarks.perturbations --classifier llm --n 60    # the embedded local LLM

For each operator A (``unk``, ``delete``, ``similar``, ``infill``: with the LLM its own backend fills the
blanks; beside the forest, the embedded local LLM does, a `Filler` on its server) the default
``MAnchorsExplainer`` explains the same N inputs (RT-Polarity's seeded order, sentences of at most
``--max-words`` words) under A: paid queries (the model's and the filler's apart), anchor length, coverage, the empty
share. Then each anchor's precision is measured on ``--fresh-samples`` fresh perturbations under every
operator B (`estimate_precision(perturbation=B)`): the cross-operator matrix, the mean precision and the share
at ≥ τ of the anchors found under A (rows) measured under B (columns). Inputs are chosen in the seeded order,
never by their results.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import numpy as np

from llm_anchors import FunctionClassifier, MAnchorsExplainer, TextSampler
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.samplers import Filler
from llm_anchors.samplers.text import PERTURBATIONS

from ._common import TAU, ci, short_order, write_json
from ._models import train_text_rf


async def run(args: argparse.Namespace, clf: Any, texts: list[str]) -> dict[str, Any]:
    """Explanations under each operator, and every anchor's precision under every operator."""
    out: dict[str, Any] = {}
    for found_under in args.operators:
        rows = []
        sampler = TextSampler(perturbation=found_under, filler=args.filler)
        async with MAnchorsExplainer(clf, seed=args.seed, sampler=sampler) as explainer:
            for text in texts:
                exp = await explainer.explain(text)
                d = exp.data
                coarse = d.coarse.positions if d.coarse is not None else None
                measured = {
                    b: await explainer.estimate_precision(text, d.positions, coarse=coarse, perturbation=b,
                                                          n=args.fresh_samples)
                    for b in args.operators
                }  # fmt: skip
                row = {"text": text, "anchor": list(d.anchor), "length": len(d.anchor), "coverage": d.coverage}
                infill = exp.meta.infill.settled.queries if exp.meta.infill is not None else 0
                rows.append({**row, "queries": exp.meta.queries, "infill_queries": infill, "success": d.success,
                             "precision_under": measured})  # fmt: skip
        out[found_under] = rows
        print(f"{found_under}: {len(rows)} explained", flush=True)
    return out


def summary(rows: list[dict[str, Any]], operators: list[str]) -> dict[str, Any]:
    non_empty = [r for r in rows if r["length"]]
    return {
        "queries": ci([r["queries"] for r in rows]),
        "infill_queries": ci([r["infill_queries"] for r in rows]),
        "empty": 1 - len(non_empty) / len(rows),
        "length_non_empty": ci([r["length"] for r in non_empty]),
        "coverage_non_empty": ci([r["coverage"] for r in non_empty]),
        "precision_under": {b: ci([r["precision_under"][b] for r in rows]) for b in operators},
        "at_tau_under": {b: float(np.mean([r["precision_under"][b] >= TAU for r in rows])) for b in operators},
    }


def markdown(summaries: dict[str, dict[str, Any]], operators: list[str], title: str) -> str:
    lines = [
        f"### {title}",
        "",
        "| found under | paid queries / input: model + in-fill | empty | length, non-empty | coverage, non-empty | "
        + " | ".join(f"precision under {b} (≥ τ)" for b in operators)
        + " |",
        "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in operators) + " |",
    ]
    for a, s in summaries.items():
        cells = " | ".join(f"{s['precision_under'][b]['mean']:.3f} ({s['at_tau_under'][b]:.0%})" for b in operators)
        lines.append(
            f"| {a} | {s['queries']['mean']:,.1f} + {s['infill_queries']['mean']:,.1f} "
            f"| {s['empty']:.0%} | {s['length_non_empty']['mean']:.2f} "
            f"| {s['coverage_non_empty']['mean']:.3f} | {cells} |"
        )
    return "\n".join(lines)


def classifier(args: argparse.Namespace) -> tuple[Any, list[str], Any]:
    """The model explained, the texts, and what to close (the embedded server, which also fills
    ``infill``'s blanks beside the forest: ``args.filler``)."""
    from llm_anchors.backends.llamacpp import LlamaServer, embedded_classifier

    args.filler, server = None, None
    if args.classifier == "llm" or "infill" in args.operators:
        server = LlamaServer()
        server.__enter__()
    if args.classifier == "rf":
        model, texts, _ = train_text_rf(args.seed, data=args.data)
        if server is not None:
            args.filler = Filler(embedded_classifier(server.base_url).backend)
        return FunctionClassifier(lambda t: [int(x) for x in model.predict(t)], name="text-rf"), texts, server
    assert server is not None
    texts, _ = load_rt_polarity(args.data)
    return embedded_classifier(server.base_url), texts, server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classifier", choices=["rf", "llm"], default="rf")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--max-words", type=int, default=12, help="longest sentence explained (the LLM stream's 12)")
    parser.add_argument("--operators", default=",".join(PERTURBATIONS), help="comma-separated (default: all four)")
    parser.add_argument("--fresh-samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffle-seed", type=int, default=42)
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    args.operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    started = time.perf_counter()
    clf, texts, server = classifier(args)
    try:
        chosen = [texts[i] for i in short_order(texts, args.shuffle_seed, args.max_words)[: args.n]]
        rows = asyncio.run(run(args, clf, chosen))
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    summaries = {a: summary(r, args.operators) for a, r in rows.items()}
    title = (f"Anchors found under each operator, measured under each ({args.classifier}, RT-Polarity, N={args.n}, "
             f"{args.fresh_samples} fresh samples a cell)")  # fmt: skip
    print(markdown(summaries, args.operators, title))
    params = {k: v for k, v in vars(args).items() if k != "filler"}
    payload = {"params": params, "time_s": time.perf_counter() - started, "summaries": summaries, "rows": rows}
    print(f"\nwrote {write_json(f'perturbations_{args.classifier}_n{args.n}', payload)}")


if __name__ == "__main__":
    main()
