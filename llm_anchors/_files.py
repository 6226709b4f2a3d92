"""A run's files: the one writer of JSON lines (`JsonLines`), lock files never followed through a link
(`open_lock`), and a damaged file or folder set aside (never deleted) so the run can rebuild it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any

from ._exceptions import ConfigError
from ._secrets import hide

__all__ = ["JsonLines", "aside", "open_lock", "set_aside"]


def set_aside(path: str | os.PathLike[str], *also: str) -> Path:
    """Rename ``path`` (a file or a folder) to `aside` of it, with the files named ``NAME`` + each of
    ``also`` (SQLite's ``-wal``, ``-shm``); the new name. Nothing is deleted: the user may still want to
    look at it."""
    source = Path(path)
    target = aside(source)
    os.replace(source, target)
    for suffix in also:
        extra = source.with_name(source.name + suffix)
        if extra.exists():
            os.replace(extra, target.with_name(target.name + suffix))
    return target


def aside(path: Path) -> Path:
    """A name beside ``path`` that nothing has: ``NAME.damaged-YYYYmmdd-HHMMSS`` (``-2``, ``-3``, … after it)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return target


class JsonLines:
    """The one writer of JSON lines (a run's results, a budget's journal, a memory's explanations): opened
    for appending after dropping a last line a killed process or a full disk cut short (so the next line
    is never glued to it), each record one line, flushed, with every known credential hidden (`hide`).
    A write that fails is a `ConfigError`, and so is every later one: what was written stays whole."""

    def __init__(self, path: Path, what: str, then: str = "") -> None:
        self.path = path
        self.what = what
        self.then = then  # what a failed write's message says to do
        self.broken = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _keep_whole_lines(path)
            self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the writer's life)
        except OSError as exc:
            raise ConfigError(f"cannot write {what} {path}: {exc.strerror or exc}") from exc

    def write(self, record: Any) -> None:
        if self.broken:
            raise ConfigError(self.broken)
        try:
            self._handle.write(hide(json.dumps(record, default=str)) + "\n")
            self._handle.flush()
        except OSError as exc:
            self.broken = f"cannot write {self.what} {self.path} ({exc.strerror or exc}){self.then}"
            raise ConfigError(self.broken) from exc

    def close(self) -> None:
        """Close the file. One a write failed on still holds the bytes it could not write, which closing
        fails to flush again: that failure was said (`broken`), not raised twice; a close that fails
        first is a `ConfigError`."""
        try:
            self._handle.close()
        except OSError as exc:
            if not self.broken:
                self.broken = f"cannot write {self.what} {self.path} ({exc.strerror or exc}){self.then}"
                raise ConfigError(self.broken) from exc


def _keep_whole_lines(path: Path) -> None:
    """Drop a last line cut short (no line break after it), so that appending stays readable."""
    if not path.exists():
        return
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        path.write_bytes(whole)


def open_lock(path: Path) -> IO[str]:
    """``path`` opened to read and write (created when missing), never through a symbolic link: a lock
    file that is one is a `ConfigError`, not followed (locking would truncate the file it points to)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise ConfigError(
                f"{path} is a symbolic link: a lock must be a file of its own (remove the link)"
            ) from None
        raise ConfigError(f"cannot create the lock {path}: {exc.strerror or exc}") from exc
    return os.fdopen(fd, "r+", encoding="utf-8")
