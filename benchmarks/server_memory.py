"""The embedded llama-server's memory and speed, by the size of its prompt cache.

    python -m benchmarks.server_memory --queries 2000

llama-server keeps finished prompts in a RAM cache (``--cache-ram``, 8 GiB by
default) to reuse their KV state. Anchors' perturbations all differ after the
shared few-shot prefix, so that cache fills with prompts that are never
asked again. This sends the same ``--queries`` distinct perturbations of
RT-Polarity sentences (8 prompts a request, 8 requests in flight, as the
explainer does) to a fresh server for each cache size, and reports
prompts/s with the server's resident memory, sampled every 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import numpy as np

from llm_anchors import LLMClassifier, TextSampler
from llm_anchors.datasets import load_rt_polarity, shuffled
from llm_anchors.query import QueryEngine, QueryStats

from ._common import markdown_table, write_json

SETTINGS: dict[str, int | None] = {"llama-server default (8192 MiB)": None, "256 MiB (ours)": 256, "0 (off)": 0}


def perturbations(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct masked RT-Polarity sentences (words kept with p = ½)."""
    texts, _ = load_rt_polarity()
    sampler, rng = TextSampler(), np.random.default_rng(seed)
    out: dict[str, None] = {}
    for i in shuffled(len(texts), seed):
        if len(out) >= n:
            break
        instance = sampler.features(texts[int(i)])
        for text in sampler.sample(instance, frozenset(), 4, rng)[0]:
            out.setdefault(text, None)
    return list(out)[:n]


async def measure(cache_ram: int | None, prompts: list[str]) -> dict[str, Any]:
    from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT, LlamaServer
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    with LlamaServer(cache_ram_mib=cache_ram) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gemma", max_request_size=8)
        llm = LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)
        engine = QueryEngine(llm, max_concurrency=8, request_size=8)
        samples: list[float] = [server.rss_mb()]
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                samples.append(server.rss_mb())
                await asyncio.sleep(0.5)

        watcher = asyncio.ensure_future(watch())
        started = time.perf_counter()
        await engine.classify(prompts, QueryStats(), cap=None)
        elapsed = time.perf_counter() - started
        done.set()
        await watcher
        samples.append(server.rss_mb())
        await llm.aclose()  # the backend's session and the /tokenize counter's
    return {"cache_ram_mib": cache_ram, "prompts": len(prompts), "seconds": elapsed,
            "prompts_per_s": len(prompts) / elapsed, "rss_start_mb": samples[0], "rss_end_mb": samples[-1],
            "rss_peak_mb": max(samples)}  # fmt: skip


HEADER = (
    "| llama-server prompt cache (`--cache-ram`) | prompts/s | server RSS at start (MB) | at the end | peak |",
    "| --- | ---: | ---: | ---: | ---: |",
)


def markdown(rows: dict[str, dict[str, Any]]) -> str:
    return markdown_table(HEADER, (
        f"| {name} | {r['prompts_per_s']:.1f} | {r['rss_start_mb']:.0f} | {r['rss_end_mb']:.0f} "
        f"| {r['rss_peak_mb']:.0f} |" for name, r in rows.items()
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args(argv)
    prompts = perturbations(args.queries)
    rows = {name: asyncio.run(measure(setting, prompts)) for name, setting in SETTINGS.items()}
    print(markdown(rows))
    path = write_json(f"server_memory_q{args.queries}", {"params": vars(args), "results": rows})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
