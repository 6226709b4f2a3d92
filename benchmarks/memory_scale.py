"""MAnchors' memory at scale: does adding and looking up cost the same at 100,000 entries as at 1,000?

    python -m benchmarks.memory_scale [--sizes 1000 10000 100000] [--labels 2]

A `RuleMemory` of 384-dimensional unit vectors (MiniLM's size) is filled with synthetic entries
(anchors of 1–3 words from a 5,000-word vocabulary, labels taken in turn); at each size the mean time of
`add`, `neighbours` (k = 3) and `anchored` (an input of 20 words) is measured over 200 calls, and the
process's peak memory. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

import numpy as np

from llm_anchors.extend import MemoryEntry
from llm_anchors.memory import RuleMemory

DIM = 384
VOCABULARY = [f"w{i}" for i in range(5000)]


def entry(rng: np.random.Generator, label: str) -> MemoryEntry:
    words = tuple(str(w) for w in rng.choice(VOCABULARY, 12, replace=False))
    anchor = words[: int(rng.integers(1, 4))]
    positions = tuple(range(len(anchor)))
    return MemoryEntry(" ".join(words), words, label, positions, anchor, 0.85, 0.4,
                       anchor_positions=positions, anchor_features=anchor, anchor_keys=anchor)  # fmt: skip


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def measure(sizes: list[int], labels: int, calls: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    names = [f"label{j}" for j in range(labels)]
    memory = RuleMemory(DIM, "synthetic", "synthetic")
    rows = []
    for size in sizes:
        vectors = unit(rng, size - len(memory))
        for i, vector in enumerate(vectors):
            memory.add(entry(rng, names[(len(memory) + i) % labels]), vector)
        probes = unit(rng, calls)
        inputs = [set(str(w) for w in rng.choice(VOCABULARY, 20, replace=False)) for _ in range(calls)]
        started = time.perf_counter()
        for vector in probes:
            memory.neighbours(vector, label=names[0], k=3)
        neighbours_ms = (time.perf_counter() - started) / calls * 1000
        started = time.perf_counter()
        for keys in inputs:
            memory.anchored(keys, label=names[0])
        anchored_ms = (time.perf_counter() - started) / calls * 1000
        extra = unit(rng, calls)
        started = time.perf_counter()
        for vector in extra:
            memory.add(entry(rng, names[0]), vector)
        add_ms = (time.perf_counter() - started) / calls * 1000
        rows.append({
            "entries": size, "add_ms": add_ms, "neighbours_ms": neighbours_ms, "anchored_ms": anchored_ms,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        })  # fmt: skip
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| entries | add (ms) | neighbours, k = 3 (ms) | anchored, 20 words (ms) | peak RSS (MB) |",
             "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['entries']:,} | {r['add_ms']:.3f} | {r['neighbours_ms']:.3f} | {r['anchored_ms']:.3f} | "
                     f"{r['peak_rss_mb']:,.0f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ._common import write_json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--labels", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = measure(sorted(args.sizes), args.labels, args.calls, args.seed)
    print(markdown(rows))
    print(f"\nwrote {write_json('memory_scale', {'params': vars(args), 'rows': rows})}")


if __name__ == "__main__":
    main()
