"""What explanations cost on hosted models, with and without the query cache.

    python -m benchmarks.cost --n 50

The labels come from the TF-IDF + random forest trained on RT-Polarity (a
stand-in that answers at once, so the search follows a real classifier);
each query is priced as the hosted model would price it: the embedded
few-shot prompt with the sentence in it, counted with the model's own
tokenizer (tiktoken, offline), one completion token, at the built-in price
of each model. The money goes through the same code as a live run (quote,
reserve, settle), only the answers are local.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from decimal import Decimal
from typing import Any

from adapters.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
from adapters.token_counters import TiktokenCounter
from llm_anchors import AnchorsExplainer, Budget, LLMClassifier, QueryCache
from llm_anchors.datasets import shuffled
from llm_anchors.extend import MockBackend
from llm_anchors.money import price_for

from ._models import train_text_rf

MODELS = ("gpt-4o-mini", "gpt-4.1-mini", "gpt-4o")


def review_of(prompt: str) -> str:
    return prompt.rsplit("Review: ", 1)[1].rsplit("\nSentiment:", 1)[0]


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    model, texts, _ = train_text_rf(data=args.data)
    order = [int(i) for i in shuffled(len(texts), 42)[: args.n]]

    def answer_batch(prompts: list[str]) -> list[str]:
        return [DEFAULT_LABELS[int(y)] for y in model.predict([review_of(p) for p in prompts])]

    rows = []
    for name in args.models:
        for cached in (True, False):
            backend = MockBackend(answer_batch=answer_batch, report_usage=False, name="rf-as-" + name)
            clf = LLMClassifier(
                backend, DEFAULT_PROMPT, DEFAULT_LABELS, price=price_for(name), token_counter=TiktokenCounter(name)
            )
            budget = Budget()
            explainer = AnchorsExplainer(clf, seed=args.seed, budget=budget, cache=QueryCache(enabled=cached))
            started = time.perf_counter()
            samples = 0
            for i in order:
                samples += (await explainer.explain(texts[i])).meta.samples
            spent = budget.settled
            rows.append(
                {
                    "model": name,
                    "cache": cached,
                    "explanations": len(order),
                    "samples": samples,
                    "queries": spent.queries,
                    "prompt_tokens": spent.prompt_tokens,
                    "completion_tokens": spent.completion_tokens,
                    "usd": str(spent.usd),
                    "usd_per_explanation": str((spent.usd / len(order)).quantize(Decimal("0.000001"))),
                    "input_usd_per_1m": str(price_for(name).input),
                    "output_usd_per_1m": str(price_for(name).output),
                    "price_as_of": price_for(name).as_of,
                    "time_s": time.perf_counter() - started,
                }
            )
            r = rows[-1]
            print(f"{name:14s} cache={'on ' if cached else 'off'} {r['queries']:8,} queries  ${r['usd']}", flush=True)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | cache | samples | queries | prompt tokens | USD total | USD / explanation |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {'on' if r['cache'] else 'off'} | {r['samples']:,} | {r['queries']:,} | "
            f"{r['prompt_tokens']:,} | {Decimal(r['usd']):.4f} | {Decimal(r['usd_per_explanation']):.6f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ._common import write_json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="sentences to explain (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--models", nargs="+", default=list(MODELS), help="a model genai-prices knows (its price for the table)"
    )
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print()
    print(markdown(rows))
    print(f"\nwrote {write_json('cost', {'params': vars(args), 'rows': rows})}")


if __name__ == "__main__":
    main()
