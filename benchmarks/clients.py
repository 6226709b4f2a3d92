"""The provider as users reach it: three runs against the loopback fake server, each under a dollar cap.

    python -m benchmarks.clients [--n 6] [--fail-rate 0.1]

(a) the user's ``AsyncOpenAI`` with an organisation and a custom header, chat completions with
log-probabilities, gpt-4o-mini's price; (b) an ``AsyncAzureOpenAI`` deployment priced as gpt-4o-mini;
(c) OpenAI's decision endpoint (gpt-6-luna) through the same client's ``decisions.create``. Each
estimates then runs ``n`` RT-Polarity sentences (`explain_resumable`), with a share of requests
failing (429 and 500) so the retries show: the requests the server saw against the queries and
retries the engine counted (the SDK must add none), and the bill against the cap.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from llm_anchors import LLMClassifier, MAnchorsExplainer, RetryPolicy
from llm_anchors.backends.llamacpp import DEFAULT_LABELS
from llm_anchors.backends.openai_client import Endpoint, OpenAIClientBackend
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.run import ResultsFile, estimate, explain_resumable, read_results
from tests.fault_server import FaultServer

from ._common import short_order, write_json

PROMPT = "Review: {text}\nSentiment:"
WORDS = {"good", "great", "funny", "charming", "best", "beautiful", "moving", "fun", "wonderful"}


def sentiment(prompt: str) -> str:
    return "positive" if WORDS & set(prompt.split("Review: ")[-1].split()) else "negative"


def usage(prompts: list[str]) -> dict[str, Any]:
    tokens = sum(len(p.split()) for p in prompts)
    return {"usage": {"prompt_tokens": tokens, "completion_tokens": len(prompts), "total_tokens": tokens + 1}}


def client_for(kind: str, base_url: str) -> tuple[Any, str, str | None, Endpoint]:
    import openai

    if kind == "azure":
        root = base_url.removesuffix("/v1")
        azure = openai.AsyncAzureOpenAI(azure_endpoint=root, api_version="2024-10-21", api_key="k", max_retries=5)
        return azure, "prod-sentiment", "gpt-4o-mini", "chat"
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk", organization="org-team",
                                default_headers={"X-Team": "risk"}, max_retries=5)  # fmt: skip
    return (client, "gpt-6-luna", None, "decisions") if kind == "decisions" else (client, "gpt-4o-mini", None, "chat")


async def one(kind: str, texts: list[str], cap: Decimal, fail_rate: float) -> dict[str, Any]:
    retry = RetryPolicy(max_attempts=12, initial_wait=0.01, max_wait=0.05, jitter=0.01)
    async with FaultServer(answer=sentiment, usage=usage, fail_rate=fail_rate, kinds=("429", "500")) as server:
        client, model, price_as, endpoint = client_for(kind, server.base_url)
        clf = LLMClassifier(OpenAIClientBackend(client, model, price_as=price_as, endpoint=endpoint), PROMPT,
                            list(DEFAULT_LABELS))  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.jsonl"
            with ResultsFile(out) as results, results.open_budget(max_usd=cap) as budget:
                explainer = MAnchorsExplainer(clf, seed=0, budget=budget, on_budget="return", retry=retry)
                async with explainer:
                    forecast = await estimate(explainer, texts)
                    report = await explain_resumable(explainer, texts, results)
                spent = budget.report().settled
            records = list(read_results(out).values())
        await client.close()
    retries = sum(r["explanation"]["meta"]["cost"]["retries"] for r in records if "explanation" in r)
    return {
        "kind": kind, "model": model, "priced_as": price_as or model, "endpoint": endpoint,
        "explained": report.done_now, "forecast_usd": str(forecast.usd_expected),
        "queries": spent.queries, "requests_seen": len(server.requests), "faults_injected": server.counts["429"]
        + server.counts["500"], "sdk_retries": sum(r["headers"].get("x-stainless-retry-count") != "0"
                                                  for r in server.requests),
        "engine_retries": retries, "usd": str(spent.usd), "cap_usd": str(cap),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--fail-rate", type=float, default=0.1)
    parser.add_argument("--cap", default="0.05")
    parser.add_argument("--data", default=None)
    args = parser.parse_args(argv)
    texts, _ = load_rt_polarity(args.data)
    chosen = [texts[i] for i in short_order(texts, 42, 12)[: args.n]]
    kinds = ("openai", "azure", "decisions")
    rows = [asyncio.run(one(kind, chosen, Decimal(args.cap), args.fail_rate)) for kind in kinds]
    print("| run | model (priced as) | explained | queries | requests the server saw | faults injected | "
          "retries by the engine | by the SDK | forecast | bill | cap |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        forecast = f"${Decimal(r['forecast_usd']):.6f}" if r["forecast_usd"] != "None" else "—"
        print(f"| {r['kind']} ({r['endpoint']}) | {r['model']} ({r['priced_as']}) | {r['explained']} | "
              f"{r['queries']:,} | {r['requests_seen']:,} | {r['faults_injected']} | {r['engine_retries']} | "
              f"{r['sdk_retries']} | {forecast} | ${Decimal(r['usd']):.6f} | ${r['cap_usd']} |")  # fmt: skip
    print(f"wrote {write_json('clients', {'params': vars(args), 'rows': rows})}")


if __name__ == "__main__":
    main()
