"""Scale-out on Ray: throughput by workers, and where the server, not the explainer, limits.

    python -m benchmarks.scale --part rf                 # CPU-bound: the text RF in each worker
    python -m benchmarks.scale --part llm --base-url URL # against one llama-server
    python -m benchmarks.scale --part sim                # a fake server of fixed latency and capacity
    python -m benchmarks.scale --part memory             # MAnchors' hits and samples by workers
    python -m benchmarks.scale --part plot               # the sim parts' queries/s by workers, as a PNG

Plain Anchors, RT-Polarity sentences in the seeded order (seed 42), at most
``--max-words`` words. ``rf`` and ``llm``: explanations/s and queries/s in
one process (no Ray) and on 1 and 2 Ray workers. ``sim``: a server on
127.0.0.1 that answers after ``--latency`` seconds, at most ``--capacity``
requests at a time, computing nothing: queries/s as workers grow, until the
server's capacity (capacity × request size / latency) is the limit; with the
workers' CPU seconds per query. ``memory``: MAnchors (defaults, the text RF)
in one process and on 1, 2 and 4 workers sharing one memory: memory hits and
samples against plain Anchors on the same stream, with the memory one actor or
a replica in each worker.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from llm_anchors import AnchorsExplainer, FunctionClassifier, LLMClassifier, MAnchorsExplainer, SearchParams
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.distributed import RayPool

from ._common import RESULTS, result_path, short_order, write_json
from .baseline_llm import server_url

REQUEST_SIZE = 8


def stream(n: int, max_words: int, data: str | None) -> list[str]:
    texts, _ = load_rt_polarity(data)
    return [texts[i] for i in short_order(texts, 42, max_words)[:n]]


# -- the explainers (built inside each worker) -------------------------------------------------


def rf_explainer(model: Any, kind: str = "anchors") -> AnchorsExplainer:
    clf = FunctionClassifier(lambda texts: list(model.predict(texts)), name="text-rf")
    explainer_type = MAnchorsExplainer if kind == "manchors" else AnchorsExplainer
    return explainer_type(clf, seed=0, search=SearchParams(batch_size=100))


def llm_explainer(url: str, model: str) -> AnchorsExplainer:
    from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(url, model, max_request_size=REQUEST_SIZE)
    return AnchorsExplainer(LLMClassifier(backend, DEFAULT_PROMPT, list(DEFAULT_LABELS)), seed=0, max_concurrency=8)


# -- measuring ---------------------------------------------------------------------------------


async def in_process(make: Any, texts: list[str]) -> dict[str, Any]:
    async with make() as explainer:
        cpu, started = time.process_time(), time.perf_counter()
        found = [e async for e in explainer.explain_stream(texts)]
        return _row("1 process", found, time.perf_counter() - started, time.process_time() - cpu)


async def on_ray(make: Any, texts: list[str], workers: int, **options: Any) -> dict[str, Any]:
    async with RayPool(make, workers=workers, **options) as run:
        cpu = await asyncio.to_thread(run.worker_cpu_s)
        started = time.perf_counter()
        found = [e async for e in run.explain_stream(texts)]
        elapsed = time.perf_counter() - started
        used = await asyncio.to_thread(run.worker_cpu_s) - cpu
    return _row(f"{workers} Ray worker{'s' if workers > 1 else ''}", found, elapsed, used)


def _row(name: str, found: list[Any], elapsed: float, cpu: float) -> dict[str, Any]:
    queries = sum(e.meta.queries for e in found)
    return {
        "run": name,
        "explanations": len(found),
        "seconds": elapsed,
        "explanations_per_s": len(found) / elapsed,
        "queries": queries,
        "queries_per_s": queries / elapsed,
        "samples": sum(e.meta.samples for e in found),
        "memory_hits": sum(bool(e.meta.memory_hit) for e in found),
        "explainer_cpu_ms_per_query": 1000 * cpu / max(queries, 1),
    }


# -- the fixed-latency server --------------------------------------------------------------------


class SlowServer:
    """Answers every prompt 'positive' or 'negative' (a keyword rule) after ``latency`` s,
    ``capacity`` requests at a time; computes nothing else."""

    def __init__(self, latency: float, capacity: int) -> None:
        self.latency, self.gate = latency, asyncio.Semaphore(capacity)
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> SlowServer:
        app = web.Application()
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_post("/tokenize", self._tokenize)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        async with self.gate:
            await asyncio.sleep(self.latency)
        choices = []
        for i, prompt in enumerate(prompts):
            word = " positive" if " good" in prompt.rsplit("Review:", 1)[-1] else " negative"
            top = [{"token": word, "logprob": -0.1}]
            content = [{"token": word, "logprob": -0.1, "top_logprobs": top}]
            choices.append({"index": i, "text": word, "logprobs": {"content": content}})
        return web.json_response({"choices": choices, "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"tokens": list(range(len(body["content"].split()) + 1))})


# -- the parts -------------------------------------------------------------------------------------


async def part_rf(args: argparse.Namespace) -> list[dict[str, Any]]:
    from ._models import train_text_rf

    model, _, _ = train_text_rf(data=args.data)
    texts = stream(args.n, args.max_words, args.data)
    make = functools.partial(rf_explainer, model)
    return [await in_process(make, texts), *[await on_ray(make, texts, w) for w in (1, 2)]]


async def part_llm(args: argparse.Namespace) -> list[dict[str, Any]]:
    texts = stream(args.n, args.max_words, args.data)
    make = functools.partial(llm_explainer, args.base_url, args.model)
    return [await in_process(make, texts), *[await on_ray(make, texts, w) for w in (1, 2)]]


async def part_sim(args: argparse.Namespace) -> list[dict[str, Any]]:
    texts = stream(args.n, args.max_words, args.data)
    rows = []
    async with SlowServer(args.latency, args.capacity) as server:
        make = functools.partial(llm_explainer, server.url, "sim")
        for workers in args.workers:
            row = await on_ray(make, texts, workers)
            row["server_limit_queries_per_s"] = args.capacity * REQUEST_SIZE / args.latency
            rows.append(row)
            print(_line(row), flush=True)
    return rows


async def part_memory(args: argparse.Namespace) -> list[dict[str, Any]]:
    from ._models import train_text_rf

    model, _, _ = train_text_rf(data=args.data)
    texts = stream(args.n, args.max_words, args.data)
    plain = await in_process(functools.partial(rf_explainer, model), texts)
    plain["run"] = "Anchors, 1 process"
    make = functools.partial(rf_explainer, model, "manchors")
    rows = [plain, {**await in_process(make, texts), "run": "MAnchors, 1 process"}]
    print(_line(rows[0]), _line(rows[1]), sep="\n", flush=True)
    for memory in args.memory:
        for workers in (1, 2, 4):
            row = await on_ray(make, texts, workers, memory=memory)
            rows.append({**row, "run": f"MAnchors, {workers} Ray worker{'s' if workers > 1 else ''}, {memory}"})
            print(_line(rows[-1]), flush=True)
    for row in rows:
        row["sampling_reduction"] = 1 - row["samples"] / plain["samples"]
        row["query_reduction"] = 1 - row["queries"] / plain["queries"]
    return rows


def plot_sim(paths: list[Path]) -> Path:
    """Queries/s by workers for each measured server capacity, with the server's own limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for path in paths:
        data = json.loads(path.read_text())
        rows, capacity = data["rows"], data["args"]["capacity"]
        workers = [int(r["run"].split()[0]) for r in rows]
        line = ax.plot(workers, [r["queries_per_s"] for r in rows], marker="o", label=f"server of {capacity} at once")
        limit = rows[0]["server_limit_queries_per_s"]
        if limit < 1500:
            ax.axhline(limit, linestyle=":", color=line[0].get_color(), label=f"its limit, {limit:,.0f} prompts/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.set_xlabel("Ray workers (2 cores)")
    ax.set_ylabel("queries/s")
    ax.set_title("Fake server, 50 ms per request: who limits")
    ax.legend()
    fig.tight_layout()
    out = result_path("scale_sim_workers.png")
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _line(row: dict[str, Any]) -> str:
    return (
        f"| {row['run']} | {row['explanations_per_s']:.2f} | {row['queries_per_s']:,.0f} | "
        f"{row['explainer_cpu_ms_per_query']:.2f} | {row['memory_hits']} | {row['samples']:,} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["rf", "llm", "sim", "memory", "plot"], required=True)
    parser.add_argument("--n", type=int, default=40, help="sentences explained")
    parser.add_argument("--max-words", type=int, default=12)
    parser.add_argument("--base-url", default=None, help="--part llm: the server (default: start the local LLM)")
    parser.add_argument("--model", default="gemma")
    parser.add_argument("--latency", type=float, default=0.05, help="--part sim: seconds per request")
    parser.add_argument("--capacity", type=int, default=16, help="--part sim: requests served at once")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8], help="--part sim")
    parser.add_argument("--memory", nargs="+", default=["actor", "replicas"], help="--part memory: shared how")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    if args.part == "plot":  # from the sim parts' results
        print(f"wrote {plot_sim(sorted(RESULTS.glob('scale_sim_*.json')))}")
        return
    import ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]  # workers need not import benchmarks/
    ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if args.part == "llm":
        with server_url(args.base_url) as args.base_url:
            rows = asyncio.run(part_llm(args))
    else:
        rows = asyncio.run({"rf": part_rf, "sim": part_sim, "memory": part_memory}[args.part](args))
    print("| run | explanations/s | queries/s | explainer CPU ms/query | memory hits | samples |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(_line(row))
    if args.part == "memory":
        print("\n| run | memory hits | samples | sampling reduction | queries | query reduction |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for row in rows:
            print(
                f"| {row['run']} | {row['memory_hits']}/{row['explanations']} | {row['samples']:,} | "
                f"{row['sampling_reduction']:.1%} | {row['queries']:,} | {row['query_reduction']:.1%} |"
            )
    suffix = f"_latency{args.latency}_capacity{args.capacity}" if args.part == "sim" else ""
    path = write_json(f"scale_{args.part}_n{args.n}{suffix}", {"args": vars(args), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
