"""MAnchors' memory features for text: sentence vectors as the key, HT by word vectors (`SentenceEmbedder`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..memory.store import MemoryEntry, nearest_unused
from .embedder import SentenceEmbedder
from .text_instance import TextInstance

__all__ = ["TextMemoryFeatures"]


class TextMemoryFeatures:
    """Text: sentence vectors as the key, HT by WordPiece cosine of words."""

    def __init__(self, embedder: SentenceEmbedder) -> None:
        self.embedder = embedder

    @property
    def identity(self) -> str:
        return self.embedder.identity

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def embed(self, instances: Sequence[TextInstance]) -> np.ndarray:
        return self.embedder.embed([i.text for i in instances])

    def describe(self, instance: TextInstance, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]:
        return ()  # the words themselves are remembered

    def horizontal(self, entry: MemoryEntry, instance: TextInstance) -> list[int]:
        return self.map_words(entry.rule_features, instance)

    def keys(self, instance: TextInstance) -> tuple[str, ...]:
        return tuple(w.lower() for w in instance.words)

    def map_words(self, rule_words: Sequence[str], instance: TextInstance) -> list[int]:
        """Each rule word → the position of the most similar unused word of ``instance``.

        Similarity is the cosine of WordPiece vectors; an identical word
        (case aside) always wins; ties go to the earlier position.
        """
        if not rule_words:
            return []
        words = list(instance.words)
        sims = self.embedder.word_vectors(list(rule_words)) @ self.embedder.word_vectors(words).T
        same = np.array([[w.lower() == r.lower() for w in words] for r in rule_words])
        return nearest_unused(sims + 3.0 * same)  # cosines lie in [-1, 1]: an identical word always wins
