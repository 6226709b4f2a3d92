"""``llm-anchors explain "TEXT"``, ``run FILE``, ``report RESULTS``: the command line, and the one composition
root that picks a backend (the embedded local LLM unless told otherwise)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from ._exceptions import ConfigError, LLMAnchorsError
from ._version import __version__
from .explain.anchors import AnchorsExplainer
from .explain.explanation import Explanation
from .explain.manchors import MAnchorsExplainer
from .explain.meta import SecondOpinion
from .explain.progress import Progress, ProgressBar
from .models.backend import CompletionParams
from .models.llm import LLMClassifier
from .models.retry import RetryPolicy
from .money.budget import Budget
from .money.charge import Charge
from .money.journal import read_journal
from .money.pricing import FREE, load_prices
from .query.cache import QueryCache
from .run.estimate import Forecast, estimate
from .run.inputs import read_inputs
from .run.report import write_report
from .run.results import ResultsFile
from .run.resumable import (
    RunReport,
    check_memory_dir,
    explain_resumable,
    invalid_reasons,
    memory_saved,
    run_config,
)
from .samplers.text import MAX_WORDS, PERTURBATIONS, TextSampler
from .search.params import SearchParams

__all__ = ["main"]


_NUMBERS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool], str]] = {
    "seconds": (float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "count": (int, lambda v: v >= 1, "an integer >= 1"),
    "natural": (int, lambda v: v >= 0, "an integer >= 0"),
    "tau": (float, lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "usd": (Decimal, lambda v: v.is_finite() and v >= 0, "a finite number >= 0"),
    "rate": (
        lambda t: t if t in ("uniform", "auto") else float(t),
        lambda v: v in ("uniform", "auto") or 0 < v < 1,
        'a number in (0, 1), "uniform" or "auto"',
    ),
}


def _number(kind: str) -> Callable[[str], Any]:
    """An argparse type for a number of ``kind`` (see `_NUMBERS`): anything else is a usage error, before any work."""
    convert, ok, want = _NUMBERS[kind]

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except (ValueError, ArithmeticError):
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return value

    parse.__name__ = kind
    return parse


def _model_options() -> argparse.ArgumentParser:
    """The options `explain` and `run` share: backend, prompt, labels, search, retries, caps."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url",
        action="append",
        help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (repeat for replicas); "
        "default: start the embedded local LLM",
    )
    common.add_argument("--model", default=None, help="model name at --base-url")
    common.add_argument("--endpoint", choices=["auto", "completions", "chat"], default="auto")
    common.add_argument("--prompt", default=None, help="prompt template with {text}, or @FILE to read it from")
    common.add_argument("--labels", default=None, help="comma-separated label words (default: negative,positive)")
    common.add_argument("--seed", type=_number("natural"), default=0)
    common.add_argument("--threshold", type=_number("tau"), default=0.95, help="precision an anchor must reach (τ)")
    common.add_argument(
        "--certify",
        choices=["default", "strict"],
        default=None,
        help="default: an anchor's KL lower bound at δ, on the samples that chose it, clears τ − 0.05; strict: "
        "on samples drawn after it was chosen, its lower bound at δ clears τ itself (more queries). run and "
        "estimate: strict unless told (an audit); explain: default",
    )
    common.add_argument(
        "--max-words", type=_number("count"), default=MAX_WORDS, help="longest input explained, in words"
    )
    common.add_argument(
        "--unit",
        choices=["auto", "word", "sentence"],
        default="auto",
        help="what a feature is: a word; a sentence; auto (default): a text of 3+ sentences is searched by "
        "sentences, then by the words inside the anchor's sentences; a shorter one by words",
    )
    common.add_argument(
        "--perturbation",
        choices=list(PERTURBATIONS),
        default="unk",
        help="what becomes of a hidden word: replaced by UNK (default, Anchors'), deleted, or replaced by one "
        "of its nearest words (similar)",
    )
    common.add_argument(
        "--second-opinion",
        choices=list(PERTURBATIONS),
        default=None,
        help="explain and run: after the search, measure each anchor's precision under this other perturbation "
        "too, on --second-opinion-samples fresh samples (paid queries, counted in the explanation)",
    )
    common.add_argument(
        "--second-opinion-samples", type=_number("count"), default=200, help="fresh samples of a second opinion"
    )
    common.add_argument(
        "--p-hide",
        type=_number("rate"),
        default="auto",
        help="how often a word (sentence) outside the anchor is hidden: a probability (Anchors': 0.5); "
        '"uniform": a rate drawn per perturbation from U(0, 1); "auto" (default): uniform by sentences, 0.5 '
        "by words alone",
    )
    common.add_argument(
        "--max-concurrency", "--concurrency", dest="max_concurrency", type=_number("count"), default=8,
        help="requests in flight",
    )  # fmt: skip
    common.add_argument("--timeout", type=_number("seconds"), default=60.0, help="seconds for one HTTP request")
    common.add_argument(
        "--max-attempts", type=_number("count"), default=6, help="attempts per request on 429/5xx/timeouts (default 6)"
    )
    common.add_argument("--max-usd", type=_number("usd"), default=None, help="spend cap in USD")
    common.add_argument("--max-queries", type=_number("natural"), default=None, help="cap on model queries")
    common.add_argument(
        "--service-tier",
        default=None,
        help="asked of the server: flex (about half the price, slower), priority, auto (the account's default); "
        "one of the model's tiers in the price data. Calls are reserved at the dearest tier and billed at the "
        "one the server says",
    )
    common.add_argument(
        "--reasoning-effort",
        choices=["none", "minimal", "low", "medium", "high", "xhigh"],
        default=None,
        help="a reasoning model's effort (default: the lowest OpenAI's model of that name takes: minimal for "
        "gpt-5, none from gpt-5.1, low for o-series; a model that does not reason: not sent)",
    )
    common.add_argument(
        "--max-output-tokens",
        type=_number("count"),
        default=None,
        help="most output tokens an answer may take, reasoning included (default 1; 256 for a reasoning model): "
        "every call reserves it",
    )
    price = common.add_mutually_exclusive_group()
    price.add_argument("--price-file", default=None, help="JSON prices per model (USD per 1M tokens)")
    price.add_argument(
        "--free", action="store_true", help="the model at --base-url costs nothing (a local model with no price)"
    )
    return common


def _input_options() -> argparse.ArgumentParser:
    """The options `run` and `estimate` share: the inputs, the results file, the memory."""
    inputs = argparse.ArgumentParser(add_help=False)
    inputs.add_argument("input", help="JSONL, CSV or plain text (one input per line); - reads standard input")
    inputs.add_argument("--format", choices=["auto", "jsonl", "csv", "text"], default="auto")
    inputs.add_argument("--text-field", default="text", help="JSONL: the field holding the text (default text)")
    inputs.add_argument("--text-column", default="text", help="CSV: the column holding the text (default text)")
    inputs.add_argument("--out", default="results.jsonl", help="results file (default results.jsonl)")
    memory = inputs.add_mutually_exclusive_group()
    memory.add_argument(
        "--memory", nargs="?", const="", default=None, metavar="DIR",
        help="MAnchors' memory on: earlier explanations propose rules, kept in DIR (default OUT.memory); off by "
        "default, its proposals cost more queries than they saved on the tuning streams",
    )  # fmt: skip
    memory.add_argument("--anchors", action="store_true", help="plain Anchors (the beam search): the baseline")
    return inputs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-anchors", description="Explain an LLM's classification with an anchor.")
    parser.add_argument("--version", action="version", version=f"llm-anchors {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = _model_options()
    explain = sub.add_parser("explain", parents=[common], help="explain the label of one text")
    explain.add_argument("text", help="the text to explain")
    explain.add_argument(
        "--on-budget",
        choices=["raise", "return"],
        default="return",
        help="when a cap is reached: fail, or print the best rule so far (default)",
    )
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    check = sub.add_parser(
        "check",
        parents=[common],
        help="a given anchor's precision and coverage, under any perturbation",
        description="Estimate the precision (on --n fresh perturbations, paid queries) and the coverage (no "
        "query) of the anchor --anchor of TEXT under --perturbation: a second opinion on an anchor found "
        "under another operator, or by hand.",
    )
    check.add_argument("text", help="the text the anchor is of")
    check.add_argument("--anchor", required=True, help='the anchor\'s words, e.g. "not bad"')
    check.add_argument("--n", type=_number("count"), default=1000, help="fresh perturbations (default 1000)")
    check.add_argument("--json", action="store_true", help="print the estimates as one JSON object")
    inputs = _input_options()
    run = sub.add_parser(
        "run",
        parents=[common, inputs],
        help="explain every text of a file: resumable, under a spend cap",
        description="Explain every input of INPUT into --out (JSON lines, appended as each finishes). "
        "Run the same command again to carry on after a crash, Ctrl-C or a spent cap; caps (--max-usd, "
        "--max-queries) hold for the whole run, across restarts. An input that cannot be explained (empty, "
        "longer than --max-words) is recorded as failed, with the reason, and the run goes on.",
    )
    run.add_argument("--max-usd-per-text", type=_number("usd"), default=None, help="spend cap of each explanation")
    run.add_argument(
        "--inputs-at-once", type=_number("count"), default=1, help="inputs explained at once (MAnchors: 1 is exact)"
    )
    run.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="spread the run over Ray workers sharing the cap and the memory: a cluster's address "
        "(auto, ray://host:10001), or none to start Ray here (pip install 'llm-anchors[ray]')",
    )
    run.add_argument("--workers", type=_number("count"), default=2, help="--ray: explainers at once (default 2)")
    estimate = sub.add_parser(
        "estimate",
        parents=[common, inputs],
        help="what explaining a file will cost, from a seeded pilot, before the run pays",
        description="Explain a seeded pilot of INPUT's inputs (20%% of them, at most 50, holding at most 20%% "
        "of the words) as `run` would, keeping its labels in OUT's label cache so the run does not pay for them "
        "again, and print the queries and dollars the run will take for the rest, with a 95%% range. The pilot "
        "spends under the run's caps (--max-usd, --max-queries), journaled beside --out: a run on the same --out "
        "counts what its pilot spent. A pilot its cap stops prints the forecast it can, marked partial (exit 3).",
    )
    estimate.add_argument("--json", action="store_true", help="print the forecast as one JSON object")
    estimate.add_argument("--pilot-seed", type=_number("natural"), default=0, help="seed of the pilot's sample")
    report = sub.add_parser(
        "report",
        help="a run's results as one self-contained HTML page",
        description="Write RESULTS (the --out of llm-anchors run) as one static HTML page: a summary, the "
        "cumulative spend, the most frequent anchor words per label, and every input with its anchor marked.",
    )
    report.add_argument("results", help="a results file written by llm-anchors run")
    report.add_argument("-o", "--out", default="report.html", help="the page to write (default report.html)")
    report.add_argument(
        "--baseline",
        default=None,
        help="results of a plain-Anchors run (--anchors) of the same inputs: "
        "the summary then shows what MAnchors saved",
    )
    report.add_argument("--title", default=None, help="the page's title")
    return parser


EXIT_REFUSED = 2
"""Refused before anything was spent (a usage error, a setting, a file), or `explain` failed."""
EXIT_CAP = 3
"""`run`, `estimate`: the cap stopped it; the same command with a higher cap goes on."""
EXIT_FAULTS = 4
"""`run`: every input ended, but the model's errors left some unexplained; the same command retries them."""
EXIT_STOPPED = 5
"""`run`, `estimate`: an error stopped it after it had spent (a full disk, a memory that cannot be saved):
what it finished is kept; remove the cause and run the same command."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # each said once, as one line (`_show_warning`)
        warnings.showwarning = _show_warning
        try:
            if args.command == "run":
                return _run(args)
            if args.command == "report":
                return _report(args)
            if args.command == "estimate":
                return asyncio.run(_estimate(args))
            if args.command == "check":
                return asyncio.run(_check(args))
            return asyncio.run(_explain(args))
        except LLMAnchorsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except asyncio.CancelledError:  # llm-anchors run, stopped by a signal after its handler ran
            return 130


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning as one line on stderr, without Python's file, line and source."""
    print(f"warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def _stopped_after_spending(journal: Path) -> Iterator[None]:
    """An error after the journal grew ends the command with `EXIT_STOPPED`, saying so; one before
    it grew is left to `main` (`EXIT_REFUSED`: nothing was spent)."""
    before = _reservations(journal)
    try:
        yield
    except LLMAnchorsError as exc:
        if _reservations(journal) == before:
            raise
        print(f"error: {exc}", file=sys.stderr)
        print(f"(stopped after spending: what was finished is kept beside {journal.name}; remove the cause and "
              "run the same command)", file=sys.stderr)  # fmt: skip
        raise _Stopped from None


class _Stopped(Exception):
    """An error after spending, already said (`EXIT_STOPPED`)."""


def _reservations(journal: Path) -> int:
    return read_journal(journal).reservations if journal.exists() else 0


class _Model:
    """The explained model as the options say: its prompt, labels, price and servers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.prompt = _read_prompt(args.prompt) if args.prompt else None
        self.prices = load_prices(args.price_file) if args.price_file else None  # read before anything starts
        if args.base_url:  # a dollar cap that cannot price its model is refused now, before anything starts
            self.classifier(args.base_url, args.model or "default")

    def classifier(self, base_urls: list[str], model: str, *, embedded: bool = False) -> LLMClassifier:
        from adapters.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
        from adapters.openai_compat import OpenAICompatibleBackend

        args = self.args
        labels = [label.strip() for label in args.labels.split(",")] if args.labels else list(DEFAULT_LABELS)
        backend = OpenAICompatibleBackend(
            base_urls, model, endpoint=args.endpoint, max_request_size=8, timeout=args.timeout,
            service_tier=args.service_tier, reasoning_effort=args.reasoning_effort or "auto",
        )  # fmt: skip
        price = FREE if embedded or args.free else None
        params = None
        if args.max_output_tokens is not None:
            reasons = backend.reasoning_effort is not None
            base = CompletionParams.for_reasoning() if reasons else CompletionParams()
            params = replace(base, max_tokens=args.max_output_tokens)
        prompt = self.prompt or DEFAULT_PROMPT
        clf = LLMClassifier(backend, prompt, labels, params=params, price=price, prices=self.prices)
        if args.max_usd is not None and not clf.price.known:
            raise ConfigError(
                f"--max-usd cannot cap model {model!r} at {', '.join(base_urls)}: it has no price (served on this "
                "machine under a name the price table lacks). Give its price (--price-file) or declare it free (--free)"
            )
        return clf


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "seed": args.seed,
        "search": SearchParams(
            threshold=args.threshold,
            certify=args.certify or ("strict" if args.command in ("run", "estimate") else "default"),
        ),
        "sampler": _sampler(args),
        "max_concurrency": args.max_concurrency,
        "retry": RetryPolicy(max_attempts=args.max_attempts),
        "second_opinion": _second_opinion(args),
    }


def _second_opinion(args: argparse.Namespace) -> SecondOpinion | None:
    if args.second_opinion is None or args.command == "check":  # check is itself a second opinion
        return None
    return SecondOpinion(args.second_opinion, args.second_opinion_samples)


def _sampler(args: argparse.Namespace) -> TextSampler:
    """The perturbation distribution the options name (recorded in the run's configuration)."""
    return TextSampler(perturbation=args.perturbation, unit=args.unit, p_hide=args.p_hide, max_words=args.max_words)


def _memory_dir(args: argparse.Namespace) -> str | None:
    """Where `run`'s memory is kept (None: the memory is off)."""
    return None if args.memory is None else (args.memory or f"{args.out}.memory")


def _explainer(args: argparse.Namespace) -> tuple[type[AnchorsExplainer], dict[str, Any]]:
    """`run`'s explainer and its settings: plain Anchors (``--anchors``), or MAnchors' guided search,
    its memory on with ``--memory``."""
    if args.anchors:
        return AnchorsExplainer, _settings(args)
    return MAnchorsExplainer, {**_settings(args), "use_memory": args.memory is not None}


def _cap(args: argparse.Namespace) -> Budget | None:
    """The cap ``--max-usd`` / ``--max-queries`` name for one command (None: no cap)."""
    if args.max_usd is None and args.max_queries is None:
        return None
    return Budget(max_usd=args.max_usd, max_queries=args.max_queries)


async def _explain(args: argparse.Namespace) -> int:
    model = _Model(args)
    with _backend(args) as (base_urls, name, embedded):
        clf = model.classifier(base_urls, name, embedded=embedded)
        async with AnchorsExplainer(clf, budget=_cap(args), on_budget=args.on_budget, **_settings(args)) as explainer:
            with _ProgressLine(sys.stderr) as progress:
                exp = await explainer.explain(args.text, progress=progress)
    print(exp.to_json(indent=2) if args.json else render(exp, color=sys.stdout.isatty()))
    return 0


async def _check(args: argparse.Namespace) -> int:
    sampler = _sampler(args)
    positions, coarse, instance = sampler.rule_of(args.text, args.anchor)  # refused before any model starts
    model = _Model(args)
    with _backend(args) as (base_urls, name, embedded):
        clf = model.classifier(base_urls, name, embedded=embedded)
        async with AnchorsExplainer(clf, budget=_cap(args), **_settings(args)) as explainer:
            precision = await explainer.estimate_precision(args.text, positions, coarse=coarse, n=args.n)
            coverage = await explainer.estimate_coverage(args.text, positions, coarse=coarse)
    under = sampler.describe(instance)
    found = {"anchor": args.anchor, "positions": list(positions), "coarse": coarse, "precision": precision,
             "coverage": coverage, "n": args.n, "perturbation": args.perturbation, "perturbed_as": under}  # fmt: skip
    if args.json:
        print(json.dumps(found))
    else:
        print(f"anchor      {args.anchor}\nprecision   {precision:.3f}  (on {args.n:,} fresh perturbations)\n"
              f"coverage    {coverage:.3f}\nperturbed   {under}")  # fmt: skip
    return 0


# -- llm-anchors run -----------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    """Explain a file of inputs; exit 0 when all are done (those that cannot be explained recorded as
    failed), `EXIT_CAP`, `EXIT_FAULTS`, `EXIT_STOPPED`, 130/143 on SIGINT/SIGTERM (everything finished
    is kept); `EXIT_REFUSED` for anything refused before money was spent."""
    texts = read_inputs(args.input, args.format, args.text_field, args.text_column)
    model = _Model(args)
    memory = _memory_dir(args)
    if memory is not None:
        check_memory_dir(memory)
    out = Path(args.out)
    stopped_by: list[int] = []
    with ResultsFile(out) as results:
        results.check_inputs(texts)
        journal = results.check_journal()
        failed = sorted(results.failed)
        sampler = _sampler(args)
        still = invalid_reasons(sampler, [texts[i] for i in failed])
        if not results.todo(texts) and all(still) and memory_saved(results, memory):  # no server, no model
            done = len(texts) - len(failed)
            print(f"{out}: all {len(texts):,} inputs are done already ({done:,} explained, {len(failed):,} failed)",
                  file=sys.stderr)  # fmt: skip
            return 0
        print(f"{len(results.todo(texts)):,} inputs to explain; perturbed as: {sampler.distribution}",
              file=sys.stderr)  # fmt: skip
        try:
            with _stopped_after_spending(journal):
                report = asyncio.run(_run_async(args, model, memory, texts, results, stopped_by))
        except _Stopped:
            return EXIT_STOPPED
        except asyncio.CancelledError:
            if not stopped_by:
                raise
    if stopped_by:
        print(f"stopped by signal {stopped_by[0]}: finished explanations are kept in {out}", file=sys.stderr)
        return 128 + stopped_by[0]
    print(report.summary(), file=sys.stderr)
    if report.stopped == "budget":
        return EXIT_CAP
    return EXIT_FAULTS if report.faulted else 0


async def _run_async(
    args: argparse.Namespace,
    model: _Model,
    memory: str | None,
    texts: list[str],
    results: ResultsFile,
    stopped_by: list[int],
) -> RunReport:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, _stop, task, number, stopped_by)
    if args.ray is not None:
        return await _run_on_ray(args, model, memory, texts, results)
    with (
        results.open_budget(max_usd=args.max_usd, max_queries=args.max_queries) as run_budget,
        _backend(args) as (base_urls, name, embedded),
        contextlib.closing(_label_cache(results.path)) as cache,
    ):
        per_text = None
        if args.max_usd_per_text is not None:
            per_text = lambda: Budget(max_usd=args.max_usd_per_text, parent=run_budget)  # noqa: E731
        clf = model.classifier(base_urls, name, embedded=embedded)
        identity = await _identity(clf, embedded)
        kind, settings = _explainer(args)
        options = {**settings, "budget": run_budget, "on_budget": "return", "cache": cache}
        async with kind(clf, **options) as explainer:
            with ProgressBar(len(texts), len(results.records), spent=lambda: run_budget.settled) as bar:
                return await explain_resumable(
                    explainer,
                    texts,
                    results,
                    memory_dir=memory,
                    run_budget=run_budget,
                    budget_per_input=per_text,
                    concurrent_inputs=args.inputs_at_once,
                    on_result=bar.update,
                    model=identity,
                )


def _label_cache(out: Path) -> QueryCache:
    """The run's label cache beside its results: `run` and `estimate` share it, so a run does not pay
    again for what its pilot asked."""
    return QueryCache(f"{out}.cache.sqlite")


async def _identity(clf: LLMClassifier, embedded: bool) -> dict[str, Any]:
    """What tells this model from another under the same name: the embedded model's file, or the
    servers' addresses and what they say they serve."""
    from adapters.llamacpp import find_model
    from adapters.openai_compat import OpenAICompatibleBackend, redact

    backend = clf.backend
    if embedded or not isinstance(backend, OpenAICompatibleBackend):
        return {"embedded": find_model().name}
    return {"base_url": [redact(u) for u in backend.base_urls], "served": await backend.served_models()}


async def _estimate(args: argparse.Namespace) -> int:
    """`llm-anchors estimate`: a seeded pilot under the run's cap (journaled beside ``--out``, refused
    where `run` would refuse), its labels in the run's cache, the rest forecast."""
    texts = read_inputs(args.input, args.format, args.text_field, args.text_column)
    model = _Model(args)
    if (memory := _memory_dir(args)) is not None:
        check_memory_dir(memory)
    with ResultsFile(Path(args.out)) as results:
        results.check_inputs(texts)
        journal = results.check_journal()
        try:
            with _stopped_after_spending(journal):
                forecast = await _pilot(args, model, texts, results)
        except _Stopped:
            return EXIT_STOPPED
    print(json.dumps(forecast.to_dict()) if args.json else forecast.summary())
    return EXIT_CAP if forecast.partial else 0


async def _pilot(args: argparse.Namespace, model: _Model, texts: list[str], results: ResultsFile) -> Forecast:
    with (
        results.open_budget(max_usd=args.max_usd, max_queries=args.max_queries) as budget,
        _backend(args) as (base_urls, name, embedded),
        contextlib.closing(_label_cache(results.path)) as cache,
    ):
        clf = model.classifier(base_urls, name, embedded=embedded)
        identity = await _identity(clf, embedded)
        kind, settings = _explainer(args)
        options = {**settings, "budget": budget, "on_budget": "return", "cache": cache}
        async with kind(clf, **options) as explainer:
            results.check_config(run_config(explainer, model=identity))  # the run's: it must take the same
            return await estimate(explainer, texts, seed=args.pilot_seed)


def _report(args: argparse.Namespace) -> int:
    out = write_report(args.results, args.out, baseline=args.baseline, title=args.title)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): open it in a browser", file=sys.stderr)
    return 0


async def _run_on_ray(
    args: argparse.Namespace, model: _Model, memory: str | None, texts: list[str], results: ResultsFile
) -> RunReport:
    """`llm-anchors run --ray`: the same run, its inputs spread over Ray workers."""
    from .distributed.pool import RayPool, explain_resumable_on_ray, import_ray

    import_ray()
    address = None if args.ray == "local" else args.ray
    options = {
        "max_usd": args.max_usd, "max_queries": args.max_queries, "max_usd_per_input": args.max_usd_per_text,
        "journal": results.check_journal(), "memory_dir": memory, "address": address,
    }  # fmt: skip
    with _backend(args) as (base_urls, name, embedded):
        identity = await _identity(model.classifier(base_urls, name, embedded=embedded), embedded)
        make = functools.partial(_ray_explainer, args, model, base_urls, name, embedded, str(results.path.resolve()))
        async with RayPool(make, workers=args.workers, **options) as pool:
            budget = pool.budget
            assert budget is not None
            with ProgressBar(len(texts), len(results.records), spent=lambda: budget.report().settled) as bar:
                return await explain_resumable_on_ray(pool, texts, results, on_result=bar.update, model=identity)


def _ray_explainer(
    args: argparse.Namespace, model: _Model, base_urls: list[str], name: str, embedded: bool, out: str
) -> AnchorsExplainer:
    """A worker's explainer (built in the worker: its own connections and cache handle)."""
    clf = model.classifier(base_urls, name, embedded=embedded)
    kind, settings = _explainer(args)
    cache = _label_cache(Path(out))  # one file, shared by this machine's workers
    return kind(clf, **settings, on_budget="return", cache=cache)


def _stop(task: asyncio.Task[Any] | None, number: int, stopped_by: list[int]) -> None:
    stopped_by.append(int(number))
    if task is not None:
        task.cancel()


@contextlib.contextmanager
def _backend(args: argparse.Namespace) -> Iterator[tuple[list[str], str, bool]]:
    """The servers' base URLs, the model's name, and whether it is the embedded local LLM (started here)."""
    if args.base_url:
        yield args.base_url, args.model or "default", False
        return
    from adapters.llamacpp import LlamaServer

    print("starting the local LLM (Gemma 3 270M on llama-server)…", file=sys.stderr, flush=True)
    with LlamaServer() as server:
        yield [server.base_url], args.model or "gemma-3-270m-q4_k_m", True


def _read_prompt(value: str) -> str:
    """The template itself, or with ``@FILE`` the file's text; `ConfigError` when it cannot be read."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--prompt {value}: cannot read the prompt file ({type(exc).__name__}: {exc})") from exc


class _ProgressLine:
    """One status line on stderr (tqdm), redrawn after each batch, only on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        from tqdm import tqdm

        fmt = "  {n:,} samples{postfix} · {elapsed}"
        self.bar = tqdm(file=stream, disable=not stream.isatty(), bar_format=fmt, leave=False)

    def __call__(self, p: Progress) -> None:
        self.bar.n = p.samples
        tokens = p.spent.prompt_tokens + p.spent.completion_tokens
        self.bar.set_postfix_str(f"{p.queries:,} queries · {p.cache_hits:,} cached · {tokens:,} tokens")

    def __enter__(self) -> _ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


def render(exp: Explanation, *, color: bool = False) -> str:
    """The sentence with the anchor marked, then the numbers."""
    d, m = exp.data, exp.meta
    if color:
        sentence = exp.mark(lambda w: f"\033[1;7m{w}\033[22;27m", wrap_coarse=lambda s: f"\033[4m{s}\033[0m")
    else:
        sentence = exp.mark(lambda w: f"[{w}]", wrap_coarse=lambda s: f"{{{s}}}")
    anchor = " AND ".join(d.anchor) if d.anchor else "(empty: a prior, not these words; see the claim)"
    status = "" if d.success else "  (no rule reached the threshold: best found)"
    if m.budget_exhausted:
        status += "  (budget exhausted: best rule so far)"
    c = m.cost
    estimated = " (estimated)" if c.settled.estimated or c.reserved.estimated else ""
    lines = [
        sentence,
        "",
        f"label       {d.label}",
        *(
            [f"sentences   {len(d.coarse.anchor)} of the text's, marked {{ }}: the words were searched inside them"]
            if d.coarse is not None
            else []
        ),
        f"anchor      {anchor}{status}",
        f"precision   {d.precision:.3f}  (KL bounds {d.precision_bounds[0]:.3f}–{d.precision_bounds[1]:.3f})",
        f"claim       {exp.claim}",
        f"coverage    {d.coverage:.3f}",
        *(
            [
                f"2nd opinion {o.precision:.3f}  (precision under {o.perturbation}, {o.samples:,} fresh samples: "
                f"{o.perturbed_as})"
            ]
            if (o := d.second_opinion) is not None
            else []
        ),
        f"samples     {m.samples:,}",
        f"queries     {m.queries:,}  ({c.cache_hits:,} cache hits, {c.retries} retries)",
        f"tokens      {c.settled.prompt_tokens:,} prompt{_cached(c.settled)} + {c.settled.completion_tokens:,} "
        f"completion{estimated}",
        f"cost        ${c.settled.usd} (reserved ${c.reserved.usd}{_saved(exp)})",
        f"time        {m.wall_time_s:.1f}s",
    ]
    if m.unparsed:
        lines.append(f"unparsed    {m.unparsed} answers named no label")
    if c.disputed:
        said = ", ".join(f"{why} ({n})" for why, n in c.disputed.items())
        lines.append(f"disputed    {c.settled.disputed} calls counted at their worst case: {said}")
    return "\n".join(lines)


def _cached(usage: Charge) -> str:
    """How much of a prompt the provider's cache served (and took in), if any."""
    parts = [f"{usage.cache_read_tokens:,} cached"] if usage.cache_read_tokens else []
    parts += [f"{usage.cache_write_tokens:,} written to the cache"] if usage.cache_write_tokens else []
    return f" ({', '.join(parts)})" if parts else ""


def _saved(exp: Explanation) -> str:
    saved = exp.saved_by_caching
    return f"; caching saved ${saved}" if saved else ""


if __name__ == "__main__":
    sys.exit(main())
