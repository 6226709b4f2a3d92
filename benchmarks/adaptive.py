"""Requests that follow the server: a run through a server that slows tenfold, then storms with 429s.

    python -m benchmarks.adaptive --inputs 30

A loopback server of fixed capacity (the tests' fault server: ``--rate`` prompts a second, one request
at a time, so its latency grows with its queue) answers a MAnchors stream (memory off) priced as
gpt-4o-mini under a dollar cap. ``--slow-at`` seconds in, its capacity falls tenfold for ``--slow-for``
seconds; then for ``--storm-for`` seconds it answers 429 to ``--storm-rate`` of the requests; then it is
itself again. The table gives, per phase, the server's throughput (prompts answered a second), the
engine's limit of texts in flight and the calls that failed; every input must be explained, the cap must
hold, and the throughput after the storm must come back to what it was before within a minute. The JSON
holds the whole trace: the limit and the texts in flight over time, and the server's answers.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import warnings
from decimal import Decimal
from typing import Any

from llm_anchors import Budget, LLMClassifier, MAnchorsExplainer, RetryPolicy
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.extend import PromptCacheWarning
from tests.fault_server import FaultServer

from ._common import write_json

PROMPT = "Review: {text}\nSentiment:"


def _answer(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


async def _schedule(server: FaultServer, args: argparse.Namespace, phases: list[tuple[float, str]]) -> None:
    start = time.monotonic()
    await asyncio.sleep(args.slow_at)
    phases.append((time.monotonic() - start, "slow"))
    server.rate = args.rate / 10
    await asyncio.sleep(args.slow_for)
    phases.append((time.monotonic() - start, "storm"))
    server.rate, server.fail_rate, server.kinds = args.rate, args.storm_rate, ["429"]
    await asyncio.sleep(args.storm_for)
    phases.append((time.monotonic() - start, "after"))
    server.fail_rate = 0.0


async def _served(server: FaultServer, every: float, out: list[tuple[float, int]], start: float) -> None:
    while True:
        out.append((time.monotonic() - start, server.prompts_served))
        await asyncio.sleep(every)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = [f"a good and great film number {i} with a fine plot and a cast" for i in range(args.inputs // 2)]
    texts += [f"a dull film number {i} with a weak plot and a tired cast" for i in range(args.inputs - len(texts))]
    served: list[tuple[float, int]] = []
    phases: list[tuple[float, str]] = [(0.0, "before")]
    budget = Budget(max_usd=Decimal(args.max_usd))
    retry = RetryPolicy(max_attempts=30, max_elapsed=600.0)
    async with FaultServer(answer=_answer, rate=args.rate, retry_after="1") as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="completions", timeout=args.timeout)
        clf = LLMClassifier(backend, PROMPT, ["negative", "positive"])
        start = time.monotonic()
        watch = asyncio.ensure_future(_served(server, 1.0, served, start))
        schedule = asyncio.ensure_future(_schedule(server, args, phases))
        async with MAnchorsExplainer(clf, seed=0, memory=None, budget=budget, retry=retry,
                                     max_concurrency=16, on_budget="return") as explainer:  # fmt: skip
            done = [e async for e in explainer.explain_stream(texts, errors="yield", concurrent_inputs=4)]
            limiter = explainer.engine.limiter
        wall = time.monotonic() - start
        watch.cancel()
        schedule.cancel()
        failures = {k: v for k, v in server.counts.items() if k != "ok"}
    trace = [(t - limiter.trace[0][0], limit, flying) for t, limit, flying in limiter.trace] if limiter.trace else []
    explained = [e for e in done if not isinstance(e, Exception)]
    return {
        "inputs": len(texts), "explained": len(explained), "failed": [str(e) for e in done if isinstance(e, Exception)],
        "wall_s": wall, "spent_usd": str(budget.report().settled.usd), "cap_usd": args.max_usd,
        "cap_held": budget.report().settled.usd <= Decimal(args.max_usd), "server_faults": failures,
        "phases": phases, "served": served, "trace": trace[:: max(1, len(trace) // 5000)],
        "settings": vars(args),
    }  # fmt: skip


def _rate(served: list[tuple[float, int]], start: float, end: float) -> float:
    inside = [(t, n) for t, n in served if start <= t <= end]
    if len(inside) < 2:
        return float("nan")
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _limit(trace: list[tuple[float, float, int]], start: float, end: float) -> float:
    inside = [limit for t, limit, _ in trace if start <= t <= end]
    return sum(inside) / len(inside) if inside else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=60)
    parser.add_argument("--rate", type=float, default=40.0, help="prompts a second the server answers")
    parser.add_argument("--slow-at", type=float, default=15.0)
    parser.add_argument("--slow-for", type=float, default=20.0)
    parser.add_argument("--storm-for", type=float, default=15.0)
    parser.add_argument("--storm-rate", type=float, default=0.8)
    parser.add_argument("--timeout", type=float, default=10.0, help="the backend's timeout")
    parser.add_argument("--max-usd", default="0.05")
    args = parser.parse_args()
    warnings.simplefilter("ignore", PromptCacheWarning)  # a short prompt, priced as gpt-4o-mini
    result = asyncio.run(run(args))
    ends = [t for t, _ in result["phases"][1:]] + [result["wall_s"]]
    print(f"### A server slowing tenfold, then a 429 storm ({args.inputs} inputs, {args.rate:g} prompts/s)\n")
    print("| phase | from (s) | server prompts/s | texts in flight allowed (mean) |\n| --- | ---: | ---: | ---: |")
    for (start, name), end in zip(result["phases"], ends, strict=True):
        print(f"| {name} | {start:.0f} | {_rate(result['served'], start, end):.1f} | "
              f"{_limit(result['trace'], start, end):.1f} |")  # fmt: skip
    print(f"\nexplained {result['explained']}/{result['inputs']}, failed {len(result['failed'])}; faults the server "
          f"answered {result['server_faults']}; spent ${result['spent_usd']} of ${result['cap_usd']} (held: "
          f"{result['cap_held']}); {result['wall_s']:.0f} s")  # fmt: skip
    print(f"\nwrote {write_json('adaptive', result)}")


if __name__ == "__main__":
    main()
