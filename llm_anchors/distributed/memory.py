"""One MAnchors memory for a run's Ray workers: a replica in each worker, or one actor.

A worker's explainer looks up and adds through a `Memory` view. Its
additions are held back (`take_added`) and go to the run's memory only when
the coordinator accepts the explanation that made them, so a worker that
dies mid-input adds nothing; a replica receives what the run accepted
since the worker's last input with its next one (`apply`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..memory.store import MemoryEntry, RuleMemory
from ..models.classifier import Label

__all__ = ["ActorMemory", "Entries", "MemoryHolder", "ReplicaMemory", "memory_at"]

Entries = list[tuple[MemoryEntry, np.ndarray]]


def memory_at(dim: int, embedder_id: str, scope: str, directory: str | None) -> RuleMemory:
    """The memory saved in ``directory``, or an empty one."""
    if directory is not None and (Path(directory) / "CURRENT").exists():
        return RuleMemory.load(directory, embedder_id=embedder_id, dim=dim, scope=scope)
    return RuleMemory(dim, embedder_id, scope)


class MemoryHolder:
    """The run's `RuleMemory`, inside a Ray actor (loaded from ``directory`` if saved there)."""

    def __init__(self, dim: int, embedder_id: str, scope: str, directory: str | None) -> None:
        self.memory = memory_at(dim, embedder_id, scope, directory)

    def neighbours(self, vector: np.ndarray, label: Label, k: int) -> list[tuple[MemoryEntry, float]]:
        return self.memory.neighbours(vector, label=label, k=k)

    def anchored(self, keys: set[str], label: Label) -> list[tuple[tuple[str, ...], int]]:
        return self.memory.anchored(keys, label=label)

    def add(self, entries: Entries) -> int:
        for entry, vector in entries:
            self.memory.add(entry, vector)
        return len(self.memory)

    def size(self) -> int:
        return len(self.memory)

    def entries(self) -> list[MemoryEntry]:
        return self.memory.entries

    def save(self, directory: str) -> None:
        self.memory.save(directory)


class _HeldBack:
    """Additions kept for the coordinator, which adds them for the run when it accepts the explanation."""

    def __init__(self) -> None:
        self._added: Entries = []

    def add(self, entry: MemoryEntry, vector: np.ndarray) -> None:
        self._added.append((entry, np.asarray(vector, dtype=np.float32)))

    def take_added(self) -> Entries:
        added, self._added = self._added, []
        return added

    def apply(self, entries: Entries) -> None:
        """Add entries the run accepted (a replica's pull); nothing for a view of the actor."""


class ActorMemory(_HeldBack):
    """A worker's view of the memory actor: every lookup is a call to it."""

    def __init__(self, holder: Any) -> None:
        super().__init__()
        self.holder = holder

    def neighbours(self, vector: np.ndarray, *, label: Label, k: int) -> list[tuple[MemoryEntry, float]]:
        import ray

        found: list[tuple[MemoryEntry, float]] = ray.get(self.holder.neighbours.remote(vector, label, k))
        return found

    def anchored(self, keys: set[str], *, label: Label) -> list[tuple[tuple[str, ...], int]]:
        import ray

        found: list[tuple[tuple[str, ...], int]] = ray.get(self.holder.anchored.remote(keys, label))
        return found


class ReplicaMemory(_HeldBack):
    """A worker's own copy of the run's memory: lookups are local."""

    def __init__(self, dim: int, embedder_id: str, scope: str) -> None:
        super().__init__()
        self.copy = RuleMemory(dim, embedder_id, scope)

    def neighbours(self, vector: np.ndarray, *, label: Label, k: int) -> list[tuple[MemoryEntry, float]]:
        return self.copy.neighbours(vector, label=label, k=k)

    def anchored(self, keys: set[str], *, label: Label) -> list[tuple[tuple[str, ...], int]]:
        return self.copy.anchored(keys, label=label)

    def apply(self, entries: Entries) -> None:
        for entry, vector in entries:
            self.copy.add(entry, vector)
