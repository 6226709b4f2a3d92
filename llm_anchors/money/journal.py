"""A budget's journal: an append-only JSON-lines record of its reserve/settle/release steps, and its replay."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .._files import JsonLines
from .charge import Charge

__all__ = ["Journal", "JournalState", "plain", "read_journal"]


def plain(charge: Charge) -> dict[str, Any]:
    record = {"q": charge.queries, "p": charge.prompt_tokens, "c": charge.completion_tokens, "usd": str(charge.usd)}
    parts = {"cr": charge.cache_read_tokens, "cw": charge.cache_write_tokens, "rt": charge.reasoning_tokens,
             "d": charge.disputed}  # fmt: skip
    saved = {"sv": str(charge.saved_by_caching)} if charge.saved_by_caching else {}
    return {**record, **{k: v for k, v in parts.items() if v}, **saved}


_KINDS = {"r": "reserve", "s": "settle", "x": "release"}


def _count(record: dict[str, Any], key: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be an integer >= 0, got {value!r}")
    return value


def _dollars(record: dict[str, Any], key: str) -> Decimal:
    value = record.get(key, "0")
    try:
        dollars = Decimal(value) if isinstance(value, str) else None
    except ArithmeticError:
        dollars = None
    if dollars is None or not dollars.is_finite() or dollars < 0:
        raise ValueError(f"{key} must be a decimal string >= 0, got {value!r}")
    return dollars


def _charge(record: dict[str, Any]) -> Charge:
    """The charge of a journal record; `ValueError` for anything but counts >= 0 and exact dollars >= 0."""
    if "usd" not in record:
        raise ValueError("no usd")
    read, write, reasoning, disputes = (_count(record, key) if key in record else 0 for key in ("cr", "cw", "rt", "d"))
    return Charge(
        _count(record, "q"), _count(record, "p"), _count(record, "c"), _dollars(record, "usd"),
        cache_read_tokens=read, cache_write_tokens=write, reasoning_tokens=reasoning, disputed=disputes,
        saved_by_caching=_dollars(record, "sv"),
    )  # fmt: skip


@dataclass(frozen=True)
class JournalState:
    """What a journal records: settled spend, reservations never settled (at their worst
    case: the process died with the call in flight), and the reservations made."""

    settled: Charge
    open: Charge
    reservations: int

    @property
    def spent(self) -> Charge:
        """What the journal counts as spent: settled, and open reservations at their worst case."""
        return self.settled + self.open


def read_journal(path: str | os.PathLike[str]) -> JournalState:
    """Replay a budget journal. A last line cut short (the process was killed while writing it,
    before its call was sent) is left out; any other line that is not a record of this
    journal is a `ConfigError` naming the file and the line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the budget journal {path}: {exc.strerror}") from exc
    settled, open_, last = Charge(), {}, 0
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            record = json.loads(line.decode("utf-8"))
            if not isinstance(record, dict) or len([k for k in _KINDS if k in record]) != 1:
                raise ValueError("not one reserve, settle or release record")
            kind = next(k for k in _KINDS if k in record)
            rid = _count(record, kind)
            if kind == "r":
                if rid <= last:
                    raise ValueError(f"reservation {rid} is not after {last}")
                open_[rid], last = _charge(record), rid
            elif rid not in open_:
                raise ValueError(f"{_KINDS[kind]} of reservation {rid}, which is not open")
            elif kind == "s":
                settled = settled + _charge(record)
                del open_[rid]
            else:
                del open_[rid]
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{path}:{number} is not a budget journal record ({exc}): {line[:60]!r}. The journal is what the run "
                "spent; put back the line as it was (a copy, a backup), or move the results aside and start a new "
                "--out"
            ) from None
    return JournalState(settled, sum(open_.values(), Charge()), last)


class Journal(JsonLines):
    """An append-only JSON-lines ledger of a budget's reserve/settle/release steps (`JsonLines`: a line cut
    short dropped before appending; a failed write a `ConfigError`, and every later one)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "the budget journal")
