"""Plain Anchors explaining RT-Polarity sentences with the local LLM.

    python -m benchmarks.baseline_llm --n 20            # starts the embedded llama-server
    python -m benchmarks.baseline_llm --n 20 --base-url http://127.0.0.1:8000/v1 --model M

Per explanation: wall time, samples, queries sent, cache hits, tokens,
precision on fresh samples, coverage, anchor length. Then the engine's
overhead: the prompts the engine sent are sent again by a bare aiohttp
load generator, same chunking, same concurrency, and the two throughputs
are compared (in this one run, on this one server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import aiohttp

from llm_anchors import AnchorsExplainer, LLMClassifier
from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT, LlamaServer
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.datasets import load_rt_polarity

from ._common import RESULTS, ROW_METRICS, anchor_shape, explain_rows, short_order, summarize, table, write_json


async def raw_load(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    per_request: int,
    concurrency: int,
    fields: dict[str, Any] | None = None,
) -> float:
    """Prompts per second a bare client gets, sending ``prompts`` as the engine would: ``fields`` are
    the request's log-probability fields (default the top 5; vLLM's label reads: `label_request`)."""
    chunks = [list(prompts[i : i + per_request]) for i in range(0, len(prompts), per_request)]
    semaphore = asyncio.Semaphore(concurrency)
    body = {"model": model, "max_tokens": 1, "temperature": 0.0, **(fields or {"logprobs": 5})}
    async with aiohttp.ClientSession() as session:

        async def send(chunk: list[str]) -> None:
            async with semaphore, session.post(f"{base_url}/completions", json={**body, "prompt": chunk}) as r:
                r.raise_for_status()
                await r.read()

        started = time.perf_counter()
        await asyncio.gather(*(send(c) for c in chunks))
    return len(prompts) / (time.perf_counter() - started)


@contextlib.contextmanager
def server_url(base_url: str | None) -> Iterator[str]:
    if base_url:
        yield base_url
        return
    with LlamaServer() as server:
        yield server.base_url


async def run(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    texts, _ = load_rt_polarity(args.data)
    order = short_order(texts, args.shuffle_seed, args.max_words)
    order = order[: args.n]
    backend = OpenAICompatibleBackend(base_url, args.model, max_request_size=args.per_request)
    clf = LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)
    async with AnchorsExplainer(clf, seed=args.seed, max_concurrency=args.concurrency) as explainer:
        partial = RESULTS / "baseline_llm.partial.json"
        rows = await explain_rows(explainer, [texts[i] for i in order], order, args.fresh_samples, partial)
        # The engine's own throughput: queries sent during the explanations over their wall time.
        engine_rate = sum(r["queries"] for r in rows) / sum(r["time_s"] for r in rows)
        sent = list(explainer.cache.labels(clf.identity))[: args.raw_prompts]
    raw_rate = await raw_load(base_url, args.model, [clf.render(t) for t in sent], args.per_request, args.concurrency)
    return {"rows": rows, "engine_prompts_per_s": engine_rate, "raw_prompts_per_s": raw_rate}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20, help="sentences to explain (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="explainer seed")
    parser.add_argument("--shuffle-seed", type=int, default=42)
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server (default: embedded)")
    parser.add_argument("--model", default="gemma-3-270m-q4_k_m")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--per-request", type=int, default=8, help="prompts per request")
    parser.add_argument("--fresh-samples", type=int, default=1000)
    parser.add_argument("--raw-prompts", type=int, default=2000, help="prompts the bare load generator sends")
    parser.add_argument(
        "--max-words",
        type=int,
        default=10_000,
        help="only sentences of at most this many tokens (a CPU-only run of long sentences takes hours)",
    )
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with server_url(args.base_url) as url:
        result = asyncio.run(run(args, url))
    rows = result.pop("rows")
    summary = summarize(rows, (*ROW_METRICS, "prompt_tokens", "unparsed")) | anchor_shape(rows)
    ratio = result["engine_prompts_per_s"] / result["raw_prompts_per_s"]
    print()
    subset = f", sentences of <= {args.max_words} tokens" if args.max_words < 10_000 else ""
    print(table(summary, f"Anchors, local LLM ({args.model}) on RT-Polarity, N={len(rows)}{subset}"))
    print(
        f"\nthroughput: engine {result['engine_prompts_per_s']:.1f} prompts/s, bare load generator "
        f"{result['raw_prompts_per_s']:.1f} prompts/s at the same concurrency: ratio {ratio:.2f}"
    )
    path = write_json(
        "baseline_llm",
        {
            "params": vars(args),
            "total_time_s": time.perf_counter() - started,
            "summary": summary,
            **result,
            "engine_over_raw": ratio,
            "rows": rows,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
