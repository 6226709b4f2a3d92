"""A dataset explained as a resumable, budgeted run (its files: `run.results`).

A killed run loses at most the inputs in flight; started again it skips what
``OUT`` holds, puts back the memory entries the saved memory lacks, and
explains the rest with the same seeds, so it ends with the results an
uninterrupted run gives. It refuses to go on with another configuration, or
beside a journal that is missing or was cut (its spend would be unknown),
and an input that cannot be explained, or whose model calls failed past
their retries (retried by the next run), is a failed line, not a stop. One
process (`explain_resumable`) and a Ray run (`explain_resumable_on_ray`)
share `resume` and `record_stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from .._checks import decoded
from .._exceptions import BudgetExceeded, ClassifierError, ConfigError, InvalidInputError, ServerUnavailableError
from .._secrets import redact
from ..explain.anchors import AnchorsExplainer, InputError
from ..explain.explanation import Explanation
from ..explain.manchors import MAnchorsExplainer
from ..explain.meta import NOT_SHAPING
from ..memory.store import MemoryEntry
from ..models.classifier import require_stable_identity
from ..money.budget import Budget, SpendCap
from ..money.charge import Charge
from ..samplers.base import Sampler
from .memory_dir import check_memory_dir, load_memory, lock_memory, missing, put_back, save_memory
from .results import ResultsFile, input_hash

__all__ = [
    "RunReport", "explain_resumable", "invalid_reasons", "missing_entries", "recorded_entries",
    "record_stream", "resume", "run_config",
]  # fmt: skip


def run_config(explainer: AnchorsExplainer, **more: Any) -> dict[str, Any]:
    """What shapes a run's explanations, as plain JSON: the explainer, the model's identity (its
    parts by name: ``classifier.prompt``, ``classifier.labels``...), every search and sampler
    setting and the seed, not caps, concurrency or ``max_words`` (`NOT_SHAPING`), a chat request's parts a
    report shows (`ChatRequest.shown`); and ``more``
    (``model=``: what tells the model from another under the same name, its server)."""
    settings = {k: v for k, v in asdict(explainer.settings()).items() if k not in NOT_SHAPING}
    settings["sampler"] = {k: v for k, v in settings["sampler"].items() if k != "max_words"}
    identity = explainer.classifier.identity
    parts = identity.split("|")
    model: Any = dict(p.split(":", 1) for p in parts) if all(":" in p for p in parts) else identity
    config = {"explainer": explainer.name, "classifier": model, "seed": explainer.seed, **settings, **more}
    if (request := getattr(explainer.classifier, "request", None)) is not None:
        config["request"] = request.shown()  # what the report says of it: no message's text
    plain: dict[str, Any] = json.loads(json.dumps(config, default=str))
    return plain


def invalid_reasons(sampler: Sampler, texts: Sequence[Any]) -> list[str]:
    """Why each of ``texts`` cannot be explained with ``sampler`` ("" when it can)."""
    reasons = []
    for text in texts:
        try:
            sampler.features(text)
            reasons.append("")
        except InvalidInputError as exc:
            reasons.append(str(exc))
    return reasons


@dataclass
class RunReport:
    """Where a run stands: inputs done (this time and before), failed, what it spent, why it stopped."""

    total: int
    done_before: int
    done_now: int = 0
    failed: int = 0
    """Inputs recorded as impossible to explain (before and now)."""
    failed_now: int = 0
    """Of ``failed``, those recorded now."""
    faulted: int = 0
    """Inputs whose model calls failed past their retries now (recorded, and retried by the next run)."""
    memory_hits: int = 0
    saved_by_caching: Decimal = Decimal(0)
    """What the provider's prompt cache saved on the explanations recorded now."""
    spent: Charge = field(default_factory=Charge)
    """What the run spent in all, every session (``spent.disputed``: calls counted at their worst case or their
    bill, the larger)."""
    passed: str = ""
    """Which cap settled spend passed, by how much ("": none)."""
    stopped: str = ""
    """"" (every input done), "budget" (the run's cap), "server" (its server stopped answering: `why`), or
    "interrupted"."""
    why: str = ""
    """What stopped it, when that needs saying (the server's last error)."""
    elapsed_s: float = 0.0
    in_flight: tuple[int, int] | None = None
    """The texts in flight to the model the run settled on (`Limiter`), and the most a request carried
    then, as its last explanation recorded them; None before any."""

    @property
    def done(self) -> int:
        return self.done_before + self.done_now

    def summary(self) -> str:
        spent = f"${self.spent.usd.quantize(Decimal('0.000001'))}, {self.spent.queries:,} queries"
        if self.spent.cache_read_tokens:
            share = self.spent.cache_read_tokens / max(1, self.spent.prompt_tokens)
            saved = self.saved_by_caching.quantize(Decimal("0.000001"))
            spent += f" ({share:.0%} of the prompt tokens cached, which saved ${saved} now)"
        if self.spent.disputed:
            spent += (f"; {self.spent.disputed:,} calls reported usage that could not be true and count at their "
                      "worst case")  # fmt: skip
        reached = f"settled spend passed the cap ({self.passed})" if self.passed else "the run's cap is reached"
        why = {"": "", "budget": f" — stopped: {reached}", "interrupted": " — interrupted",
               "server": f" — stopped: {self.why}"}[self.stopped]  # fmt: skip
        failed = f"; {self.failed:,} could not be explained (their lines say why)" if self.failed else ""
        if self.faulted:
            failed += (
                f"; {self.faulted:,} failed on the model's errors (their lines say why; the same command retries them)"
            )
        now = self.done_now - self.faulted - self.failed_now
        explained = self.done - self.failed - self.faulted
        pace = ""
        if self.in_flight is not None:
            limit, size = self.in_flight
            pace = f"; requests settled at {limit:,} texts in flight, {size:,} a request"
        return (
            f"{explained:,}/{self.total:,} inputs explained ({now:,} now, {explained - now:,} before){failed}; "
            f"spent {spent} in all{why}{pace}"
        )


Stream = AsyncIterator[Explanation | InputError]


async def resume(
    results: ResultsFile,
    texts: Sequence[Any],
    config: Mapping[str, Any],
    reasons: Callable[[Sequence[Any]], Awaitable[list[str]]],
    stream: Callable[[list[int]], Stream],
    **record: Any,
) -> RunReport:
    """The run itself, in one process or on Ray: check ``config`` against the results, retry
    the failed inputs ``reasons`` now accepts, and record the ``stream`` of the rest."""
    results.check_inputs(texts)
    results.check_config(config)
    failed = sorted(results.failed)
    now = await reasons([texts[i] for i in failed]) if failed else []
    results.retry([i for i, reason in zip(failed, now, strict=True) if not reason])
    todo = results.todo(texts)
    report = RunReport(len(texts), len(results.records), failed=len(results.failed))
    await record_stream(stream(todo), texts, todo, results, report, **record)
    return report


async def explain_resumable(
    explainer: AnchorsExplainer,
    texts: Sequence[Any],
    results: ResultsFile,
    *,
    memory_dir: str | Path | None = None,
    budget_per_input: Callable[[], SpendCap | None] | None = None,
    concurrent_inputs: int = 1,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
    model: Mapping[str, Any] | None = None,
) -> RunReport:
    """Explain ``texts`` into ``results``, skipping the inputs it already holds.

    The explainer's budget (from `ResultsFile.open_budget`: journaled beside
    the results) caps the whole run: when it refuses a call the explanation
    it cut short is not recorded, the run stops with ``stopped="budget"``,
    and the same call with a higher cap carries on. An explainer without one
    spends through an uncapped budget journaled there all the same (each
    input's, the explainer is left as it was given). A MAnchors explainer's memory is
    loaded from ``memory_dir`` if saved there, completed from the results
    file and saved (atomically) every ``save_every`` inputs and at the end,
    however the run ends. ``model``: what identifies the explained model
    beyond its name (its server's address, what it says it serves), kept
    with the run's configuration. An input that cannot be explained is
    recorded as failed and the run goes on.
    """
    results.check_inputs(texts)
    _check_journaled(explainer.budget, results)
    if explainer.budget is None and budget_per_input is not None:
        raise ConfigError("budget_per_input needs the run's budget as their parent: give the explainer one "
                          "from results.open_budget(...)")  # fmt: skip
    with contextlib.ExitStack() as held:
        run_budget = explainer.budget
        if run_budget is None:  # the spend is journaled, capped or not: through each input's budget
            own = held.enter_context(results.open_budget())
            run_budget, budget_per_input = own, lambda: own
        if memory_dir is not None and isinstance(explainer, MAnchorsExplainer):
            check_memory_dir(memory_dir)
            held.enter_context(lock_memory(memory_dir))  # one run a memory: none overwrites another's
        return await _explain_resumable(
            explainer, texts, results, memory_dir, model, run_budget=run_budget, budget_per_input=budget_per_input,
            concurrent_inputs=concurrent_inputs, save_every=save_every, on_result=on_result,
        )  # fmt: skip


async def _explain_resumable(
    explainer: AnchorsExplainer,
    texts: Sequence[Any],
    results: ResultsFile,
    memory_dir: str | Path | None,
    model: Mapping[str, Any] | None,
    *,
    budget_per_input: Callable[[], SpendCap | None] | None,
    concurrent_inputs: int,
    **record: Any,
) -> RunReport:
    manchors = explainer if isinstance(explainer, MAnchorsExplainer) else None
    saving = manchors if memory_dir is not None else None
    config = run_config(explainer, model=dict(model or {}))
    results.check_inputs(texts)
    results.check_config(config)  # before the memory is touched
    if saving is not None and memory_dir is not None:  # checked before any work, not at the first save
        require_stable_identity(saving.classifier, f"a memory saved to {memory_dir}")
        await asyncio.to_thread(_restore_memory, saving, Path(memory_dir), results)
    if manchors is not None:  # what the file holds answers an exact repeat
        manchors.recall([(texts[i], r["explanation"]) for i, r in results.records.items() if "explanation" in r])
    local = manchors.memory_proposer.local if manchors is not None and manchors.memory_proposer else None
    remembered = len(local) if local is not None else 0

    def new_entries() -> list[MemoryEntry]:
        nonlocal remembered
        if local is None:
            return []
        entries, remembered = local.entries[remembered:], len(local)
        return entries

    async def save() -> None:
        if saving is not None and memory_dir is not None:
            await asyncio.to_thread(save_memory, saving, str(memory_dir))

    async def reasons(xs: Sequence[Any]) -> list[str]:
        return invalid_reasons(explainer.sampler, xs)

    def stream(todo: list[int]) -> Stream:
        chosen = (texts[i] for i in todo)
        return explainer.explain_stream(
            chosen, concurrent_inputs=concurrent_inputs, budget_per_input=budget_per_input, errors="yield"
        )

    try:
        return await resume(results, texts, config, reasons, stream, new_entries=new_entries, save=save, **record)
    finally:
        if saving is not None and memory_dir is not None:
            save_memory(saving, str(memory_dir))


def _check_journaled(budget: SpendCap | None, results: ResultsFile) -> None:
    """`ConfigError` unless ``budget`` (the explainer's) is None or journaled beside ``results``."""
    if isinstance(budget, Budget) and (budget.journal is None or budget.journal.resolve() != results.journal.resolve()):
        raise ConfigError(
            f"a run's budget is journaled beside its results ({results.journal}): give the explainer "
            "results.open_budget(...)"
        )


async def record_stream(
    stream: Stream,
    texts: Sequence[Any],
    todo: Sequence[int],
    results: ResultsFile,
    report: RunReport,
    *,
    run_budget: SpendCap | None = None,
    new_entries: Callable[[], list[MemoryEntry]] = list,
    save: Callable[[], Awaitable[None]] | None = None,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
) -> None:
    """Append each explanation of ``stream`` (of the inputs ``todo`` of ``texts``, in
    order) to ``results``, with the memory entries ``new_entries`` says it stored and the
    ledger's reservations so far, counting it in ``report``; an input that cannot be
    explained is appended as failed. ``save`` the memory every ``save_every`` inputs.

    When ``run_budget`` refused a call, the explanation it cut short is not
    recorded and the run stops with ``report.stopped = "budget"``.
    """
    ledger = (lambda: asyncio.to_thread(run_budget.report)) if run_budget is not None else None
    refused_before = (await ledger()).refused if ledger is not None else 0
    started = time.perf_counter()
    try:
        position = 0
        async for item in stream:
            index = todo[position]
            position += 1
            if isinstance(item, InvalidInputError | ClassifierError):
                fault = isinstance(item, ClassifierError) and not isinstance(item, InvalidInputError)
                line = {"index": index, "input_sha256": input_hash(texts[index]), "failed": redact(str(item))}
                results.append(line | ({"fault": True} if fault else {}))
                report.done_now += 1
                report.faulted += fault
                report.failed += not fault
                report.failed_now += not fault
                continue
            state = await ledger() if ledger is not None else None
            if item.meta.budget_exhausted and state is not None and state.refused > refused_before:
                report.stopped = "budget"
                break
            reservations = state.reservations if state is not None else 0
            results.append(_record(index, texts[index], item, new_entries(), reservations))
            report.done_now += 1
            report.memory_hits += bool(item.meta.memory_hit)
            if item.meta.in_flight is not None:
                report.in_flight = item.meta.in_flight
            report.saved_by_caching += item.saved_by_caching
            report.elapsed_s = time.perf_counter() - started
            if on_result is not None:
                on_result(index, item, report)
            if save is not None and report.done_now % save_every == 0:
                await save()
        if position < len(todo):  # the stream ended early: the cap refused an input's first query
            report.stopped = "budget"
    except BudgetExceeded:  # refused before the input had a label (its first query): no rule to return
        if ledger is None or (await ledger()).refused == refused_before:
            raise
        report.stopped = "budget"
    except ServerUnavailableError as exc:  # nothing more is sent: the inputs left are the same command's
        report.stopped, report.why = "server", redact(str(exc))
    except asyncio.CancelledError:
        report.stopped = "interrupted"
        raise
    finally:
        if (aclose := getattr(stream, "aclose", None)) is not None:
            await aclose()  # the inputs it still explains end first, so their spend is counted
        report.elapsed_s = time.perf_counter() - started
        if ledger is not None:
            state = await ledger()
            report.spent, report.passed = state.settled, state.passed


def _record(index: int, text: Any, exp: Explanation, entries: list[MemoryEntry], reservations: int) -> dict[str, Any]:
    """The results file's line for one finished input."""
    return {
        "index": index,
        "input_sha256": input_hash(text),
        "explanation": json.loads(exp.to_json()),
        "memory_entries": [asdict(e) for e in entries],
        "reservations": reservations,
    }


def missing_entries(results: ResultsFile, known: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """The memory entries ``results`` records that are not in ``known`` (stored after
    the memory's last save), in the order stored."""
    return missing(recorded_entries(results), known)


def _restore_memory(explainer: MAnchorsExplainer, directory: Path, results: ResultsFile) -> None:
    """Load the saved memory and put back the entries recorded after its last save, in the
    order the results file holds them (the order they were stored). A saved memory that cannot be read
    is set aside, said, and rebuilt from the results file alone (`load_memory`)."""
    recorded = recorded_entries(results)
    load_memory(explainer.load, directory, f"the {len(recorded):,} entries {results.path.name} records")
    put_back(explainer, recorded)


def recorded_entries(results: ResultsFile) -> list[MemoryEntry]:
    """The memory entries ``results`` records, in the order they were stored."""
    return [
        decoded(MemoryEntry, raw) for record in results.records.values() for raw in record.get("memory_entries", ())
    ]
