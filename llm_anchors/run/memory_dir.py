"""A memory directory (``--memory DIR``; a run's ``OUT.memory``): MAnchors' memory kept across processes.

One run (or `explain`) holds it at a time (``DIR/LOCK``): a second is refused before it spends. A saved
memory that cannot be read (`DamagedMemoryError`) is set aside inside the directory, never deleted, said
(`SetAsideWarning`), and rebuilt: a run's from its results file, which records every entry. For
`explain`, the directory also keeps the explanations it made (``DIR/explained.jsonl``), so explaining the
same text again is answered at no query, as an exact repeat within one run is.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._checks import decoded
from .._exceptions import ConfigError, SetAsideWarning
from .._files import JsonLines, aside
from ..explain.explanation import Explanation
from ..explain.manchors import MAnchorsExplainer
from ..memory.store import DamagedMemoryError, MemoryEntry, saved_entries
from ..propose.memory import MemoryProposer
from .results import hold_lock

__all__ = [
    "EXPLAINED", "check_memory_dir", "kept_in", "load_memory", "lock_memory", "memory_saved", "missing", "put_back",
    "save_memory", "set_memory_aside",
]  # fmt: skip

EXPLAINED = "explained.jsonl"
"""`explain --memory DIR`'s explanations, one JSON line each: the text and its explanation."""


def check_memory_dir(directory: str | os.PathLike[str]) -> None:
    """`ConfigError` unless ``directory`` can hold a memory: it is made if need be, and a file is
    written there and removed (permissions alone do not say: root may write anywhere but /proc)."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"the memory {path} is a file, not a directory: give --memory a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"the memory {path} cannot be written ({exc.strerror or exc})") from None


def lock_memory(directory: str | os.PathLike[str]) -> Any:
    """Hold a memory directory for one run (``DIR/LOCK``, released when the handle is closed): a second
    run on it is a `ConfigError` before it spends, so no run's entries are overwritten by another's."""
    where = Path(directory)
    return hold_lock(where / "LOCK", lambda holder: (
        f"another run is using the memory {where} (process {holder}): wait for it, or give this run another "
        "--memory"))  # fmt: skip


def set_memory_aside(directory: Path, why: Exception, source: str = "the results file") -> Path:
    """Set a memory that cannot be read aside (its CURRENT and generations, into ``memory.damaged-…``
    inside ``directory``: the run's lock stays) and say so (`SetAsideWarning`; ``source``: what rebuilds
    it); the folder it went to."""
    moved = aside(directory / "memory")
    kept = [p for p in directory.iterdir() if p.name == "CURRENT" or p.name.startswith("gen-")]
    moved.mkdir()
    for path in kept:
        os.replace(path, moved / path.name)
    warnings.warn(f"the memory {directory} cannot be read ({why}): set aside in {moved}, and rebuilt from {source}",
                  SetAsideWarning, stacklevel=3)  # fmt: skip
    return moved


def load_memory(load: Callable[[Path], object], directory: str | os.PathLike[str], source: str) -> None:
    """``load(directory)`` (an explainer's `load`, or a look at what is saved) when a memory is saved
    there; one that cannot be read is set aside (`set_memory_aside`; ``source``: what rebuilds it)."""
    path = Path(directory)
    if not (path / "CURRENT").exists():
        return
    try:
        load(path)
    except DamagedMemoryError as exc:
        set_memory_aside(path, exc, source)


def missing(recorded: Sequence[MemoryEntry], known: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """The entries of ``recorded`` that ``known`` lacks (stored after the memory's last save), in order."""
    have = {(e.query, e.rule_positions) for e in known}
    return [e for e in recorded if (e.query, e.rule_positions) not in have]


def remembering(explainer: MAnchorsExplainer) -> MemoryProposer:
    """``explainer``'s memory; a `ConfigError` when it is off (a memory directory needs one)."""
    if explainer.memory_proposer is None:
        raise ConfigError("a memory directory needs MAnchors' memory on (memory=None, --no-memory: it is off)")
    return explainer.memory_proposer


def put_back(explainer: MAnchorsExplainer, recorded: Sequence[MemoryEntry]) -> None:
    """Add to ``explainer``'s memory the entries of ``recorded`` it lacks, in order, with their vectors."""
    memory = remembering(explainer).local
    if lacking := missing(recorded, memory.entries):
        for entry, vector in zip(lacking, explainer.entry_vectors(lacking), strict=True):
            memory.add(entry, vector)


def save_memory(explainer: MAnchorsExplainer, directory: str | os.PathLike[str]) -> None:
    """Save ``explainer``'s memory to ``directory`` (atomically); `ConfigError` when it cannot be written."""
    try:
        explainer.save(directory)
    except OSError as exc:
        raise ConfigError(f"cannot save the memory to {directory}: {exc.strerror or exc}") from exc


def memory_saved(recorded: int, directory: str | os.PathLike[str] | None) -> bool:
    """Whether the memory saved in ``directory`` holds the ``recorded`` entries (None: no memory)."""
    return directory is None or recorded == 0 or saved_entries(directory) >= recorded


@contextlib.contextmanager
def kept_in(
    explainer: MAnchorsExplainer, directory: str | os.PathLike[str]
) -> Iterator[Callable[[Any, Explanation], None]]:
    """``explainer`` with the memory kept in ``directory``, for `explain --memory`: held (`lock_memory`),
    loaded (a memory set aside is rebuilt from the entries ``explained.jsonl`` records), its explanations
    recalled (an exact repeat is answered at no query); yields ``keep(text, explanation)``, which records
    an explanation with the entries it stored, and saves the memory."""
    path = Path(directory)
    check_memory_dir(path)
    with contextlib.closing(lock_memory(path)):
        explained = path / EXPLAINED
        lines = _explained(explained)
        load_memory(explainer.load, path, f"the entries {explained.name} records")
        put_back(explainer, [e for _, _, entries in lines for e in entries])
        memory = remembering(explainer).local
        explainer.recall([(text, raw) for text, raw, _ in lines])
        remembered = len(memory)
        lines_out = JsonLines(explained, "the memory's explanations", then=": the explanations before are kept")

        def keep(text: Any, explanation: Explanation) -> None:
            nonlocal remembered
            new, remembered = memory.entries[remembered:], len(memory)
            if new or not (explanation.meta.memory and explanation.meta.memory.repeat):
                line = {"text": text, "explanation": json.loads(explanation.to_json()),
                        "memory_entries": [asdict(e) for e in new]}  # fmt: skip
                lines_out.write(line)
            save_memory(explainer, path)

        try:
            yield keep
        finally:
            lines_out.close()


def _explained(path: Path) -> list[tuple[Any, Any, list[MemoryEntry]]]:
    """The texts, explanations and memory entries ``path`` holds (a line that cannot be read is left
    out, said)."""
    if not path.exists():
        return []
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            record = json.loads(line)
            entries = [decoded(MemoryEntry, raw) for raw in record.get("memory_entries", ())]
            found.append((record["text"], record["explanation"], entries))
        except (ValueError, KeyError, TypeError, AttributeError):
            warnings.warn(f"{path}:{number} is not an explanation: left out", SetAsideWarning, stacklevel=4)
    return found
