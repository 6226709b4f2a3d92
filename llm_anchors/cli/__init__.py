"""``llm-anchors explain "TEXT"``, ``run FILE``, ``report RESULTS``: the command line, and the one composition
root that picks a backend (the embedded local LLM unless told otherwise)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError, LLMAnchorsError, ServerUnavailableError
from .._secrets import environment_secrets, header_secrets, hide, redact, refuse_credentials, remember
from ..explain.anchors import AnchorsExplainer
from ..explain.manchors import MAnchorsExplainer
from ..explain.meta import SecondOpinion
from ..explain.progress import ProgressBar
from ..models.retry import RetryPolicy, is_retryable
from ..money.budget import Budget
from ..money.journal import read_journal
from ..propose.memory import MemoryParams
from ..query.cache import QueryCache
from ..run.estimate import Forecast, estimate
from ..run.inputs import read_inputs
from ..run.memory_dir import check_memory_dir, kept_in, memory_saved
from ..run.report import write_report
from ..run.results import ResultsFile
from ..run.resumable import RunReport, explain_resumable, invalid_reasons, recorded_entries, run_config
from ..samplers.text import TextSampler
from ..search.params import SearchParams
from .model import Model, backend, model_identity, served_as
from .options import parser
from .render import ProgressLine, render

__all__ = ["main", "render"]


EXIT_REFUSED = 2
"""Refused before anything was spent (a usage error, a setting, a file, a server's refusal of the request)."""
EXIT_CAP = 3
"""`run`, `estimate`: the cap stopped it; the same command with a higher cap goes on."""
EXIT_FAULTS = 4
"""`run`: every input ended, but the model's errors left some unexplained; the same command retries them."""
EXIT_STOPPED = 5
"""An error stopped it after it had spent (`run`, `estimate`: a full disk, a memory that cannot be saved,
what it finished kept; `explain`, `check`: an answer that names no label, after the model was called):
remove the cause and run the same command."""
EXIT_UNAVAILABLE = 6
"""The model's server did not answer (unreachable, down, wedged, or rate-limiting past a call's deadline):
nothing more was sent, what was finished is kept; the same command goes on once it answers."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # each said once, as one line (`_show_warning`)
        warnings.showwarning = _show_warning
        try:
            _credentials(args)  # known by value before anything starts: no file or line shows them
            if args.command != "report":
                _settings(args)  # the values their owners bound (--threshold, --p-hide), checked before anything starts
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
            print(f"error: {redact(str(exc))}", file=sys.stderr)
            return EXIT_REFUSED
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except asyncio.CancelledError:  # llm-anchors run, stopped by a signal after its handler ran
            return 130


_DATA = ("text", "input", "results", "anchor", "header")
"""What a command is given that is not a setting: the user's data (hidden wherever it is written) and the
credentials themselves."""


def _credentials(args: argparse.Namespace) -> None:
    """Know the credentials this command was handed (the environment's API keys and proxy passwords, the
    ``--header`` values) by value, and refuse, before anything starts, a setting that holds one (naming
    the option, never the value)."""
    from .model import headers_of

    remember(*environment_secrets(os.environ), *header_secrets(headers_of(getattr(args, "header", None) or [])))
    refuse_credentials({f"--{k.replace('_', '-')}": v for k, v in vars(args).items() if k not in _DATA})


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning as one line on stderr, without Python's file, line and source."""
    print(f"warning: {redact(str(message))}", file=sys.stderr)


@contextlib.contextmanager
def _stopped_after_spending(spent: Callable[[], int], kept: Callable[[int], str]) -> Iterator[None]:
    """An error after ``spent()`` (calls made, or the journal's reservations) grew ends the command with
    `EXIT_STOPPED`, saying so (``kept(how many more)``: what was spent and kept), and the model's server not
    answering (`ServerUnavailableError`, a retryable error past its retries) with `EXIT_UNAVAILABLE`,
    spent or not; any other error before it grew is left to `main` (`EXIT_REFUSED`: nothing was spent)."""
    before = spent()
    try:
        yield
    except LLMAnchorsError as exc:
        unanswered = isinstance(exc, ServerUnavailableError) or is_retryable(exc)
        if spent() == before and not unanswered:
            raise
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        print(f"(stopped after spending: {kept(spent() - before)})", file=sys.stderr)
        raise _Stopped(EXIT_UNAVAILABLE if unanswered else EXIT_STOPPED) from None


class _Stopped(Exception):
    """An error after spending, already said: the exit code it ends the command with (`EXIT_STOPPED`, or
    `EXIT_UNAVAILABLE` when the model's server did not answer)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _journaled(journal: Path) -> Callable[[], int]:
    """The reservations ``journal`` holds, as `_stopped_after_spending` asks them."""
    return lambda: read_journal(journal).reservations if journal.exists() else 0


def _kept_beside(journal: Path) -> Callable[[int], str]:
    return lambda _: f"what was finished is kept beside {journal.name}; remove the cause and run the same command"


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "seed": args.seed,
        "search": SearchParams(
            threshold=args.threshold,
            certify=args.certify or ("strict" if args.command in ("run", "estimate") else "default"),
        ),
        "sampler": _sampler(args),
        "max_concurrency": args.max_concurrency,
        "retry": _retry(args),
        "second_opinion": _second_opinion(args),
    }


def _retry(args: argparse.Namespace) -> RetryPolicy:
    """The retry policy and the call's deadline; a request's patience (``--timeout``) within it."""
    if args.timeout > args.max_elapsed:
        raise ConfigError(f"--timeout {args.timeout:g} is longer than a call's deadline, --max-elapsed "
                          f"{args.max_elapsed:g}: a request would be cut before its own timeout")  # fmt: skip
    return RetryPolicy(max_attempts=args.max_attempts, max_elapsed=args.max_elapsed)


def _second_opinion(args: argparse.Namespace) -> SecondOpinion | None:
    if args.second_opinion is None:
        return None
    if args.command == "check":  # refused, not ignored: the user would read a number that was never measured
        raise ConfigError("check is itself a second opinion: give the operator as --perturbation")
    return SecondOpinion(args.second_opinion, args.second_opinion_samples)


def _sampler(args: argparse.Namespace) -> TextSampler:
    """The perturbation distribution the options name (recorded in the run's configuration)."""
    return TextSampler(perturbation=args.perturbation, unit=args.unit, p_hide=args.p_hide, max_words=args.max_words)


def _memory_dir(args: argparse.Namespace) -> str | None:
    """Where the memory is kept (None: the memory is off): `run`'s and `estimate`'s in ``OUT.memory`` unless
    told (``--memory``, ``--no-memory``), `explain`'s only where ``--memory`` says."""
    if getattr(args, "anchors", False) or getattr(args, "no_memory", False):
        return None
    if args.command in ("run", "estimate"):
        return str(args.memory or f"{args.out}.memory")
    return getattr(args, "memory", None)


def _explainer(args: argparse.Namespace) -> tuple[type[AnchorsExplainer], dict[str, Any]]:
    """The explainer a command runs and its settings: MAnchors' guided search, its memory on where it is
    kept (`_memory_dir`); plain Anchors with ``--anchors``."""
    if getattr(args, "anchors", False):
        return AnchorsExplainer, _settings(args)
    return MAnchorsExplainer, {**_settings(args), "memory": MemoryParams() if _memory_dir(args) is not None else None}


def _cap(args: argparse.Namespace) -> Budget | None:
    """The cap ``--max-usd`` / ``--max-queries`` name for one command (None: no cap)."""
    if args.max_usd is None and args.max_queries is None:
        return None
    return Budget(max_usd=args.max_usd, max_queries=args.max_queries)


async def _explain(args: argparse.Namespace) -> int:
    model = Model(args)
    memory = _memory_dir(args)
    if memory is not None:
        check_memory_dir(memory)  # before any server starts
    kind, settings = _explainer(args)
    with backend(args) as (base_urls, name, embedded):
        clf = model.classifier(base_urls, name, embedded=embedded)
        async with kind(clf, budget=_cap(args), on_budget=args.on_budget, **settings) as explainer:
            with contextlib.ExitStack() as kept:
                keep = None
                if memory is not None and isinstance(explainer, MAnchorsExplainer):
                    keep = kept.enter_context(kept_in(explainer, memory))
                try:
                    with (
                        _stopped_after_spending(lambda: explainer.engine.billed_calls, _calls_made),
                        ProgressLine(sys.stderr) as progress,
                    ):
                        exp = await explainer.explain(args.text, progress=progress)
                except _Stopped as stopped:
                    return stopped.code
                if keep is not None:
                    keep(args.text, exp)
    print(hide(exp.to_json(indent=2) if args.json else render(exp, color=sys.stdout.isatty())))
    return 0


def _calls_made(calls: int) -> str:
    """What `explain` or `check` says it spent when an error stopped it after calling the model."""
    return f"{calls:,} call(s) to the model that may be billed; remove the cause and run the command again"


async def _check(args: argparse.Namespace) -> int:
    """The anchor's precision on fresh perturbations and its coverage; `EXIT_CAP` when the cap stopped the
    measure first (what it measured printed, with its interval)."""
    sampler = _sampler(args)
    positions, coarse, instance = sampler.rule_of(args.text, args.anchor)  # refused before any model starts
    model = Model(args)
    with backend(args) as (base_urls, name, embedded):
        clf = model.classifier(base_urls, name, embedded=embedded)
        async with AnchorsExplainer(clf, budget=_cap(args), **{**_settings(args), "on_budget": "return"}) as explainer:
            try:
                with _stopped_after_spending(lambda: explainer.engine.billed_calls, _calls_made):
                    measured = await explainer.measure_precision(args.text, positions, coarse=coarse, n=args.n)
            except _Stopped as stopped:
                return stopped.code
            coverage = await explainer.estimate_coverage(args.text, positions, coarse=coarse)
    under = sampler.describe(instance)
    found = {"anchor": args.anchor, "positions": list(positions), "coarse": coarse, "precision": measured.precision,
             "interval": [measured.low, measured.high], "coverage": coverage, "n": measured.n, "asked": args.n,
             "stopped_by_cap": measured.stopped, "perturbation": args.perturbation, "perturbed_as": under}  # fmt: skip
    priced = f"at most {args.n + 1:,} queries: the text and {args.n:,} fresh perturbations of the anchor (no search)"
    if args.json:
        print(hide(json.dumps(found)))
    else:
        on = f"{measured.n:,} fresh perturbations" + (f" of {args.n:,}: the cap stopped it" if measured.stopped else "")
        print(
            f"anchor      {args.anchor}\nprecision   {measured.precision:.3f}  (95% {measured.low:.3f}–"
            f"{measured.high:.3f}, on {on})\ncoverage    {coverage:.3f}\nperturbed   {under}\ncost        {priced}"
        )
    return EXIT_CAP if measured.stopped else 0


# -- llm-anchors run -----------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    """Explain a file of inputs; exit 0 when all are done (those that cannot be explained recorded as
    failed), `EXIT_CAP`, `EXIT_FAULTS`, `EXIT_STOPPED`, 130/143 on SIGINT/SIGTERM (everything finished
    is kept); `EXIT_REFUSED` for anything refused before money was spent."""
    texts = read_inputs(args.input, args.format, args.text_field, args.text_column)
    model = Model(args)
    memory = _memory_dir(args)
    if memory is not None:
        check_memory_dir(memory)
    out = Path(args.out)
    stopped_by: list[int] = []
    with ResultsFile(out) as results:
        results.check_inputs(texts)
        _check_recorded(args, model, results)
        journal = results.check_journal()
        failed = sorted(results.failed)
        sampler = _sampler(args)
        still = invalid_reasons(sampler, [texts[i] for i in failed])
        saved = memory_saved(len(recorded_entries(results)), memory)
        if not results.todo(texts) and all(still) and saved:  # nothing to do: no server, no model
            done = len(texts) - len(failed)
            print(f"{out}: all {len(texts):,} inputs are done already ({done:,} explained, {len(failed):,} failed)",
                  file=sys.stderr)  # fmt: skip
            return 0
        print(f"{len(results.todo(texts)):,} inputs to explain; perturbed as: {sampler.distribution}",
              file=sys.stderr)  # fmt: skip
        try:
            with _stopped_after_spending(_journaled(journal), _kept_beside(journal)):
                report = asyncio.run(_run_async(args, model, memory, texts, results, stopped_by))
        except _Stopped as stopped:
            return stopped.code
        except asyncio.CancelledError:
            if not stopped_by:
                raise
    if stopped_by:
        print(f"stopped by signal {stopped_by[0]}: finished explanations are kept in {out}", file=sys.stderr)
        return 128 + stopped_by[0]
    print(report.summary(), file=sys.stderr)
    if report.stopped == "budget":
        return EXIT_CAP
    if report.stopped == "server":
        return EXIT_UNAVAILABLE
    return EXIT_FAULTS if report.faulted else 0


async def _run_async(
    args: argparse.Namespace,
    model: Model,
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
        backend(args) as (base_urls, name, embedded),
        contextlib.closing(_label_cache(results.path)) as cache,
    ):
        per_text = None
        if args.max_usd_per_text is not None:
            per_text = lambda: Budget(max_usd=args.max_usd_per_text, parent=run_budget)  # noqa: E731
        clf = model.classifier(base_urls, name, embedded=embedded)
        identity = await model_identity(clf, embedded)
        kind, settings = _explainer(args)
        options = {**settings, "budget": run_budget, "on_budget": "return", "cache": cache}
        async with kind(clf, **options) as explainer:
            with ProgressBar(len(texts), len(results.records), spent=lambda: run_budget.settled) as bar:
                return await explain_resumable(
                    explainer,
                    texts,
                    results,
                    memory_dir=memory,
                    budget_per_input=per_text,
                    concurrent_inputs=args.inputs_at_once,
                    on_result=bar.update,
                    model=identity,
                )


def _check_recorded(args: argparse.Namespace, model: Model, results: ResultsFile) -> None:
    """Refuse, before any server starts, a run whose settings differ from those recorded in its results
    file (what its server says it serves is checked once it runs): a finished --out answered "all done"
    to any configuration."""
    if results.config is None:
        return
    urls, name, embedded = served_as(args)
    kind, settings = _explainer(args)
    explainer = kind(model.classifier(urls, name, embedded=embedded), **settings)  # nothing is sent
    try:
        results.check_config(run_config(explainer), unknown=("model",))
    finally:
        explainer.close()


def _label_cache(out: Path) -> QueryCache:
    """The run's label cache beside its results: `run` and `estimate` share it, so a run does not pay
    again for what its pilot asked."""
    return QueryCache(f"{out}.cache.sqlite", if_damaged="set aside")  # only labels: a damaged one is begun again


async def _estimate(args: argparse.Namespace) -> int:
    """`llm-anchors estimate`: a seeded pilot under the run's cap (journaled beside ``--out``, refused
    where `run` would refuse), its labels in the run's cache, the rest forecast."""
    texts = read_inputs(args.input, args.format, args.text_field, args.text_column)
    model = Model(args)
    if (memory := _memory_dir(args)) is not None:
        check_memory_dir(memory)
    with ResultsFile(Path(args.out)) as results:
        results.check_inputs(texts)
        journal = results.check_journal()
        try:
            with _stopped_after_spending(_journaled(journal), _kept_beside(journal)):
                forecast = await _pilot(args, model, texts, results)
        except _Stopped as stopped:
            return stopped.code
    print(hide(json.dumps(forecast.to_dict()) if args.json else forecast.summary()))
    return EXIT_CAP if forecast.partial else 0


async def _pilot(args: argparse.Namespace, model: Model, texts: list[str], results: ResultsFile) -> Forecast:
    with (
        results.open_budget(max_usd=args.max_usd, max_queries=args.max_queries) as budget,
        backend(args) as (base_urls, name, embedded),
        contextlib.closing(_label_cache(results.path)) as cache,
    ):
        clf = model.classifier(base_urls, name, embedded=embedded)
        identity = await model_identity(clf, embedded)
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
    args: argparse.Namespace, model: Model, memory: str | None, texts: list[str], results: ResultsFile
) -> RunReport:
    """`llm-anchors run --ray`: the same run, its inputs spread over Ray workers."""
    from ..distributed.pool import RayPool, import_ray
    from ..distributed.run import explain_resumable_on_ray

    import_ray()
    _label_cache(results.path).close()  # a damaged cache is set aside here, once, not by every worker
    address = None if args.ray == "local" else args.ray
    options = {
        "max_usd": args.max_usd, "max_queries": args.max_queries, "max_usd_per_input": args.max_usd_per_text,
        "journal": results.check_journal(), "memory_dir": memory, "address": address,
    }  # fmt: skip
    with backend(args) as (base_urls, name, embedded):
        identity = await model_identity(model.classifier(base_urls, name, embedded=embedded), embedded)
        make = functools.partial(_ray_explainer, args, model, base_urls, name, embedded, str(results.path.resolve()))
        async with RayPool(make, workers=args.workers, **options) as pool:
            budget = pool.budget
            assert budget is not None
            with ProgressBar(len(texts), len(results.records), spent=lambda: budget.report().settled) as bar:
                return await explain_resumable_on_ray(pool, texts, results, on_result=bar.update, model=identity)


def _ray_explainer(
    args: argparse.Namespace, model: Model, base_urls: list[str], name: str, embedded: bool, out: str
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
