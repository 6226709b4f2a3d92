"""Public data sets used by the tests and benchmarks, read from disk.

Nothing is downloaded: the files are looked up in ``path``, else in
``$LLM_ANCHORS_DATA``, else in ``../shared/data`` beside the project.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._exceptions import ConfigError

__all__ = ["data_dir", "load_rt_polarity", "shuffled"]

_RT_HINT = (
    "RT-Polarity (sentence polarity dataset v1.0, Pang & Lee 2005) is needed: put rt-polarity.pos and "
    "rt-polarity.neg in {where} (from http://www.cs.cornell.edu/people/pabo/movie-review-data/), "
    "or pass path= / set LLM_ANCHORS_DATA."
)


def data_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the data sets are."""
    if path is not None:
        return Path(path)
    if env := os.environ.get("LLM_ANCHORS_DATA"):
        return Path(env)
    beside_checkout = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    beside_cwd = Path.cwd().parent / "shared" / "data"
    return beside_checkout if beside_checkout.is_dir() else beside_cwd


def load_rt_polarity(path: str | os.PathLike[str] | None = None) -> tuple[list[str], np.ndarray]:
    """Sentences and labels (1 = positive) of RT-Polarity, positives first."""
    folder = data_dir(path)
    if (folder / "rt-polarity").is_dir():
        folder = folder / "rt-polarity"
    pos, neg = folder / "rt-polarity.pos", folder / "rt-polarity.neg"
    if not (pos.is_file() and neg.is_file()):
        raise ConfigError(_RT_HINT.format(where=folder))
    texts: list[str] = []
    labels: list[int] = []
    for file, label in ((pos, 1), (neg, 0)):
        lines = [line.strip() for line in file.read_bytes().decode("utf-8", errors="replace").splitlines()]
        kept = [line for line in lines if line]
        texts += kept
        labels += [label] * len(kept)
    return texts, np.asarray(labels)


def shuffled(n: int, seed: int = 42) -> np.ndarray:
    """A seeded permutation of range(n): the benchmarks' input order."""
    return np.random.default_rng(seed).permutation(n)
