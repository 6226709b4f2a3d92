"""``llm-anchors explain "TEXT"``: the command line, and the one composition
root that picks a backend (the embedded local LLM unless told otherwise)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ._budget import Budget
from ._exceptions import ConfigError, LLMAnchorsError
from ._explainer import AnchorsExplainer
from ._explanation import Explanation
from ._llm import LLMClassifier
from ._pricing import load_prices
from ._progress import Progress
from ._retry import RetryPolicy
from ._text import TextInstance

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-anchors", description="Explain an LLM's classification with an anchor.")
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser("explain", help="explain the label of one text")
    explain.add_argument("text", help="the text to explain")
    explain.add_argument(
        "--base-url",
        action="append",
        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (repeat for replicas); "
        "default: start the embedded local LLM",
    )
    explain.add_argument("--model", default=None, help="model name at --base-url")
    explain.add_argument("--endpoint", choices=["auto", "completions", "chat"], default="auto")
    explain.add_argument("--prompt", default=None, help="prompt template with {text}, or @FILE to read it from")
    explain.add_argument("--labels", default=None, help="comma-separated label words (default: negative,positive)")
    explain.add_argument("--seed", type=int, default=0)
    explain.add_argument("--threshold", type=float, default=0.95, help="precision an anchor must reach (τ)")
    explain.add_argument("--max-concurrency", type=int, default=8, help="requests in flight")
    explain.add_argument("--timeout", type=float, default=60.0, help="seconds for one HTTP request")
    explain.add_argument(
        "--max-attempts", type=int, default=6, help="attempts per request on 429/5xx/timeouts (default 6)"
    )
    explain.add_argument("--max-usd", default=None, help="spend cap in USD")
    explain.add_argument("--max-queries", type=int, default=None, help="cap on model queries")
    explain.add_argument("--price-file", default=None, help="JSON prices per model (USD per 1M tokens)")
    explain.add_argument(
        "--on-budget",
        choices=["raise", "return"],
        default="return",
        help="when a cap is reached: fail, or print the best rule so far (default)",
    )
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_explain(args))
    except LLMAnchorsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


async def _explain(args: argparse.Namespace) -> int:
    from adapters.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT

    prompt = _read_prompt(args.prompt) if args.prompt else DEFAULT_PROMPT
    labels = [label.strip() for label in args.labels.split(",")] if args.labels else list(DEFAULT_LABELS)
    with _backend(args) as (base_urls, model):
        from adapters.openai_compat import OpenAICompatibleBackend

        backend = OpenAICompatibleBackend(
            base_urls, model, endpoint=args.endpoint, max_request_size=8, timeout=args.timeout
        )
        prices = load_prices(args.price_file) if args.price_file else None
        clf = LLMClassifier(backend, prompt, labels, prices=prices)
        budget = None
        if args.max_usd is not None or args.max_queries is not None:
            budget = Budget(max_usd=args.max_usd, max_queries=args.max_queries)
        async with AnchorsExplainer(
            clf,
            seed=args.seed,
            threshold=args.threshold,
            max_concurrency=args.max_concurrency,
            retry=RetryPolicy(max_attempts=args.max_attempts),
            budget=budget,
            on_budget=args.on_budget,
        ) as explainer:
            with _ProgressLine(sys.stderr) as progress:
                exp = await explainer.explain(args.text, progress=progress)
    print(exp.to_json(indent=2) if args.json else render(exp, color=sys.stdout.isatty()))
    return 0


@contextlib.contextmanager
def _backend(args: argparse.Namespace) -> Iterator[tuple[list[str], str]]:
    if args.base_url:
        yield args.base_url, args.model or "default"
        return
    from adapters.llamacpp import LlamaServer

    print("starting the local LLM (Gemma 3 270M on llama-server)…", file=sys.stderr, flush=True)
    with LlamaServer() as server:
        yield [server.base_url], args.model or "gemma-3-270m-q4_k_m"


def _read_prompt(value: str) -> str:
    """The template itself, or with ``@FILE`` the file's text; `ConfigError` when it cannot be read."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--prompt {value}: cannot read the prompt file ({type(exc).__name__}: {exc})") from exc


class _ProgressLine:
    """One status line on stderr, redrawn after each batch (only on a terminal)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()

    def __call__(self, p: Progress) -> None:
        if self.live:
            self.stream.write(
                f"\r  {p.samples:,} samples · {p.queries:,} queries · {p.cache_hits:,} cached · "
                f"{p.prompt_tokens + p.completion_tokens:,} tokens · {p.elapsed_s:.1f}s "
            )
            self.stream.flush()

    def __enter__(self) -> _ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


def render(exp: Explanation, *, color: bool = False) -> str:
    """The sentence with the anchor marked, then the numbers."""
    d, m = exp.data, exp.meta
    sentence = TextInstance.parse(d.text).mark(
        d.positions, (lambda w: f"\033[1;7m{w}\033[0m") if color else (lambda w: f"[{w}]")
    )
    anchor = " AND ".join(d.anchor) if d.anchor else "(empty: the label holds whatever the words)"
    status = "" if d.success else "  (no rule reached the threshold: best found)"
    if m.budget_exhausted:
        status += "  (budget exhausted: best rule so far)"
    estimated = " (estimated)" if m.cost.tokens_estimated else ""
    lines = [
        sentence,
        "",
        f"label       {d.label}",
        f"anchor      {anchor}{status}",
        f"precision   {d.precision:.3f}  (bounds {d.precision_bounds[0]:.3f}–{d.precision_bounds[1]:.3f})",
        f"coverage    {d.coverage:.3f}",
        f"samples     {m.samples:,}",
        f"queries     {m.queries:,}  ({m.cache_hits:,} cache hits, {m.retries} retries)",
        f"tokens      {m.cost.prompt_tokens:,} prompt + {m.cost.completion_tokens:,} completion{estimated}",
        f"cost        ${m.cost.usd_settled} (reserved ${m.cost.usd_reserved})",
        f"time        {m.wall_time_s:.1f}s",
    ]
    if m.unparsed:
        lines.append(f"unparsed    {m.unparsed} answers named no label")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
