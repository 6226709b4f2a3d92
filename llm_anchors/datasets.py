"""Public data sets used by the tests and benchmarks, read from disk.

Nothing is downloaded: the files are looked up in ``path``, else in
``$LLM_ANCHORS_DATA``, else in ``../shared/data`` beside the project.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._exceptions import ConfigError

__all__ = [
    "BBC_TOPICS", "YOUTUBE_VIDEOS", "Adult", "data_dir", "load_adult", "load_bbc_news", "load_rt_polarity",
    "load_youtube_spam", "shuffled",
]  # fmt: skip

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


BBC_TOPICS = ("business", "entertainment", "politics", "sport", "tech")
"""The five topics of the BBC news articles."""
_BBC_HINT = (
    "BBC News (Greene & Cunningham 2006) is needed: put bbc-news/train.csv and bbc-news/val.csv (columns text, "
    "category) in {where}, or pass path= / set LLM_ANCHORS_DATA."
)


def load_bbc_news(split: str = "train", path: str | os.PathLike[str] | None = None) -> tuple[list[str], list[str]]:
    """The articles of a split ("train" or "val") of BBC News and their topics (`BBC_TOPICS`), in file order."""
    if split not in ("train", "val"):
        raise ConfigError(f"split must be 'train' or 'val', got {split!r}")
    file = data_dir(path) / "bbc-news" / f"{split}.csv"
    if not file.is_file():
        raise ConfigError(_BBC_HINT.format(where=data_dir(path)))
    with file.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["text"] for r in rows], [r["category"] for r in rows]


YOUTUBE_VIDEOS = ("Psy", "KatyPerry", "LMFAO", "Eminem", "Shakira")
"""The five videos of the YouTube Spam Collection, in its files' order (``Youtube01-Psy.csv``, ...)."""
_YOUTUBE_HINT = (
    "the YouTube Spam Collection (Alberto, Lochter & Almeida 2015) is needed: put youtube-spam/Youtube0N-NAME.csv "
    "(columns COMMENT_ID, AUTHOR, DATE, CONTENT, CLASS) in {where}, or pass path= / set LLM_ANCHORS_DATA."
)


def load_youtube_spam(
    videos: tuple[str, ...] = YOUTUBE_VIDEOS, path: str | os.PathLike[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """The comments on ``videos`` (`YOUTUBE_VIDEOS`) and their labels (1 = spam), in file order, the
    files' stray bytes replaced."""
    texts: list[str] = []
    labels: list[int] = []
    folder = data_dir(path) / "youtube-spam"
    for video in videos:
        if video not in YOUTUBE_VIDEOS:
            raise ConfigError(f"no video {video!r} in the YouTube Spam Collection: {', '.join(YOUTUBE_VIDEOS)}")
        file = folder / f"Youtube{YOUTUBE_VIDEOS.index(video) + 1:02d}-{video}.csv"
        if not file.is_file():
            raise ConfigError(_YOUTUBE_HINT.format(where=data_dir(path)))
        rows = list(csv.DictReader(io.StringIO(file.read_bytes().decode("utf-8", errors="replace"), newline="")))
        texts += [" ".join(r["CONTENT"].split()) for r in rows]
        labels += [int(r["CLASS"]) for r in rows]
    return texts, np.asarray(labels)


def shuffled(n: int, seed: int = 42) -> np.ndarray:
    """A seeded permutation of range(n): the benchmarks' input order."""
    return np.random.default_rng(seed).permutation(n)


_ADULT_HINT = (
    "UCI Adult (census income) is needed: put adult.data and adult.test (CSV with a header row) in {where} "
    "(from https://archive.ics.uci.edu/dataset/2/adult), or pass path= / set LLM_ANCHORS_DATA."
)
# The columns Anchors explains (Ribeiro et al. 2018): fnlwgt (a sampling
# weight) and education-num (a copy of education) are left out.
ADULT_FEATURES = (
    "age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "capital-gain", "capital-loss", "hours-per-week", "native-country",
)  # fmt: skip
_ADULT_NUMERIC = {"age", "capital-gain", "capital-loss", "hours-per-week"}


@dataclass(frozen=True)
class Adult:
    """UCI Adult as numbers: categorical columns hold codes into ``categorical_names``.

    Labels: 1 = income > 50K. ``?`` (missing) is a category of its own.
    """

    train: np.ndarray
    train_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray
    feature_names: tuple[str, ...]
    categorical_names: dict[int, tuple[str, ...]]


def load_adult(path: str | os.PathLike[str] | None = None) -> Adult:
    """Read ``adult.data`` (train) and ``adult.test`` (test); categories coded in sorted order."""
    folder = data_dir(path)
    if (folder / "adult").is_dir():
        folder = folder / "adult"
    files = folder / "adult.data", folder / "adult.test"
    if not all(f.is_file() for f in files):
        raise ConfigError(_ADULT_HINT.format(where=folder))
    tables = [_adult_rows(f) for f in files]
    categorical = {
        i: tuple(sorted({row[name] for rows in tables for row in rows}))
        for i, name in enumerate(ADULT_FEATURES)
        if name not in _ADULT_NUMERIC
    }
    codes = {i: {v: c for c, v in enumerate(names)} for i, names in categorical.items()}
    (train, train_labels), (test, test_labels) = (_adult_matrix(rows, codes) for rows in tables)
    return Adult(train, train_labels, test, test_labels, ADULT_FEATURES, categorical)


def _adult_matrix(rows: list[dict[str, str]], codes: dict[int, dict[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    matrix = [[codes[i][r[n]] if i in codes else float(r[n]) for i, n in enumerate(ADULT_FEATURES)] for r in rows]
    labels = [1 if r["class"].rstrip(".") == ">50K" else 0 for r in rows]
    return np.array(matrix, dtype=float), np.array(labels)


def _adult_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        rows = [{k.strip(): v.strip() for k, v in row.items()} for row in csv.DictReader(handle)]
    return [r for r in rows if r.get("class")]
