"""MAnchors' memory: earlier inputs with their intermediate rules, in HNSW.

An hnswlib index (cosine) over sentence embeddings. A memory belongs to one
explained model (``scope``: its identity: backend, model, prompt, labels);
every entry records the label the model predicted, and a lookup only sees
entries of the same label. Saved as a directory:

    CURRENT            names the complete generation below
    gen-000007/        index.bin (hnswlib), entries.json, vectors.npy

A save writes a new generation, then replaces CURRENT atomically, so a
process killed during a save leaves the previous memory loadable. No
pickle anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._classifier import Label
from ._exceptions import ConfigError

__all__ = ["MemoryEntry", "RuleMemory"]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class MemoryEntry:
    """One remembered input, its intermediate rule and its anchor.

    ``rule_*``: the intermediate rule (words and positions; for tabular and
    image inputs also a descriptor of each rule feature). ``anchor_*``: the
    anchor the explanation returned; ``anchor_keys`` name its features in a
    way comparable across inputs (a lower-cased word, a predicate), empty
    where features have no such name (superpixels).
    """

    text: str
    words: tuple[str, ...]
    label: Label
    rule_positions: tuple[int, ...]
    rule_words: tuple[str, ...]
    precision: float
    coverage: float
    rule_vectors: tuple[tuple[float, ...], ...] = ()
    anchor_positions: tuple[int, ...] = ()
    anchor_words: tuple[str, ...] = ()
    anchor_keys: tuple[str, ...] = ()
    anchor_vectors: tuple[tuple[float, ...], ...] = ()


class RuleMemory:
    """Nearest-neighbour memory of explained inputs (hnswlib, cosine).

    ``embedder_id`` and ``dim`` name the sentence embedder the vectors come
    from and ``scope`` the explained model; a memory saved for another
    embedder or model cannot be loaded for this one.
    """

    def __init__(self, dim: int, embedder_id: str, scope: str, *, ef: int = 64, m: int = 16) -> None:
        try:
            import hnswlib
        except ImportError as exc:
            raise ConfigError("MAnchors' memory needs hnswlib: pip install 'llm-anchors[memory]'") from exc
        self.dim = dim
        self.embedder_id = embedder_id
        self.scope = scope
        self.entries: list[MemoryEntry] = []
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._by_key: dict[tuple[Label, str], list[int]] = {}
        self._hnswlib = hnswlib
        self._ef, self._m = ef, m
        self._index = self._new_index(1024)

    def __len__(self) -> int:
        return len(self.entries)

    def _new_index(self, capacity: int) -> Any:
        index = self._hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(max_elements=capacity, ef_construction=200, M=self._m, random_seed=0)
        index.set_ef(self._ef)
        return index

    def add(self, entry: MemoryEntry, vector: np.ndarray) -> None:
        vector = np.asarray(vector, dtype=np.float32).reshape(1, self.dim)
        if len(self.entries) >= self._index.get_max_elements():
            self._index.resize_index(2 * self._index.get_max_elements())
        self._index.add_items(vector, [len(self.entries)])
        self._file(entry, len(self.entries))
        self.entries.append(entry)
        self._vectors = np.concatenate([self._vectors, vector])

    def _file(self, entry: MemoryEntry, number: int) -> None:
        """Index an entry under the keys of its anchor (see `anchored`)."""
        for key in set(entry.anchor_keys):
            self._by_key.setdefault((entry.label, key), []).append(number)

    def nearest(self, vector: np.ndarray, *, label: Label) -> tuple[MemoryEntry, float] | None:
        """The most similar entry with this label, with its cosine similarity."""
        found = self.neighbours(vector, label=label, k=1)
        return found[0] if found else None

    def neighbours(self, vector: np.ndarray, *, label: Label, k: int) -> list[tuple[MemoryEntry, float]]:
        """The ``k`` most similar entries with this label, most similar first, with their cosine similarity."""
        allowed = {i for i, e in enumerate(self.entries) if e.label == label}
        if not allowed or k < 1:
            return []
        ids, distances = self._index.knn_query(
            np.asarray(vector, dtype=np.float32).reshape(1, self.dim),
            k=min(k, len(allowed)),
            filter=lambda i: i in allowed,
        )
        return [(self.entries[int(i)], float(1.0 - d)) for i, d in zip(ids[0], distances[0], strict=True)]

    def anchored(self, keys: set[str], *, label: Label) -> list[tuple[tuple[str, ...], int]]:
        """Earlier anchors for this label made only of ``keys``, with how many entries found each.

        Ordered shortest first, then most often found, then first found.
        """
        found: dict[frozenset[str], set[int]] = {}
        for key in keys:
            for number in self._by_key.get((label, key), ()):
                anchor = frozenset(self.entries[number].anchor_keys)
                if anchor <= keys:
                    found.setdefault(anchor, set()).add(number)
        ranked = sorted(found.items(), key=lambda kv: (len(kv[0]), -len(kv[1]), min(kv[1])))
        return [(tuple(sorted(anchor)), len(numbers)) for anchor, numbers in ranked]

    # -- persistence ------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write a new generation, then switch CURRENT to it atomically."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        previous = _current(root)
        number = int(previous.name.split("-")[1]) + 1 if previous else 1
        gen = root / f"gen-{number:06d}"
        shutil.rmtree(gen, ignore_errors=True)
        gen.mkdir()
        self._index.save_index(str(gen / "index.bin"))
        np.save(gen / "vectors.npy", self._vectors, allow_pickle=False)
        meta = {
            "format_version": FORMAT_VERSION,
            "embedder": self.embedder_id,
            "dim": self.dim,
            "scope": self.scope,
            "entries": [asdict(e) for e in self.entries],
        }
        (gen / "entries.json").write_text(json.dumps(meta))
        for path in gen.iterdir():
            _fsync(path)
        pointer = root / "CURRENT.tmp"
        pointer.write_text(gen.name)
        _fsync(pointer)
        os.replace(pointer, root / "CURRENT")  # the commit point
        for old in root.glob("gen-*"):
            if old != gen:
                shutil.rmtree(old, ignore_errors=True)
        return gen

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, embedder_id: str, dim: int, scope: str) -> RuleMemory:
        root = Path(directory)
        gen = _current(root)
        if gen is None:
            raise ConfigError(f"{root} holds no saved memory (no CURRENT file)")
        try:
            meta = json.loads((gen / "entries.json").read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read memory {gen}: {exc}") from exc
        if meta.get("format_version") != FORMAT_VERSION:
            raise ConfigError(f"memory {root} has format {meta.get('format_version')}, not {FORMAT_VERSION}")
        if meta.get("embedder") != embedder_id or meta.get("dim") != dim:
            raise ConfigError(
                f"memory {root} was built with {meta.get('embedder')} ({meta.get('dim')} dims), "
                f"not {embedder_id} ({dim} dims)"
            )
        if meta.get("scope") != scope:
            raise ConfigError(f"memory {root} was built for another model: {meta.get('scope')!r}, not {scope!r}")
        memory = cls(dim, embedder_id, scope)
        vectors = np.load(gen / "vectors.npy", allow_pickle=False)
        entries = [_entry(raw) for raw in meta["entries"]]
        if len(vectors) != len(entries):
            raise ConfigError(f"memory {gen} is inconsistent: {len(vectors)} vectors, {len(entries)} entries")
        memory._index = memory._new_index(max(1024, len(entries)))
        memory._index.load_index(str(gen / "index.bin"), max_elements=max(1024, len(entries)))
        memory._index.set_ef(memory._ef)
        memory.entries, memory._vectors = entries, vectors.astype(np.float32)
        for number, entry in enumerate(entries):
            memory._file(entry, number)
        return memory


def _current(root: Path) -> Path | None:
    pointer = root / "CURRENT"
    if not pointer.is_file():
        return None
    gen = root / pointer.read_text().strip()
    return gen if gen.is_dir() else None


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _entry(raw: dict[str, Any]) -> MemoryEntry:
    return MemoryEntry(
        text=str(raw["text"]),
        words=tuple(raw["words"]),
        label=raw["label"],
        rule_positions=tuple(int(p) for p in raw["rule_positions"]),
        rule_words=tuple(raw["rule_words"]),
        precision=float(raw["precision"]),
        coverage=float(raw["coverage"]),
        rule_vectors=tuple(tuple(float(x) for x in v) for v in raw.get("rule_vectors", ())),
        anchor_positions=tuple(int(p) for p in raw.get("anchor_positions", ())),
        anchor_words=tuple(raw.get("anchor_words", ())),
        anchor_keys=tuple(raw.get("anchor_keys", ())),
        anchor_vectors=tuple(tuple(float(x) for x in v) for v in raw.get("anchor_vectors", ())),
    )
