"""The classifier as deployed: the same sentences explained through today's template and through a chat
request holding it (issue 69), on the embedded local LLM.

    python -m benchmarks.request --n 40 --max-queries 400      # starts the embedded llama-server (~17 min)

Arm ``template``: the README's classifier, the few-shot template on the completions endpoint, the label the
first word of the answer. Arm ``request``: a chat request whose system message is that template's
instructions and examples, the review in the user message, and a ``response_format`` JSON schema whose one
enum field is the label (read from the JSON, its probability at the token where the value begins). Both
arms explain the same RT-Polarity sentences with MAnchors (its memory on, fresh for each arm) under the same
per-explanation ``--max-queries``; per arm: explanations the cap stopped, paid queries, prompt and output
tokens per explanation, unparsed answers, precision, coverage and length (over the non-empty anchors, with
the share of empty ones); across arms: how often the two give the same label.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from llm_anchors import Budget, LLMClassifier, MAnchorsExplainer
from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.models import ChatRequest

from ._common import anchor_shape, ci, short_order, summarize, table, write_json
from .baseline_llm import server_url

MODEL = "gemma-3-270m-q4_k_m"
METRICS = ("queries", "samples", "prompt_tokens", "completion_tokens", "unparsed", "precision", "coverage", "length")


def chat_request(template: str = DEFAULT_PROMPT) -> dict[str, Any]:
    """The template as a deployed chat request: its instructions and examples the system message, the review
    the user message, the label a JSON schema's one enum field."""
    system, _, _ = template.partition("Review: {text}")
    schema = {"type": "object", "properties": {"sentiment": {"type": "string", "enum": list(DEFAULT_LABELS)}},
              "required": ["sentiment"], "additionalProperties": False}  # fmt: skip
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": system.strip()}, {"role": "user", "content": "Review: {text}"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "sentiment", "schema": schema}},
        "temperature": 0,
    }


def classifier(arm: str, base_url: str) -> LLMClassifier:
    if arm == "template":
        backend = OpenAICompatibleBackend(base_url, MODEL, max_request_size=8)
        return LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)
    backend = OpenAICompatibleBackend(base_url, MODEL, endpoint="chat", max_request_size=8)
    return LLMClassifier(backend, ChatRequest(chat_request()))


async def explain_arm(arm: str, base_url: str, texts: Sequence[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per text: what its explanation through ``arm`` found and paid, under its own query cap."""
    rows = []
    async with MAnchorsExplainer(classifier(arm, base_url), seed=args.seed) as explainer:
        for i, text in enumerate(texts):
            started = time.perf_counter()
            exp = await explainer.explain(text, budget=Budget(max_queries=args.max_queries))
            settled = exp.meta.cost.settled
            rows.append({
                "text": text, "label": exp.data.label, "anchor": list(exp.data.anchor), "success": exp.data.success,
                "stopped_by_cap": exp.meta.budget_exhausted, "queries": exp.meta.queries, "samples": exp.meta.samples,
                "prompt_tokens": settled.prompt_tokens, "completion_tokens": settled.completion_tokens,
                "unparsed": exp.meta.unparsed, "precision": exp.data.precision or 0.0, "coverage": exp.data.coverage,
                "length": len(exp.data.anchor), "memory_hit": exp.meta.memory_hit,
                "time_s": time.perf_counter() - started,
            })  # fmt: skip
            print(f"[{arm} {i + 1}/{len(texts)}] {rows[-1]['time_s']:6.1f}s {exp}", flush=True)
    return rows


async def run(args: argparse.Namespace, base_url: str) -> dict[str, list[dict[str, Any]]]:
    texts, _ = load_rt_polarity(args.data)
    order = short_order(texts, args.shuffle_seed, args.max_words)[: args.n]
    chosen = [texts[i] for i in order]
    return {arm: await explain_arm(arm, base_url, chosen, args) for arm in ("template", "request")}


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    return (
        summarize(rows, METRICS)
        | anchor_shape(rows)
        | {"stopped_by_cap": ci([float(r["stopped_by_cap"]) for r in rows])}
        | {"time_s": ci([r["time_s"] for r in rows])}
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=40, help="sentences (default 40)")
    parser.add_argument("--max-queries", type=int, default=400, help="the cap of each explanation, both arms")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffle-seed", type=int, default=7, help="the order the sentences are taken in")
    parser.add_argument("--max-words", type=int, default=12, help="only sentences of at most this many words")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server (default: embedded)")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    with server_url(args.base_url) as url:
        runs = asyncio.run(run(args, url))
    same = [a["label"] == b["label"] for a, b in zip(runs["template"], runs["request"], strict=True)]
    summaries = {arm: summary(rows) for arm, rows in runs.items()}
    for arm, said in summaries.items():
        print(table(said, f"{arm}: MAnchors on RT-Polarity, N={len(runs[arm])}, --max-queries {args.max_queries}"))
        print()
    agreement = ci([float(s) for s in same])
    print(f"same label in both arms: {sum(same)}/{len(same)} ({agreement['mean']:.0%} ± {agreement['ci95']:.0%})")
    path = write_json("request", {"params": vars(args), "summary": summaries, "same_label": agreement, **runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
