"""A dataset explained as a resumable, budgeted run.

Everything a run keeps lives beside its results file ``OUT``:

    OUT                  a first line with the run's configuration, then one JSON
                         line per finished input (its explanation, or why it failed)
    OUT.lock             held while a run writes OUT: one writer at a time
    OUT.budget.jsonl     the spend journal: every reservation before its call goes out
    OUT.memory/          MAnchors' memory, saved every few inputs
    OUT.cache.sqlite     labels already paid for (the CLI's)

A killed run loses at most the inputs in flight; started again it skips what
``OUT`` holds, puts back the memory entries the saved memory lacks, and
explains the rest with the same seeds, so it ends with the results an
uninterrupted run gives. It refuses to go on with another configuration, or
beside a journal that is missing or was cut (its spend would be unknown),
and an input that cannot be explained is a failed line, not a stop.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ._budget import Budget, Charge, SpendCap, read_journal
from ._classifier import require_stable_identity
from ._exceptions import BudgetExceeded, ConfigError, InvalidInputError
from ._explainer import AnchorsExplainer
from ._explanation import Explanation
from ._manchors import MAnchorsExplainer
from ._memory import MemoryEntry, RuleMemory, entry_from_dict
from ._sampler import Sampler
from ._version import __version__

__all__ = [
    "ResultsFile", "RunReport", "explain_resumable", "input_hash", "invalid_reasons", "missing_entries",
    "read_results", "record_stream", "run_config",
]  # fmt: skip

MAY_CHANGE = ("budget", "on_budget", "max_concurrency", "request_size")
"""Settings a resumed run may change: they change what a run spends or how fast, not its explanations."""


def input_hash(text: Any) -> str:
    """A short stable hash of an input (its JSON, or its str); any str, even one holding a lone surrogate."""
    try:
        raw = json.dumps(text, sort_keys=True, ensure_ascii=False)
    except TypeError:
        raw = str(text)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def run_config(explainer: AnchorsExplainer, **more: Any) -> dict[str, Any]:
    """What shapes a run's explanations: the explainer, the model's identity, every search
    and sampler setting, the seed (not caps, concurrency or ``max_words``), and ``more``
    (the model's address, the memory's directory), as plain JSON."""
    settings = {k: v for k, v in explainer.settings().items() if k not in MAY_CHANGE}
    settings["sampler"] = {k: v for k, v in settings["sampler"].items() if k != "max_words"}
    identity = explainer.classifier.identity
    parts = identity.split("|")
    model: Any = dict(p.split(":", 1) for p in parts) if all(":" in p for p in parts) else identity
    config = {"explainer": explainer.name, "classifier": model, "seed": explainer.seed,
              "verify_determinism": explainer.verify_determinism, **settings, **more}  # fmt: skip
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


class ResultsFile:
    """``OUT``: the run's configuration, then one JSON object per finished input, appended and flushed.

    Opening it takes ``OUT.lock`` (a second run on the same ``OUT`` is a
    `ConfigError`, before it spends anything). A last line cut short (a
    killed process) is dropped, so that input is explained again; a damaged
    line before it is a `ConfigError` (the file is not ours, or was edited).
    A line is an explanation or, for an input that cannot be explained, the
    reason (``failed``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config: dict[str, Any] | None = None
        self.records: dict[int, dict[str, Any]] = {}
        self._broken = ""
        if self.path.is_dir():
            raise ConfigError(f"{self.path} is a directory: --out names the results file")
        self._lock = _lock(Path(f"{self.path}.lock"))
        try:
            self._read()
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the run)
        except OSError as exc:
            self._lock.close()
            raise ConfigError(f"cannot write the results file {self.path}: {exc.strerror or exc}") from exc
        except BaseException:
            self._lock.close()
            raise

    @property
    def journal(self) -> Path:
        """The run's spend journal, beside the results."""
        return Path(f"{self.path}.budget.jsonl")

    def _read(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        self.config, self.records, size = _parse(self.path, data)
        if size < len(data):
            warnings.warn(f"{self.path}: dropping a last line cut short; that input is explained again", stacklevel=3)
            self.path.write_bytes(data[:size])

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Record ``config`` (see `run_config`) in a new results file; refuse, naming what
        differs, to add to one written with another."""
        config = json.loads(json.dumps(config, default=str))
        if self.config is None and self.records:
            raise ConfigError(f"{self.path} holds results but no run configuration: write to a new --out")
        if self.config is None:
            self._write({"run": {"config": config, "llm_anchors": __version__}})
            self.config = dict(config)
            return
        if differences := _differences(self.config, config):
            raise ConfigError(
                f"{self.path} was written by a run with another configuration ({'; '.join(differences)}): "
                "run again with the recorded settings, or write to a new --out"
            )

    def check_journal(self) -> Path:
        """The run's journal, once checked to account for every result here: a missing journal
        beside a run that began, or one cut short of what the results record, is a `ConfigError`
        (a run that cannot know what it spent cannot keep its cap)."""
        journal = self.journal
        if not journal.exists():
            if self.config is not None or self.records:
                raise ConfigError(
                    f"{journal}, the spend journal of the run in {self.path}, is missing: what that run spent "
                    "cannot be known, so no cap could hold. Put the journal back, or write to a new --out"
                )
            return journal
        state = read_journal(journal)
        explained = {i: r for i, r in self.records.items() if "explanation" in r}
        after = max(explained, key=lambda i: int(explained[i].get("reservations", 0)), default=None)
        if after is not None and int(explained[after].get("reservations", 0)) > state.reservations:
            raise ConfigError(
                f"{journal} was cut: it records {state.reservations:,} reservations, but the result of input "
                f"{after} was written after reservation {explained[after]['reservations']:,}. Put the whole "
                "journal back, or write to a new --out"
            )
        recorded = sum((_settled(r) for r in explained.values()), Charge())
        if recorded.queries > state.spent.queries or recorded.usd > state.spent.usd:
            raise ConfigError(
                f"{journal} records less spend ({state.spent.queries:,} queries, ${state.spent.usd}) than the "
                f"explanations in {self.path} ({recorded.queries:,} queries, ${recorded.usd}): it is not this run's"
            )
        return journal

    def open_budget(self, max_usd: Any = None, max_tokens: int | None = None, max_queries: int | None = None) -> Budget:
        """The run's cap: a `Budget` on the checked journal, counting what earlier sessions spent."""
        return Budget(max_usd, max_tokens, max_queries, journal=self.check_journal())

    def append(self, record: dict[str, Any]) -> None:
        """Append one line and flush it; a write that fails (a full disk) is a `ConfigError`,
        and so is every later one (a half-written line stays last, dropped when the file is reopened)."""
        self._write(record)
        self.records[int(record["index"])] = record

    def _write(self, record: dict[str, Any]) -> None:
        if self._broken:
            raise ConfigError(self._broken)
        try:
            self._handle.write(json.dumps(record, default=str) + "\n")
            self._handle.flush()
        except OSError as exc:
            self._broken = (
                f"cannot write {self.path} ({exc.strerror or exc}): the explanations written so far are kept; "
                "make room and run the same command again"
            )
            raise ConfigError(self._broken) from exc

    def close(self) -> None:
        try:
            self._handle.close()
        except OSError:
            pass  # a flush that failed already said why
        finally:
            self._lock.close()

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_inputs(self, texts: Sequence[Any]) -> None:
        """`ConfigError` if a recorded result is of another input (same index, another hash): the input file changed."""
        for index, record in self.records.items():
            if index >= len(texts) or record.get("input_sha256") != input_hash(texts[index]):
                raise ConfigError(
                    f"{self.path} holds a result for input {index} that is not this input: "
                    "the input file changed since; write to a new --out"
                )

    def todo(self, texts: Sequence[Any]) -> list[int]:
        """The indices of ``texts`` not explained yet, nor recorded as failed (see `check_inputs`)."""
        self.check_inputs(texts)
        return [i for i in range(len(texts)) if i not in self.records]

    @property
    def failed(self) -> dict[int, str]:
        """The inputs recorded as impossible to explain, with the reason."""
        return {i: str(r["failed"]) for i, r in self.records.items() if "failed" in r}

    def retry(self, indices: Sequence[int]) -> None:
        """Forget the failed lines of ``indices`` (explainable now, with a higher ``max_words``):
        the run explains them, and their explanations are the lines that count."""
        for i in indices:
            if "failed" in self.records.get(i, {}):
                del self.records[i]

    def explanations(self) -> list[tuple[int, Explanation]]:
        """Every recorded explanation, by input index."""
        return [
            (i, Explanation.from_json(json.dumps(r["explanation"])))
            for i, r in sorted(self.records.items())
            if "explanation" in r
        ]


def _lock(path: Path) -> Any:
    """Hold ``path`` locked (flock) for the run; `ConfigError` naming the holder when another run does."""
    try:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held for the run)
    except OSError as exc:
        raise ConfigError(f"cannot create the run's lock {path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise ConfigError(
            f"another run is writing {path.with_suffix('')} (process {holder}): wait for it, or write to another --out"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _differences(recorded: Mapping[str, Any], now: Mapping[str, Any], prefix: str = "") -> list[str]:
    """What differs between two configurations, as ``key: recorded → now`` (nested keys dotted)."""
    found = []
    for key in sorted(set(recorded) | set(now), key=str):
        a, b = recorded.get(key), now.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} → {b!r}")
    return found


def _settled(record: Mapping[str, Any]) -> Charge:
    raw = record.get("explanation", {}).get("meta", {}).get("cost", {}).get("settled", {})
    return Charge(int(raw.get("queries", 0)), usd=Decimal(str(raw.get("usd", "0"))))


def read_results(path: str | Path) -> dict[int, dict[str, Any]]:
    """A results file's lines by input index (explanations and failures), in the order they
    were written, without changing the file (a last line cut short is left out, with a warning)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the results file {path}: {exc.strerror}") from exc
    _, records, size = _parse(path, data)
    if size < len(data):
        warnings.warn(f"{path}: leaving out a last line cut short (a run still going, or killed)", stacklevel=2)
    return records


def _parse(path: Path, data: bytes) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]], int]:
    """The configuration and the records in a results file's bytes, and the size of its whole
    lines: less than ``len(data)`` when the last line was cut short. A damaged line before it
    is a `ConfigError`."""
    lines = data.split(b"\n")
    whole, tail = lines[:-1], lines[-1]
    config: dict[str, Any] | None = None
    records: dict[int, dict[str, Any]] = {}
    size = 0
    for number, line in enumerate(whole, 1):
        try:
            record = json.loads(line)
            if number == 1 and isinstance(record, dict) and "run" in record:
                config = dict(record["run"]["config"])
            else:
                records[int(record["index"])] = record
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(whole) and not tail:  # the last line, cut inside its JSON
                return config, records, size
            raise ConfigError(f"{path}:{number} is not a results line: {line[:60]!r}") from exc
        size += len(line) + 1
    return config, records, size


@dataclass
class RunReport:
    """Where a run stands: inputs done (this time and before), failed, what it spent, why it stopped."""

    total: int
    done_before: int
    done_now: int = 0
    failed: int = 0
    """Inputs recorded as impossible to explain (before and now)."""
    memory_hits: int = 0
    spent: Charge = field(default_factory=Charge)
    stopped: str = ""
    """"" (every input done), "budget" (the run's cap), or "interrupted"."""
    elapsed_s: float = 0.0

    @property
    def done(self) -> int:
        return self.done_before + self.done_now

    def summary(self) -> str:
        spent = f"${self.spent.usd.quantize(Decimal('0.000001'))}, {self.spent.queries:,} queries"
        why = {"": "", "budget": " — stopped: the run's cap is reached", "interrupted": " — interrupted"}[self.stopped]
        failed = f"; {self.failed:,} could not be explained (their lines say why)" if self.failed else ""
        return (
            f"{self.done - self.failed:,}/{self.total:,} inputs explained ({self.done_now:,} now, "
            f"{self.done_before:,} before){failed}; spent {spent} in all{why}"
        )


Stream = AsyncIterator[Explanation | InvalidInputError]


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
    run_budget: SpendCap | None = None,
    budget_per_input: Callable[[], SpendCap | None] | None = None,
    concurrent_inputs: int = 1,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
    model: Mapping[str, Any] | None = None,
) -> RunReport:
    """Explain ``texts`` into ``results``, skipping the inputs it already holds.

    ``run_budget`` (the explainer's budget, from `ResultsFile.open_budget`:
    journaled beside the results) caps the whole run: when it refuses a call
    the explanation it cut short is not recorded, the run stops with
    ``stopped="budget"``, and the same call with a higher cap carries on.
    Without one the run's spend is journaled all the same, uncapped. A MAnchors explainer's memory is
    loaded from ``memory_dir`` if saved there, completed from the results
    file and saved (atomically) every ``save_every`` inputs and at the end,
    however the run ends. ``model``: what identifies the explained model
    beyond its name (its server's address, what it says it serves), kept
    with the run's configuration. An input that cannot be explained is
    recorded as failed and the run goes on.
    """
    results.check_inputs(texts)
    own = results.open_budget() if run_budget is None and explainer.budget is None else None
    if own is not None:  # the spend is journaled, capped or not
        explainer.budget = run_budget = own
    try:
        _check_run_budget(explainer, run_budget, results)
        return await _explain_resumable(
            explainer, texts, results, memory_dir, model, run_budget=run_budget, budget_per_input=budget_per_input,
            concurrent_inputs=concurrent_inputs, save_every=save_every, on_result=on_result,
        )  # fmt: skip
    finally:
        if own is not None:
            explainer.budget = None
            own.close()


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
        check_memory_dir(memory_dir)
        await asyncio.to_thread(_restore_memory, saving, Path(memory_dir), results)
    local = manchors.local_memory if manchors is not None else None
    remembered = len(local) if local is not None else 0

    def new_entries() -> list[MemoryEntry]:
        nonlocal remembered
        if local is None:
            return []
        entries, remembered = local.entries[remembered:], len(local)
        return entries

    async def save() -> None:
        if saving is not None and memory_dir is not None:
            await asyncio.to_thread(_save_memory, saving, str(memory_dir))

    async def reasons(xs: Sequence[Any]) -> list[str]:
        return invalid_reasons(explainer.sampler, xs)

    def stream(todo: list[int]) -> Stream:
        chosen = (texts[i] for i in todo)
        return explainer.explain_stream(
            chosen, concurrent_inputs=concurrent_inputs, budget_per_input=budget_per_input, invalid="yield"
        )

    try:
        return await resume(results, texts, config, reasons, stream, new_entries=new_entries, save=save, **record)
    finally:
        if saving is not None and memory_dir is not None:
            _save_memory(saving, str(memory_dir))


def _check_run_budget(explainer: AnchorsExplainer, run_budget: SpendCap | None, results: ResultsFile) -> None:
    """`ConfigError` unless the explainer's calls reserve on ``run_budget``, journaled beside ``results``."""
    if run_budget is None or explainer.budget is not run_budget:
        raise ConfigError("a run's explainer must spend through the run's budget: give it as run_budget= too")
    if isinstance(run_budget, Budget) and (
        run_budget.journal is None or run_budget.journal.resolve() != results.journal.resolve()
    ):
        raise ConfigError(
            f"a run's budget is journaled beside its results ({results.journal}): use results.open_budget(...)"
        )


def check_memory_dir(directory: str | os.PathLike[str]) -> None:
    """`ConfigError` unless ``directory`` can hold a memory (a directory, or nothing yet, where one can be made)."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"the memory {path} is a file, not a directory: give --memory a directory")
    parent = next((p for p in [path, *path.parents] if p.exists()), Path("."))
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"the memory {path} cannot be written ({parent} is not writable)")


def _save_memory(explainer: MAnchorsExplainer, directory: str) -> None:
    try:
        explainer.save(directory)
    except OSError as exc:
        raise ConfigError(f"cannot save the memory to {directory}: {exc.strerror or exc}") from exc


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
            if isinstance(item, InvalidInputError):
                results.append({"index": index, "input_sha256": input_hash(texts[index]), "failed": str(item)})
                report.done_now += 1
                report.failed += 1
                continue
            state = await ledger() if ledger is not None else None
            if item.meta.budget_exhausted and state is not None and state.refused > refused_before:
                report.stopped = "budget"
                break
            reservations = state.reservations if state is not None else 0
            results.append(_record(index, texts[index], item, new_entries(), reservations))
            report.done_now += 1
            report.memory_hits += bool(item.meta.memory_hit)
            report.elapsed_s = time.perf_counter() - started
            if on_result is not None:
                on_result(index, item, report)
            if save is not None and report.done_now % save_every == 0:
                await save()
    except BudgetExceeded:  # refused before the input had a label (its first query): no rule to return
        if ledger is None or (await ledger()).refused == refused_before:
            raise
        report.stopped = "budget"
    except asyncio.CancelledError:
        report.stopped = "interrupted"
        raise
    finally:
        if (aclose := getattr(stream, "aclose", None)) is not None:
            await aclose()  # the inputs it still explains end first, so their spend is counted
        report.elapsed_s = time.perf_counter() - started
        if ledger is not None:
            report.spent = (await ledger()).settled


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
    have = {(e.query, e.rule_positions) for e in known}
    recorded = [entry_from_dict(raw) for record in results.records.values() for raw in record.get("memory_entries", ())]
    return [e for e in recorded if (e.query, e.rule_positions) not in have]


def _restore_memory(explainer: MAnchorsExplainer, directory: Path, results: ResultsFile) -> None:
    """Load the saved memory and put back the entries recorded after its last save, in the
    order the results file holds them (the order they were stored)."""
    if (directory / "CURRENT").exists():
        explainer.load(directory)
    memory: RuleMemory = explainer.local_memory
    if missing := missing_entries(results, memory.entries):
        vectors = explainer.entry_vectors(missing)
        for entry, vector in zip(missing, vectors, strict=True):
            memory.add(entry, vector)
