"""aiohttp vs the async openai client against llama-server, batched traffic.

    python -m benchmarks.clients --prompts 400

Both transports of `OpenAICompatibleBackend` send the same prompts (RT-Polarity
sentences in the embedded few-shot prompt), the same number per request, at
the same concurrency, in alternating rounds; prints prompts/s for each.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from adapters.llamacpp import DEFAULT_PROMPT
from adapters.openai_compat import OpenAICompatibleBackend
from llm_anchors.datasets import load_rt_polarity, shuffled
from llm_anchors.extend import CompletionParams

from ._common import mean_ci, write_json
from .baseline_llm import server_url


async def rate(backend: OpenAICompatibleBackend, prompts: list[str], per_request: int, concurrency: int) -> float:
    semaphore = asyncio.Semaphore(concurrency)
    chunks = [prompts[i : i + per_request] for i in range(0, len(prompts), per_request)]

    async def send(chunk: list[str]) -> None:
        async with semaphore:
            await backend.complete(chunk, CompletionParams())

    started = time.perf_counter()
    await asyncio.gather(*(send(c) for c in chunks))
    return len(prompts) / (time.perf_counter() - started)


async def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    texts, _ = load_rt_polarity(args.data)
    order = shuffled(len(texts), 42)
    results: dict[str, list[float]] = {"aiohttp": [], "openai": []}
    for r in range(args.rounds):
        # Fresh sentences each round, so no transport profits from the server's prompt cache.
        start = r * args.prompts * 2
        for k, client in enumerate(("aiohttp", "openai") if r % 2 == 0 else ("openai", "aiohttp")):
            part = order[start + k * args.prompts : start + (k + 1) * args.prompts]
            prompts = [DEFAULT_PROMPT.replace("{text}", texts[i]) for i in part]
            backend = OpenAICompatibleBackend(url, "gemma", client=client, max_request_size=args.per_request)  # type: ignore[arg-type]
            results[client].append(await rate(backend, prompts, args.per_request, args.concurrency))
            await backend.aclose()
            print(f"round {r + 1}: {client:8s} {results[client][-1]:6.1f} prompts/s", flush=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=200, help="prompts per transport per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-request", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    with server_url(args.base_url) as url:
        results = asyncio.run(run(args, url))
    print("\n| client | prompts/s (mean ± 95% CI) |\n| --- | ---: |")
    summary = {}
    for client, values in results.items():
        mean, half = mean_ci(values)
        summary[client] = {"mean": mean, "ci95": half, "rounds": values}
        print(f"| {client} | {mean:.1f} ± {half:.1f} |")
    print(f"wrote {write_json(f'clients_per_request_{args.per_request}', {'params': vars(args), 'summary': summary})}")


if __name__ == "__main__":
    main()
