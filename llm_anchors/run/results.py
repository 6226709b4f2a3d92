"""A run's results file and what keeps it honest.

Everything a run keeps lives beside its results file ``OUT``:

    OUT                  a first line with the run's configuration, then one JSON
                         line per finished input (its explanation, or why it failed)
    OUT.lock             held while a run writes OUT: one writer at a time
    OUT.budget.jsonl     the spend journal: every reservation before its call goes out
    OUT.memory/          MAnchors' memory, saved every few inputs
    OUT.cache.sqlite     labels already paid for (the CLI's)

`ResultsFile` holds the lock, records the configuration and refuses another,
checks the journal against the results (missing or cut: refused), and
appends lines, flushed, so a killed run loses at most the inputs in flight.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .._files import JsonLines, open_lock
from .._version import __version__
from ..explain.explanation import Explanation
from ..money.budget import Budget
from ..money.charge import Charge
from ..money.journal import read_journal

__all__ = ["ResultsFile", "hold_lock", "input_hash", "read_results"]


def input_hash(text: Any) -> str:
    """A short stable hash of an input (its JSON, or its str); any str, even one holding a lone surrogate."""
    try:
        raw = json.dumps(text, sort_keys=True, ensure_ascii=False)
    except TypeError:
        raw = str(text)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ResultsFile:
    """``OUT``: the run's configuration, then one JSON object per finished input, appended and flushed.

    Opening it takes ``OUT.lock`` (a second run on the same ``OUT`` is a
    `ConfigError`, before it spends anything). A last line cut short (a
    killed process) is dropped, so that input is explained again; a damaged
    line before it is a `ConfigError` (the file is not ours, or was edited).
    A line is an explanation or, for an input that has none, the reason
    (``failed``): it cannot be explained, or (``"fault": true``) its model
    calls failed past their retries, which the next run retries.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config: dict[str, Any] | None = None
        self.records: dict[int, dict[str, Any]] = {}
        self._checked: Sequence[Any] | None = None  # the inputs the records were checked against
        self._broken = ""
        if self.path.is_dir():
            raise ConfigError(f"{self.path} is a directory: --out names the results file")
        self._lock = hold_lock(Path(f"{self.path}.lock"))
        try:
            self._read()
            self._lines = JsonLines(self.path, "the results file", then=_MAKE_ROOM)
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

    def check_config(self, config: Mapping[str, Any], *, unknown: Sequence[str] = ()) -> None:
        """Record ``config`` (see `run_config`) in a new results file; refuse, naming what
        differs, to add to one written with another. ``unknown``: keys not known yet (a server's
        identity before it starts), left out of the comparison; a new file is then not written to."""
        config = json.loads(json.dumps(config, default=str))
        if self.config is None and self.records:
            raise ConfigError(f"{self.path} holds results but no run configuration: write to a new --out")
        if self.config is None:
            if not unknown:
                self._write({"run": {"config": config, "llm_anchors": __version__}})
                self.config = dict(config)
            return
        recorded = {k: v for k, v in self.config.items() if k not in unknown}
        if differences := _differences(recorded, {k: v for k, v in config.items() if k not in unknown}):
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
        self._lines.write(record)

    def close(self) -> None:
        try:
            self._lines.close()
        finally:
            self._lock.close()

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_inputs(self, texts: Sequence[Any]) -> None:
        """`ConfigError` if a recorded result is of another input (same index, another hash): the input file
        changed. The same ``texts`` are checked once (every later line is of them: this run writes it)."""
        if texts is self._checked:
            return
        for index, record in self.records.items():
            if index >= len(texts) or record.get("input_sha256") != input_hash(texts[index]):
                raise ConfigError(
                    f"{self.path} holds a result for input {index} that is not this input: "
                    "the input file changed since; write to a new --out"
                )
        self._checked = texts

    def todo(self, texts: Sequence[Any]) -> list[int]:
        """The indices of ``texts`` not explained yet, nor recorded as failed (see `check_inputs`)."""
        self.check_inputs(texts)
        return [i for i in range(len(texts)) if i not in self.records]

    @property
    def failed(self) -> dict[int, str]:
        """The inputs recorded as impossible to explain, with the reason."""
        return {i: str(r["failed"]) for i, r in self.records.items() if "failed" in r}

    def retry(self, indices: Sequence[int]) -> None:
        """Forget the failed lines of ``indices`` (explainable now: a fault, or a higher ``max_words``):
        the run explains them, and their explanations are the lines that count."""
        for i in indices:
            if "failed" in self.records.get(i, {}):
                del self.records[i]

    def explanations(self) -> list[tuple[int, Explanation]]:
        """Every recorded explanation, by input index."""
        return [
            (i, Explanation.from_mapping(r["explanation"]))
            for i, r in sorted(self.records.items())
            if "explanation" in r
        ]


_MAKE_ROOM = ": the explanations written so far are kept; make room and run the same command again"


def hold_lock(path: Path, held: Callable[[str], str] | None = None) -> Any:
    """Hold ``path`` locked (flock) for the run; `ConfigError` naming the holder when another run does
    (``held(process)``: what the message says; by default, that it writes the results file)."""
    handle = open_lock(path)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        if held is not None:
            raise ConfigError(held(holder)) from None
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
