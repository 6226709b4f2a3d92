"""MAnchors' memory: earlier inputs with their intermediate rules, in HNSW.

An hnswlib index (cosine) over sentence embeddings. A memory belongs to one
explained model (``scope``: its identity: backend, model, prompt, labels);
every entry records the label the model predicted, and a lookup only sees
entries of the same label. Saved as a directory:

    CURRENT            names the complete generation below
    gen-000007/        index-0.bin, index-1.bin, … (hnswlib, one per label), entries.json, vectors.npy

A save writes a new generation, then replaces CURRENT atomically, so a
process killed during a save leaves the previous memory loadable. No
pickle anywhere. entries.json holds the SHA-256 of each index file and of
vectors.npy: a load checks them before hnswlib reads a byte (a damaged
index file could crash the interpreter), loads into a fresh index, checks
its size and dimension against the entries, and refuses anything else
with a `DamagedMemoryError` naming the file; CURRENT must name a generation
of this directory. A memory of another model is a `ConfigError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .._checks import check_int, decoded
from .._exceptions import ConfigError
from .._secrets import hide
from ..models.classifier import Label

__all__ = [
    "DamagedMemoryError", "Memory", "MemoryEntry", "RuleMemory", "nearest_unused", "saved_entries",
]  # fmt: skip

FORMAT_VERSION = 3
_GENERATION = re.compile(r"gen-\d{6}")


class DamagedMemoryError(ConfigError):
    """A saved memory that cannot be read as this one (a damaged or missing file, another format, another
    embedder): a run sets it aside and rebuilds it from its results file."""


@dataclass(frozen=True)
class MemoryEntry:
    """One remembered input, its intermediate rule and its anchor.

    ``query``, ``features``: the input as its `Instance` named them (a
    text and its words; a row and its predicates; an image's digest and
    its superpixels). ``rule_*``: the intermediate rule (features and
    positions; for tabular and image inputs also a descriptor of each rule
    feature). ``anchor_*``: the
    anchor the explanation returned; ``anchor_keys`` name its features in a
    way comparable across inputs (a lower-cased word, a predicate), empty
    where features have no such name (superpixels).
    """

    query: str
    features: tuple[str, ...]
    label: Label
    rule_positions: tuple[int, ...]
    rule_features: tuple[str, ...]
    precision: float
    coverage: float
    rule_vectors: tuple[tuple[float, ...], ...] = ()
    anchor_positions: tuple[int, ...] = ()
    anchor_features: tuple[str, ...] = ()
    anchor_keys: tuple[str, ...] = ()
    anchor_vectors: tuple[tuple[float, ...], ...] = ()


@runtime_checkable
class Memory(Protocol):
    """What MAnchors asks of its memory, and all it asks: look up, add.

    `RuleMemory` is the memory of one process; a Ray run's workers look up
    a replica of the run's memory (or one shared actor) through views that
    hold their additions until the run accepts the explanation.
    """

    def neighbours(self, vector: np.ndarray, *, label: Label, k: int) -> list[tuple[MemoryEntry, float]]: ...

    def anchored(self, keys: set[str], *, label: Label) -> list[tuple[tuple[str, ...], int]]: ...

    def add(self, entry: MemoryEntry, vector: np.ndarray) -> None: ...


class _LabelIndex:
    """One label's entries in their own HNSW index: a lookup never filters (or copies) others."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.ids: list[int] = []  # the entry number of each of the index's items, in order


class RuleMemory:
    """Nearest-neighbour memory of explained inputs (hnswlib, cosine), one index per label.

    ``embedder_id`` and ``dim`` name the sentence embedder the vectors come
    from and ``scope`` the explained model; a memory saved for another
    embedder or model cannot be loaded for this one. Adding an entry, and
    each lookup (`neighbours`, `anchored`), costs the same whatever the
    number of entries (amortised; HNSW's own log factor aside):
    ``benchmarks/memory_scale.py`` measures it up to 100,000 entries.
    ``per_key``: the most distinct anchors `anchored` keeps filed under one
    key (the most often found; among equals, the latest).
    """

    EF, M, PER_KEY = 64, 16, 64
    """The defaults of ``ef`` (HNSW's search breadth), ``m`` (its links per node) and ``per_key``."""

    def __init__(
        self, dim: int, embedder_id: str, scope: str, *, ef: int = EF, m: int = M, per_key: int = PER_KEY
    ) -> None:
        check_int("per_key", per_key)
        try:
            import hnswlib
        except ImportError as exc:
            raise ConfigError("MAnchors' memory needs hnswlib (a dependency): pip install hnswlib") from exc
        self.dim = dim
        self.embedder_id = embedder_id
        self.scope = scope
        self.entries: list[MemoryEntry] = []
        self._buffer = np.zeros((1024, dim), dtype=np.float32)
        self._labels: dict[Label, _LabelIndex] = {}
        self._anchors: dict[tuple[Label, frozenset[str]], list[int]] = {}  # [count, first entry]
        self._designated: dict[tuple[Label, str], dict[frozenset[str], None]] = {}  # bounded, in order
        self.per_key = per_key
        self._hnswlib = hnswlib
        self.ef, self.m = ef, m

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def vectors(self) -> np.ndarray:
        """The entries' sentence vectors, one row each, in order."""
        return self._buffer[: len(self.entries)]

    def _new_index(self, capacity: int) -> Any:
        index = self._hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(max_elements=capacity, ef_construction=200, M=self.m, random_seed=0)
        index.set_ef(self.ef)
        return index

    def add(self, entry: MemoryEntry, vector: np.ndarray) -> None:
        vector = np.asarray(vector, dtype=np.float32).reshape(1, self.dim)
        number = len(self.entries)
        if number == len(self._buffer):
            self._buffer = np.concatenate([self._buffer, np.zeros_like(self._buffer)])
        self._buffer[number] = vector
        index = self._labels.get(entry.label)
        if index is None:
            index = self._labels[entry.label] = _LabelIndex(self._new_index(1024))
        if len(index.ids) >= index.index.get_max_elements():
            index.index.resize_index(2 * index.index.get_max_elements())
        index.index.add_items(vector, [len(index.ids)])
        index.ids.append(number)
        self._file(entry, number)
        self.entries.append(entry)

    def _file(self, entry: MemoryEntry, number: int) -> None:
        """Count an entry's anchor under its label (see `anchored`), filed under one of its keys."""
        if not entry.anchor_keys:
            return
        anchor = frozenset(entry.anchor_keys)
        counted = self._anchors.setdefault((entry.label, anchor), [0, number])
        counted[0] += 1
        bucket = self._designated.setdefault((entry.label, _designated(anchor)), {})
        if anchor in bucket:
            return
        if len(bucket) >= self.per_key:  # full: it takes the place of the least found (the oldest such)
            least = min(bucket, key=lambda a: self._anchors[(entry.label, a)][0])
            if self._anchors[(entry.label, least)][0] > counted[0]:
                return
            del bucket[least]
        bucket[anchor] = None

    def nearest(self, vector: np.ndarray, *, label: Label) -> tuple[MemoryEntry, float] | None:
        """The most similar entry with this label, with its cosine similarity."""
        found = self.neighbours(vector, label=label, k=1)
        return found[0] if found else None

    def neighbours(self, vector: np.ndarray, *, label: Label, k: int) -> list[tuple[MemoryEntry, float]]:
        """The ``k`` most similar entries with this label, most similar first, with their cosine similarity."""
        index = self._labels.get(label)
        if index is None or k < 1:
            return []
        local, distances = index.index.knn_query(
            np.asarray(vector, dtype=np.float32).reshape(1, self.dim), k=min(k, len(index.ids))
        )
        return [(self.entries[index.ids[int(i)]], float(1.0 - d)) for i, d in zip(local[0], distances[0], strict=True)]

    def anchored(self, keys: set[str], *, label: Label) -> list[tuple[tuple[str, ...], int]]:
        """Earlier anchors for this label made only of ``keys``, with how many entries found each.

        Ordered shortest first, then most often found, then first found. Each distinct anchor is
        filed under one of its keys (a fixed hash picks it), at most ``per_key`` under each, so a
        lookup visits at most ``per_key`` anchors per key of the input, never the entries.
        """
        found = []
        for key in keys:
            for anchor in self._designated.get((label, key), ()):
                if anchor <= keys:
                    count, first = self._anchors[(label, anchor)]
                    found.append((len(anchor), -count, first, tuple(sorted(anchor))))
        return [(anchor, -negative) for _, negative, _, anchor in sorted(found)]

    # -- persistence ------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write a new generation, then switch CURRENT to it atomically. A write that fails (a full
        disk, a folder that cannot be written) is a `ConfigError`: the generation begun is removed, the
        previous save stays the one loaded, and this memory is unchanged."""
        root = Path(directory)
        try:
            root.mkdir(parents=True, exist_ok=True)
            previous = _current(root)
        except OSError as exc:
            raise ConfigError(f"cannot save the memory to {root}: {exc}") from exc
        number = int(previous.name.split("-")[1]) + 1 if previous else 1
        gen = root / f"gen-{number:06d}"
        try:
            return self._write(root, gen)
        except (OSError, RuntimeError) as exc:  # hnswlib's save_index raises RuntimeError
            shutil.rmtree(gen, ignore_errors=True)
            (root / "CURRENT.tmp").unlink(missing_ok=True)
            kept = f"{previous.name} is still the save loaded" if previous else "nothing was saved"
            raise ConfigError(f"cannot save the memory to {root}: {exc}; {kept}") from exc

    def _write(self, root: Path, gen: Path) -> Path:
        """Write generation ``gen`` of the memory in ``root`` and make it CURRENT."""
        shutil.rmtree(gen, ignore_errors=True)
        gen.mkdir()
        labels = list(self._labels)
        for j, label in enumerate(labels):
            self._labels[label].index.save_index(str(gen / f"index-{j}.bin"))
        np.save(gen / "vectors.npy", self.vectors, allow_pickle=False)
        files = ["vectors.npy", *(f"index-{j}.bin" for j in range(len(labels)))]
        meta = {
            "format_version": FORMAT_VERSION,
            "embedder": self.embedder_id,
            "dim": self.dim,
            "scope": self.scope,
            "labels": labels,
            "checksums": {name: _sha256(gen / name) for name in files},
            "entries": [asdict(e) for e in self.entries],
        }
        (gen / "entries.json").write_text(hide(json.dumps(meta)))  # no credential in a file, in any text
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
        """The memory saved in ``directory``; `ConfigError` naming the file when anything is amiss."""
        root = Path(directory)
        gen = _current(root)
        if gen is None:
            raise ConfigError(f"{root} holds no saved memory (no CURRENT file)")
        meta = _read_meta(gen / "entries.json")
        if meta.get("embedder") != embedder_id or meta.get("dim") != dim:
            raise DamagedMemoryError(
                f"memory {root} was built with {meta.get('embedder')} ({meta.get('dim')} dims), "
                f"not {embedder_id} ({dim} dims)"
            )
        if meta.get("scope") != scope:
            raise ConfigError(f"memory {root} was built for another model: {meta.get('scope')!r}, not {scope!r}")
        try:
            entries = [decoded(MemoryEntry, raw) for raw in meta["entries"]]
            labels = list(decoded(tuple[Label, ...], meta["labels"], "labels"))
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedMemoryError(f"{gen / 'entries.json'}: a damaged entry ({type(exc).__name__}: {exc})") from exc
        checksums = meta.get("checksums")
        if not isinstance(checksums, dict):
            raise DamagedMemoryError(f"{gen / 'entries.json'} holds no checksums")
        numbers: dict[Label, list[int]] = {label: [] for label in labels}  # each label's entries, one pass
        for number, entry in enumerate(entries):
            numbers.setdefault(entry.label, []).append(number)
        if sum(len(numbers[label]) for label in labels) != len(entries):  # every entry in one listed label
            raise DamagedMemoryError(f"{gen / 'entries.json'}: its entries' labels are not the labels it lists")
        vectors = _read_vectors(gen / "vectors.npy", (len(entries), dim), checksums)
        memory = cls(dim, embedder_id, scope)
        memory.entries = entries
        memory._buffer = np.concatenate([vectors, np.zeros((max(1024, len(entries)), dim), dtype=np.float32)])
        for j, label in enumerate(labels):
            index = _LabelIndex(memory._read_index(gen / f"index-{j}.bin", len(numbers[label]), checksums))
            index.ids = numbers[label]
            memory._labels[label] = index
        for number, entry in enumerate(entries):
            memory._file(entry, number)
        return memory

    def _read_index(self, path: Path, count: int, checksums: dict[str, Any]) -> Any:
        """Load ``path`` into a fresh index, after its checksum; check it holds ``count`` vectors of this dimension."""
        _verify(path, checksums)
        index = self._hnswlib.Index(space="cosine", dim=self.dim)
        try:
            index.load_index(str(path), max_elements=max(1024, count))
        except (RuntimeError, ValueError, OSError) as exc:
            raise DamagedMemoryError(f"{path}: not a readable hnswlib index ({exc})") from exc
        if index.get_current_count() != count or index.dim != self.dim:
            raise DamagedMemoryError(f"{path}: holds {index.get_current_count()} vectors of {index.dim} dims, "
                              f"the entries say {count} of {self.dim}")  # fmt: skip
        index.set_ef(self.ef)
        return index


def _designated(anchor: frozenset[str]) -> str:
    """The key an anchor is filed under: the one a fixed hash ranks first (so anchors spread over keys)."""
    return min(anchor, key=lambda key: (zlib.crc32(key.encode("utf-8", "surrogatepass")), key))


def saved_entries(directory: str | os.PathLike[str]) -> int:
    """How many entries the memory saved in ``directory`` holds (0: none saved, or unreadable)."""
    try:
        gen = _current(Path(directory))
        return len(_read_meta(gen / "entries.json")["entries"]) if gen is not None else 0
    except (ConfigError, OSError):
        return 0


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DamagedMemoryError(f"cannot read memory file {path}: {exc}") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("entries"), list):
        raise DamagedMemoryError(f"{path} is not a memory's entries file")
    if meta.get("format_version") != FORMAT_VERSION:
        said = meta.get("format_version")
        raise DamagedMemoryError(f"{path} has format {said!r}; this version reads {FORMAT_VERSION}")
    return meta


def _read_vectors(path: Path, shape: tuple[int, int], checksums: dict[str, Any]) -> np.ndarray:
    _verify(path, checksums)
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DamagedMemoryError(f"cannot read memory file {path}: {exc}") from exc
    if vectors.shape != shape or not np.isfinite(vectors).all():
        raise DamagedMemoryError(f"{path}: vectors of shape {vectors.shape}, the entries say {shape} (or not finite)")
    return np.asarray(vectors, dtype=np.float32)


def _verify(path: Path, checksums: dict[str, Any]) -> None:
    if not isinstance(checksums, dict) or path.name not in checksums:
        raise DamagedMemoryError(f"{path.parent / 'entries.json'} holds no checksum of {path.name}")
    try:
        digest = _sha256(path)
    except OSError as exc:
        raise DamagedMemoryError(f"cannot read memory file {path}: {exc}") from exc
    if digest != checksums[path.name]:
        raise DamagedMemoryError(f"{path} does not match its checksum: damaged, or from another save")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _current(root: Path) -> Path | None:
    """The generation CURRENT names: a ``gen-NNNNNN`` directory of ``root``, never anything outside it."""
    pointer = root / "CURRENT"
    if not pointer.is_file():
        return None
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, ValueError) as exc:
        raise DamagedMemoryError(f"cannot read {pointer}: {exc}") from exc
    if not _GENERATION.fullmatch(name):
        raise DamagedMemoryError(f"{pointer} names {name[:80]!r}, not a generation (gen-NNNNNN) of {root}")
    gen = root / name
    if not gen.is_dir():
        raise DamagedMemoryError(f"{pointer} names {name}, which {root} does not hold")
    return gen


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def nearest_unused(scores: np.ndarray) -> list[int]:
    """HT's assignment: each row (a remembered feature) takes the best-scoring column (a
    feature of the new input) that no earlier row took; ties go to the first column. Stops
    when the columns run out."""
    used: list[int] = []
    for row in np.asarray(scores):
        free = [j for j in range(len(row)) if j not in used]
        if not free:
            break
        used.append(max(free, key=lambda j: (row[j], -j)))
    return used
