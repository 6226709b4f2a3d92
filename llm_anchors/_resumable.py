"""A dataset explained as a resumable, budgeted run.

Each finished explanation is appended to a JSON-lines results file (its
input's index, a hash of the input, the explanation and, for MAnchors, the
memory entry it stored) and flushed, so a killed run loses at most the
inputs in flight. Starting the run again skips what the file holds, puts
the remembered entries the saved memory lacks back in it, and explains
the rest with the same seeds, so it ends with the results an uninterrupted
run gives. The spend of the whole run is capped by a journaled `Budget`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ._budget import Budget, Charge
from ._classifier import require_stable_identity
from ._exceptions import BudgetExceeded, ConfigError
from ._explainer import AnchorsExplainer
from ._explanation import Explanation
from ._manchors import MAnchorsExplainer
from ._memory import MemoryEntry, entry_from_dict

__all__ = [
    "ResultsFile", "RunReport", "explain_resumable", "input_hash", "missing_entries", "read_results", "record_stream",
]  # fmt: skip


def input_hash(text: Any) -> str:
    """A short stable hash of an input (its JSON, or its str)."""
    try:
        raw = json.dumps(text, sort_keys=True, ensure_ascii=False)
    except TypeError:
        raw = str(text)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


class ResultsFile:
    """``results.jsonl``: one JSON object per finished input, appended and flushed.

    A last line cut short (a killed process) is dropped when the file is
    opened, so that input is explained again; a damaged line before it is
    a `ConfigError` (the file is not ours, or was edited).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[int, dict[str, Any]] = {}
        self._read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the run)

    def _read(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        self.records, size = _parse(self.path, data)
        if size < len(data):
            warnings.warn(f"{self.path}: dropping a last line cut short; that input is explained again", stacklevel=3)
            self.path.write_bytes(data[:size])

    def append(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, default=str) + "\n")
        self._handle.flush()
        self.records[int(record["index"])] = record

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def todo(self, texts: Sequence[Any]) -> list[int]:
        """The indices of ``texts`` not explained yet; `ConfigError` if a recorded
        result is of another input (same index, another hash): the input file changed."""
        for index, record in self.records.items():
            if index >= len(texts) or record.get("input_sha256") != input_hash(texts[index]):
                raise ConfigError(
                    f"{self.path} holds a result for input {index} that is not this input: "
                    "the input file changed since; write to a new --out"
                )
        return [i for i in range(len(texts)) if i not in self.records]

    def explanations(self) -> list[tuple[int, Explanation]]:
        """Every recorded explanation, by input index."""
        return [(i, Explanation.from_json(json.dumps(r["explanation"]))) for i, r in sorted(self.records.items())]


def read_results(path: str | Path) -> dict[int, dict[str, Any]]:
    """A results file's records by input index, in the order they were written, without
    changing the file (a last line cut short is left out, with a warning)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the results file {path}: {exc.strerror}") from exc
    records, size = _parse(path, data)
    if size < len(data):
        warnings.warn(f"{path}: leaving out a last line cut short (a run still going, or killed)", stacklevel=2)
    return records


def _parse(path: Path, data: bytes) -> tuple[dict[int, dict[str, Any]], int]:
    """The records in a results file's bytes, and the size of its whole lines: less than
    ``len(data)`` when the last line was cut short. A damaged line before it is a `ConfigError`."""
    lines = data.split(b"\n")
    whole, tail = lines[:-1], lines[-1]
    records: dict[int, dict[str, Any]] = {}
    size = 0
    for number, line in enumerate(whole, 1):
        try:
            record = json.loads(line)
            records[int(record["index"])] = record
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(whole) and not tail:  # the last line, cut inside its JSON
                return records, size
            raise ConfigError(f"{path}:{number} is not a results line: {line[:60]!r}") from exc
        size += len(line) + 1
    return records, size


@dataclass
class RunReport:
    """Where a run stands: inputs done (this time and before), what it spent, why it stopped."""

    total: int
    done_before: int
    done_now: int = 0
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
        return (
            f"{self.done:,}/{self.total:,} inputs explained ({self.done_now:,} now, {self.done_before:,} before); "
            f"spent {spent} in all{why}"
        )


async def explain_resumable(
    explainer: AnchorsExplainer,
    texts: Sequence[Any],
    results: ResultsFile,
    *,
    memory_dir: str | Path | None = None,
    run_budget: Budget | None = None,
    budget_per_input: Callable[[], Budget | None] | None = None,
    concurrent_inputs: int = 1,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
) -> RunReport:
    """Explain ``texts`` into ``results``, skipping the inputs it already holds.

    ``run_budget`` (the explainer's budget, typically journaled) caps the
    whole run: when it refuses a call the explanation it cut short is not
    recorded, the run stops with ``stopped="budget"``, and the same call
    with a higher cap carries on. A MAnchors explainer's memory is loaded
    from ``memory_dir`` if saved there, completed from the results file and
    saved (atomically) every ``save_every`` inputs and at the end, however
    the run ends.
    """
    todo = results.todo(texts)
    report = RunReport(len(texts), len(results.records))
    manchors = explainer if isinstance(explainer, MAnchorsExplainer) else None
    saving = manchors if memory_dir is not None else None
    if saving is not None and memory_dir is not None:  # checked before any work, not at the first save
        require_stable_identity(saving.classifier, f"a memory saved to {memory_dir}")
        await asyncio.to_thread(_restore_memory, saving, Path(memory_dir), results)
    remembered = len(manchors.memory) if manchors is not None else 0

    def new_entries() -> list[MemoryEntry]:
        nonlocal remembered
        if manchors is None:
            return []
        entries, remembered = manchors.memory.entries[remembered:], len(manchors.memory)
        return entries

    async def save() -> None:
        if saving is not None and memory_dir is not None:
            await asyncio.to_thread(saving.save, memory_dir)

    stream = explainer.explain_stream(
        (texts[i] for i in todo), concurrent_inputs=concurrent_inputs, budget_per_input=budget_per_input
    )
    try:
        await record_stream(
            stream, texts, todo, results, report, run_budget=run_budget, new_entries=new_entries,
            save=save, save_every=save_every, on_result=on_result,
        )  # fmt: skip
    finally:
        if saving is not None and memory_dir is not None:
            saving.save(memory_dir)
    return report


async def record_stream(
    stream: AsyncIterator[Explanation],
    texts: Sequence[Any],
    todo: Sequence[int],
    results: ResultsFile,
    report: RunReport,
    *,
    run_budget: Budget | None = None,
    new_entries: Callable[[], list[MemoryEntry]] = list,
    save: Callable[[], Awaitable[None]] | None = None,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
) -> None:
    """Append each explanation of ``stream`` (of the inputs ``todo`` of ``texts``, in
    order) to ``results``, with the memory entries ``new_entries`` says it stored,
    counting it in ``report``; ``save`` the memory every ``save_every`` inputs.

    When ``run_budget`` refused a call, the explanation it cut short is not
    recorded and the run stops with ``report.stopped = "budget"``.
    """
    refused_before = run_budget.report().refused if run_budget is not None else 0
    started = time.perf_counter()
    try:
        position = 0
        async for exp in stream:
            index = todo[position]
            position += 1
            if exp.meta.budget_exhausted and run_budget is not None and run_budget.report().refused > refused_before:
                report.stopped = "budget"
                break
            results.append(_record(index, texts[index], exp, new_entries()))
            report.done_now += 1
            report.memory_hits += bool(exp.meta.memory_hit)
            report.elapsed_s = time.perf_counter() - started
            if on_result is not None:
                on_result(index, exp, report)
            if save is not None and report.done_now % save_every == 0:
                await save()
    except BudgetExceeded:  # refused before the input had a label (its first query): no rule to return
        if run_budget is None or run_budget.report().refused == refused_before:
            raise
        report.stopped = "budget"
    except asyncio.CancelledError:
        report.stopped = "interrupted"
        raise
    finally:
        if (aclose := getattr(stream, "aclose", None)) is not None:
            await aclose()  # the inputs it still explains end first, so their spend is counted
        report.elapsed_s = time.perf_counter() - started
        if run_budget is not None:
            report.spent = run_budget.settled


def _record(index: int, text: Any, exp: Explanation, entries: list[MemoryEntry]) -> dict[str, Any]:
    """The results file's line for one finished input."""
    return {
        "index": index,
        "input_sha256": input_hash(text),
        "explanation": json.loads(exp.to_json()),
        "memory_entries": [asdict(e) for e in entries],
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
    if missing := missing_entries(results, explainer.memory.entries):
        vectors = explainer.entry_vectors(missing)
        for entry, vector in zip(missing, vectors, strict=True):
            explainer.memory.add(entry, vector)
