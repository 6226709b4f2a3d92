"""A damaged file or folder of a run, set aside (never deleted) so the run can rebuild it."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["aside", "set_aside"]


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
