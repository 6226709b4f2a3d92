"""The ``similar`` perturbation: a hidden word is replaced by one of its nearest words.

The nearest words are whole words of the packaged embedder's vocabulary (all-MiniLM-L6-v2's WordPiece
rows, `SentenceEmbedder.nearest_words`), the vectors MAnchors' memory already loads: nothing is
downloaded. As the original Anchors' similarity sampling, a stand-in is drawn among a word's nearest
with probability ∝ exp(cosine / temperature).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from .embedder import SentenceEmbedder

__all__ = ["Similar", "StandIns", "drawn_as", "stand_ins"]

StandIns = tuple[tuple[str, ...], np.ndarray] | None
"""One feature's stand-ins and the probability of each (None: it has none, and takes the fallback)."""


@dataclass(frozen=True)
class Similar:
    """How ``similar`` draws a hidden word's stand-in: among its ``neighbours`` nearest whole words at
    cosine ≥ ``min_similarity``, with probability ∝ exp(cosine / ``temperature``). A word with none
    (and a sentence, hidden whole) takes ``fallback``: "unk" (the mask) or "delete"."""

    neighbours: int = 20
    min_similarity: float = 0.4
    temperature: float = 0.4
    fallback: Literal["unk", "delete"] = "unk"

    def __post_init__(self) -> None:
        check_int("neighbours", self.neighbours)
        check_number("min_similarity", self.min_similarity, high=1.0)
        check_number("temperature", self.temperature, high=float("inf"))
        if self.fallback not in ("unk", "delete"):
            raise ConfigError(f"fallback must be 'unk' or 'delete', got {self.fallback!r}")

    def describe(self, embedder: SentenceEmbedder, mask: str) -> str:
        fallback = repr(mask) if self.fallback == "unk" else "nothing (deleted)"
        return (
            f"one of its {self.neighbours} nearest words in {embedder.identity.split(':')[1]}'s WordPiece space "
            f"(cosine ≥ {self.min_similarity:g}, drawn ∝ exp(cosine / {self.temperature:g})); a word with none, "
            f"or a sentence, by {fallback}"
        )


def stand_ins(words: Sequence[str | None], embedder: SentenceEmbedder, similar: Similar) -> list[StandIns]:
    """For each word (None: a feature that is not one word), its stand-ins: capitalised as the word is."""
    out: list[StandIns] = []
    for word in words:
        near = embedder.nearest_words(word, similar.neighbours, similar.min_similarity) if word else []
        out.append(drawn_as(word or "", {w: s / similar.temperature for w, s in near}))
    return out


def drawn_as(word: str, scores: Mapping[str, float]) -> StandIns:
    """Stand-ins for ``word``, each drawn with probability ∝ exp(its score) and capitalised as ``word`` is
    (None: no candidate). A score that is not finite (a filler's NaN or −inf, a pool cached before it
    was checked) names no candidate."""
    finite = {w: s for w, s in scores.items() if math.isfinite(s)}
    if not finite:
        return None
    logits = np.array(list(finite.values()))
    weights = np.exp(logits - logits.max())
    names = tuple(w.capitalize() if word[:1].isupper() else w for w in finite)
    return names, weights / weights.sum()
