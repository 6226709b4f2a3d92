"""The query cache: a text is classified once per classifier, and optionally
never again across runs (SQLite)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from .._exceptions import ConfigError, SetAsideWarning
from .._files import set_aside
from .._secrets import hide
from ..models.classifier import Label, Probabilities

__all__ = ["CacheWriteWarning", "QueryCache"]


class CacheWriteWarning(RuntimeWarning):
    """A persisted query cache could not write: its labels are kept in memory only."""


class QueryCache:
    """Labels already obtained, keyed by (classifier identity, text), with the probabilities the
    classifier gave the labels, when it gives them (`Batch.probabilities`).

    One cache may be shared by several explainers: a perturbation that
    another explanation already paid for is never paid twice. With
    ``path`` the labels also go to a SQLite file, so a later run (another
    process) pays nothing for what an earlier one asked. Labels must be
    str, int, float, bool, None or tuples of them to be persisted, and come
    back as they were (a tuple as a tuple).
    ``enabled=False`` makes a cache that remembers nothing: every sample
    is a query (the baseline for measuring what the cache saves).
    ``max_entries`` bounds what is held in memory (least recently used
    dropped first; a persisted label is then read back from SQLite): a
    long stream of explanations sends millions of distinct perturbations,
    ~300 bytes each. None: unbounded.

    When SQLite refuses a write (a read-only file, a database another
    connection holds locked, a label that is not a JSON value) the labels
    stay in memory, one `CacheWriteWarning` says so, and the cache stops
    writing to disk (``write_error`` holds the reason): an explanation never
    fails, nor waits, because its labels could not be persisted. A file that
    is not a cache (garbage, malformed, a folder) is a `ConfigError`, or with
    ``if_damaged="set aside"`` (a run's own cache) renamed beside it, said
    (`SetAsideWarning`), and a new cache begun.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        enabled: bool = True,
        max_entries: int | None = 1_000_000,
        if_damaged: Literal["refuse", "set aside"] = "refuse",
    ) -> None:
        if path is not None and not enabled:
            raise ConfigError("a disabled cache cannot be persisted")
        if max_entries is not None and max_entries < 1:
            raise ConfigError(f"max_entries must be >= 1 or None, got {max_entries}")
        self.enabled = enabled
        self.max_entries = max_entries
        self._labels: OrderedDict[tuple[str, str], _Answer] = OrderedDict()
        self._dropped = False  # has memory let go of a label that SQLite still holds?
        self.path = Path(path) if path is not None else None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.write_error: str | None = None
        if self.path is not None and if_damaged == "set aside":
            self._open_or_set_aside(self.path)
        elif self.path is not None:
            self._open(self.path)

    def _open_or_set_aside(self, path: Path) -> None:
        """Open ``path``; a damaged one (not a database, malformed, a folder) is set aside, said, and a new
        one begun: the cache holds only labels, which are asked again when needed."""
        try:
            self._open(path)
        except _Damaged as exc:
            self._labels.clear()
            try:
                moved = set_aside(path, "-wal", "-shm")
            except OSError as error:
                raise ConfigError(f"cannot use {path} as a query cache: {exc}; nor set it aside: {error}") from None
            warnings.warn(f"query cache {path} was damaged ({exc}): set aside as {moved.name}, a new one begun; "
                          "its labels are asked again when needed", SetAsideWarning, stacklevel=3)  # fmt: skip
            self._open(path)

    def _open(self, path: Path) -> None:
        if path.is_dir():
            raise _Damaged(f"cannot use {path} as a query cache: it is a folder")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=2.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS labels"
                " (classifier TEXT, text TEXT, label TEXT, probabilities TEXT, PRIMARY KEY (classifier, text))"
            )
            columns = [row[1] for row in self._db.execute("PRAGMA table_info(labels)")]
            if "probabilities" not in columns:  # a cache written before labels had probabilities
                self._db.execute("ALTER TABLE labels ADD COLUMN probabilities TEXT")
            rows = self._db.execute("SELECT classifier, text, label, probabilities FROM labels"
                                    " ORDER BY rowid DESC LIMIT ?", (self.max_entries or -1,))  # fmt: skip
            loaded = list(rows)
            for classifier, text, label, probabilities in reversed(loaded):
                self._labels[(classifier, text)] = (_decode(label), _decode_probabilities(probabilities))
            self._dropped = len(loaded) == self.max_entries  # maybe more on disk
        except (KeyError, TypeError, ValueError) as exc:  # a label that is not ours
            self.close()
            raise _Damaged(f"cannot use {path} as a query cache: a label it holds is not one ({exc!r})") from exc
        except sqlite3.OperationalError as exc:  # locked, busy, cannot be opened: nothing said of the file
            self.close()
            raise ConfigError(f"cannot use {path} as a query cache: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # not a database, malformed
            self.close()
            raise _Damaged(f"cannot use {path} as a query cache: {exc}") from exc
        except OSError as exc:
            self.close()
            raise ConfigError(f"cannot use {path} as a query cache: {exc}") from exc

    def __len__(self) -> int:
        """Labels held in memory."""
        return len(self._labels)

    def get(self, classifier: str, text: str) -> tuple[bool, Label]:
        """Whether ``text``'s label by ``classifier`` is known, and the label."""
        answer = self.answer(classifier, text)
        return (False, None) if answer is None else (True, answer[0])

    def answer(self, classifier: str, text: str) -> _Answer | None:
        """``text``'s label by ``classifier`` and the probabilities it gave (None: it gives none); None
        when the label is not known."""
        key = (classifier, text)
        if key in self._labels:
            self._labels.move_to_end(key)
            return self._labels[key]
        if self._db is not None and self._dropped:  # dropped from memory, maybe on disk
            try:
                with self._lock:
                    row = self._db.execute(
                        "SELECT label, probabilities FROM labels WHERE classifier = ? AND text = ?",
                        (hide(classifier), hide(text)),  # as written: no credential on disk
                    ).fetchone()
                answer = None if row is None else (_decode(row[0]), _decode_probabilities(row[1]))
            except (sqlite3.Error, KeyError, TypeError, ValueError):
                answer = None  # unreadable now: a miss, asked again
            if answer is not None:
                self._remember(key, answer)
            return answer
        return None

    def labels(self, classifier: str) -> dict[str, Label]:
        """Every text labelled by ``classifier`` still held in memory, with its label."""
        return {text: answer[0] for (who, text), answer in self._labels.items() if who == classifier}

    def _remember(self, key: tuple[str, str], answer: _Answer) -> None:
        self._labels[key] = answer
        self._labels.move_to_end(key)
        if self.max_entries is not None:
            while len(self._labels) > self.max_entries:
                self._labels.popitem(last=False)
                self._dropped = True

    def put(self, classifier: str, text: str, label: Label) -> None:
        self.put_many(classifier, [(text, label)])

    def put_many(
        self,
        classifier: str,
        items: Iterable[tuple[str, Label]],
        probabilities: Sequence[Probabilities | None] | None = None,
    ) -> None:
        """Remember each (text, label) of ``items``, with the probabilities given, one per item."""
        pairs = list(items)
        given = probabilities if probabilities is not None else [None] * len(pairs)
        rows = [(text, (label, p)) for (text, label), p in zip(pairs, given, strict=True)]
        for text, answer in rows:
            self._remember((classifier, text), answer)
        if self._db is not None and rows and self.write_error is None:
            self._persist(classifier, rows)

    def _persist(self, classifier: str, rows: list[tuple[str, _Answer]]) -> None:
        assert self._db is not None
        with self._lock:
            try:
                who = hide(classifier)  # no credential on disk: a text holding one is stored without it
                encoded = [(who, hide(text), _encode(label), _encode_probabilities(p)) for text, (label, p) in rows]
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO labels VALUES (?, ?, ?, ?)", encoded)
                self._db.execute("COMMIT")
            except (sqlite3.Error, TypeError, ValueError, OSError) as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                self.write_error = f"{type(exc).__name__}: {exc}"
        if self.write_error is not None:
            warnings.warn(
                f"query cache {self.path}: labels kept in memory only, no longer written to disk ({self.write_error})",
                CacheWriteWarning,
                stacklevel=3,
            )

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


_Answer = tuple[Label, Probabilities | None]
"""A text's label, and the probabilities its classifier gave (None: it gives none)."""


class _Damaged(ConfigError):
    """A persisted cache that is not one (garbage, malformed, a folder): it may be set aside."""


def _encode(label: Label) -> str:
    """A label as JSON that keeps its type: a tuple is ``{"tuple": [...]}`` (JSON would make it a list)."""
    return json.dumps(_plain(label), allow_nan=False)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"tuple": [_plain(v) for v in value]}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"label {value!r} is not a str, number, bool, None or tuple of them")


def _decode(raw: str) -> Label:
    label: Label = _value(json.loads(raw))
    return label


def _value(obj: Any) -> Any:
    if isinstance(obj, dict):
        return tuple(_value(v) for v in obj["tuple"])
    return obj


def _encode_probabilities(probabilities: Probabilities | None) -> str | None:
    """Probabilities as JSON pairs [label, p] (a label need not be a str, a JSON key must)."""
    if probabilities is None:
        return None
    return json.dumps([[_plain(label), float(p)] for label, p in probabilities.items()], allow_nan=False)


def _decode_probabilities(raw: str | None) -> Probabilities | None:
    if raw is None:
        return None
    return {_value(label): float(p) for label, p in json.loads(raw)}
