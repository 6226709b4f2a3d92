"""What explanations cost on hosted models with a real prompt: with and without prompt caching, standard and flex.

    python -m benchmarks.cost --n 50

The prompt is an auditor's: a rubric and eighteen calibration examples
(`review_rubric.txt`, ~1,500 tokens) with the text last, so that every query
shares a static prefix a provider can cache. The labels come from the TF-IDF
+ random forest trained on RT-Polarity (a stand-in that answers at once, so
the search follows a real classifier). The server reports usage as OpenAI
does: prompt tokens by the model's tokenizer (tiktoken, offline), of which
the static prefix counts as cached (in 128-token steps from 1,024) on every
call after the first batch (an ideal cache: a real one misses sometimes, so
the cached rows are the best case). Each explanation is run once through the
live money path (quote, reserve, settle at the first model's price, checked
against the total); the total usage is then priced at each model's rates:
uncached, as billed with the cache, and at the flex tier (genai-prices; —
for a model with no flex tier). One answer token per query; a reasoning
model (the GPT-5 family, asked at its lowest effort, "minimal") also
reasons before it answers, billed as output: its rows assume R reasoning
tokens an answer for each R of ``--reasoning-tokens`` (0: minimal effort's
floor; 50: the figure the issue that asked for these rows used), an
assumption, not a measurement: no hosted API is reachable here. What the
cap reserves per call for such a model (its output bound, 256 tokens by
default, at the dearest tier) is not what it is billed.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from llm_anchors import AnchorsExplainer, Budget, LLMClassifier, MAnchorsExplainer
from llm_anchors.backends.decisions import INSTRUCTIONS
from llm_anchors.backends.llamacpp import DEFAULT_LABELS
from llm_anchors.backends.openai_wire import reasoning_effort_for
from llm_anchors.backends.token_counters import TiktokenCounter
from llm_anchors.datasets import shuffled
from llm_anchors.extend import Charge, CompletionParams, Completions, MockBackend, Price
from llm_anchors.money import price_for

from ._models import train_text_rf

MODELS = ("gpt-4o-mini", "gpt-4.1-mini", "gpt-5-nano", "gpt-5-mini", "gpt-5")
PROMPT = (Path(__file__).with_name("review_rubric.txt")).read_text()
CACHE_MINIMUM, CACHE_STEP = 1024, 128  # OpenAI's prompt cache: prefixes of 1,024 tokens and more, in 128-token steps


def review_of(prompt: str) -> str:
    return prompt.rsplit("Review: ", 1)[1].rsplit("\nSentiment:", 1)[0]


class CachingServer(MockBackend):
    """Answers with ``answer_batch`` and reports usage as OpenAI does for a prompt whose static prefix
    is cached: ``prompt_tokens`` counts every token, ``cache_read_tokens`` (OpenAI's
    ``prompt_tokens_details.cached_tokens``) the cached part of the prefix, from the second batch on."""

    def __init__(self, answer_batch: Callable[[list[str]], list[str]], counter: TiktokenCounter, prefix: str) -> None:
        super().__init__(answer_batch=answer_batch, report_usage=False, name="rf-behind-a-prompt-cache")
        self.encoding = counter.encoding
        self.per_message = counter.per_message
        self.prefix = prefix
        prefix_tokens = len(self.encoding.encode_ordinary(prefix))
        self.cacheable = prefix_tokens // CACHE_STEP * CACHE_STEP if prefix_tokens >= CACHE_MINIMUM else 0
        self.prefix_tokens = prefix_tokens
        self.warm = False

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions:
        answered = await super().complete(prompts, params)
        assert all(p.startswith(self.prefix) for p in prompts)
        rest = self.encoding.encode_ordinary_batch([p[len(self.prefix) :] for p in prompts])
        tokens = sum(self.prefix_tokens + len(r) + self.per_message for r in rest)
        cached = self.cacheable * len(prompts) if self.warm else 0
        self.warm = True
        usage = Charge(len(prompts), tokens, len(prompts) * params.max_tokens, cache_read_tokens=cached)
        return Completions(answered.items, usage, len(prompts))


async def explain(
    kind: type[AnchorsExplainer], args: argparse.Namespace, model: Any, texts: list[str]
) -> dict[str, Any]:
    """Explain the stream once with ``kind`` through the live money path; its total usage as billed."""
    order = [int(i) for i in shuffled(len(texts), 42)[: args.n]]
    counter = TiktokenCounter(args.models[0])
    server = CachingServer(
        lambda prompts: [DEFAULT_LABELS[int(y)] for y in model.predict([review_of(p) for p in prompts])],
        counter,
        PROMPT.split("{text}")[0],
    )
    price = price_for(args.models[0])
    clf = LLMClassifier(server, PROMPT, DEFAULT_LABELS, price=price, token_counter=counter)
    budget = Budget()
    started = time.perf_counter()
    async with kind(clf, seed=args.seed, budget=budget) as explainer:
        samples = 0
        for i in order:
            samples += (await explainer.explain(texts[i])).meta.samples
    spent = budget.settled
    assert spent.usd == price.cost(spent), "the live path bills what the usage prices at"
    return {
        "explainer": kind.__name__,
        "explanations": len(order),
        "samples": samples,
        "usage": spent,
        "prefix_tokens": server.prefix_tokens,
        "time_s": time.perf_counter() - started,
    }


def priced(run: dict[str, Any], name: str, reasoning: int = 0) -> dict[str, Any]:
    """``run``'s usage at ``name``'s rates, each answer ``reasoning`` tokens longer (billed as output):
    uncached, cached, flex, flex and cached (USD per explanation)."""
    usage: Charge = run["usage"]
    usage = usage + Charge(completion_tokens=reasoning * usage.queries, reasoning_tokens=reasoning * usage.queries)
    full = price_for(name)
    standard, tier = full.at(None), full.at("flex")
    assert standard is not None
    flex = tier or standard
    per = Decimal(run["explanations"])
    tiered = _rates(flex) != _rates(standard)
    q = Decimal("0.000001")
    return {
        "model": name,
        "reasoning_effort": reasoning_effort_for(name),
        "reasoning_tokens": reasoning,
        "explainer": run["explainer"],
        "standard": str((standard.uncached(usage) / per).quantize(q)),
        "cached": str((standard.cost(usage) / per).quantize(q)),
        "flex": str((flex.uncached(usage) / per).quantize(q)) if tiered else None,
        "flex_cached": str((flex.cost(usage) / per).quantize(q)) if tiered else None,
        "rates": {"standard": standard.describe(), "flex": flex.describe()},
    }


def as_decisions(run: dict[str, Any], model: str) -> dict[str, Any]:
    """``run`` as decision calls (`llm_anchors.backends.decisions`): the same queries, each input without the chat
    format's 7 tokens and with the choice question's (its instructions and the labels, by tiktoken;
    a template's own tokens around them assumed none), the same cached prefix, one output token."""
    usage: Charge = run["usage"]
    counter = TiktokenCounter(model, per_message=0)
    question = len(counter.encoding.encode_ordinary(" ".join([INSTRUCTIONS, *DEFAULT_LABELS])))
    prompt = usage.prompt_tokens + (question - 7) * usage.queries
    decided = Charge(usage.queries, prompt, usage.queries, cache_read_tokens=usage.cache_read_tokens)
    return run | {"usage": decided, "explainer": f"{run['explainer']}, decisions"}


def model_rows(runs: list[dict[str, Any]], models: Sequence[str], reasoning: Sequence[int]) -> list[dict[str, Any]]:
    """Every model's rows: a reasoning model's once per assumed count of reasoning tokens an answer."""
    return [
        priced(run, name, r)
        for name in models
        for r in (reasoning if reasoning_effort_for(name) is not None else [0])
        for run in runs
    ]


def _rates(price: Price) -> tuple[Decimal | None, ...]:
    return price.input, price.output, price.cache_read, price.cache_write


def markdown(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    lines = [
        "| explainer | explanations | queries | prompt tokens | cached (hit rate) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        u: Charge = run["usage"]
        lines.append(
            f"| {run['explainer']} | {run['explanations']} | {u.queries:,} | {u.prompt_tokens:,} | "
            f"{u.cache_read_tokens:,} ({u.cache_read_tokens / max(1, u.prompt_tokens):.0%}) |"
        )
    lines += ["", "USD per explanation:", ""]
    lines += [
        "| model | explainer | standard | with caching | flex | flex with caching | saved |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        full, best = Decimal(r["standard"]), Decimal(r["flex_cached"] or r["cached"])
        flex = [f"{Decimal(r[k]):.4f}" if r[k] else "—" for k in ("flex", "flex_cached")]
        model = r["model"]
        if r["reasoning_effort"] is not None:
            model += f" ({r['reasoning_effort']}, {r['reasoning_tokens']} reasoning tokens an answer)"
        lines.append(
            f"| {model} | {r['explainer']} | {full:.4f} | {Decimal(r['cached']):.4f} | "
            f"{flex[0]} | {flex[1]} | {1 - best / full:.0%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ._common import write_json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="sentences to explain (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="models genai-prices knows")
    parser.add_argument("--data", default=None)
    parser.add_argument(
        "--reasoning-tokens", type=int, nargs="+", default=[0, 50],
        help="reasoning tokens an answer assumed for reasoning models, billed as output (default 0 50)",
    )  # fmt: skip
    parser.add_argument(
        "--decision-model", default="gpt-6-luna",
        help="the decision endpoint's model: the same explanations as decision calls (none: '')",
    )  # fmt: skip
    args = parser.parse_args(argv)
    model, texts, _ = train_text_rf(data=args.data)
    runs = [asyncio.run(explain(kind, args, model, texts)) for kind in (AnchorsExplainer, MAnchorsExplainer)]
    rows = model_rows(runs, args.models, args.reasoning_tokens)
    if args.decision_model:
        rows += [priced(as_decisions(run, args.decision_model), args.decision_model) for run in runs]
    print(markdown(runs, rows))
    for run in runs:
        run["usage"] = {k: str(v) if isinstance(v, Decimal) else v for k, v in asdict(run["usage"]).items()}
    print(f"\nwrote {write_json('cost', {'params': vars(args), 'runs': runs, 'rows': rows})}")


if __name__ == "__main__":
    main()
