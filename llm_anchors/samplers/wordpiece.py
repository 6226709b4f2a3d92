"""A BERT model's WordPiece table, read without torch or transformers.

MAnchors' memory key, its horizontal transformation and the ``similar``
perturbation need a word's WordPiece pieces and their rows of the model's
input embedding: a vocabulary lookup and a table lookup. `WordPieceTable`
reads both from the model's own files (``vocab.txt``, the embedding matrix of
``model.safetensors`` mapped from disk) or from the table this package ships
(`PACKAGED`: ``embeddings.npy``, the same rows as float16), and tokenizes as BERT's uncased
tokenizer does (clean, split CJK characters, lower-case, strip accents, split
punctuation, then greedy longest-match WordPiece). It loads in milliseconds
where the sentence-transformers model took seconds and hundreds of MB.
"""

from __future__ import annotations

import json
import struct
import unicodedata
from pathlib import Path

import numpy as np

from .._exceptions import ConfigError

__all__ = ["PACKAGED", "WordPieceTable"]

PACKAGED = Path(__file__).resolve().parent.parent / "data" / "minilm"
"""all-MiniLM-L6-v2's vocabulary and input-embedding rows (float16), shipped in this package
(``data/minilm/README.md``: its source and licence): the memory's word space with neither torch nor
the model's package."""

_EMBEDDING = "embeddings.word_embeddings.weight"
_MAX_CHARS = 100  # a longer token is [UNK], as BERT's WordPiece has it
_DTYPES = {"F32": np.float32, "F16": np.float16}


class WordPieceTable:
    """The vocabulary and the input-embedding rows of the BERT model in ``directory`` (its
    ``model.safetensors``, or an ``embeddings.npy`` of those rows: `PACKAGED`)."""

    def __init__(self, directory: str | Path) -> None:
        directory = Path(directory)
        try:
            vocabulary = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
            config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
            packed = directory / "embeddings.npy"
            self.rows = (np.load(packed, mmap_mode="r", allow_pickle=False) if packed.exists()
                         else _embedding(directory / "model.safetensors"))  # fmt: skip
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{directory} is not a BERT model's directory that can be read: {exc}") from exc
        self.ids = {piece: i for i, piece in enumerate(vocabulary)}
        self.lower = bool(config.get("do_lower_case", True))
        self.unk = self.ids[config.get("unk_token", "[UNK]")]
        if self.rows.shape[0] < len(vocabulary):
            raise ConfigError(f"{directory}: {len(vocabulary)} pieces, but {self.rows.shape[0]} embedding rows")

    @property
    def dim(self) -> int:
        return int(self.rows.shape[1])

    @property
    def vocabulary(self) -> list[str]:
        return list(self.ids)

    def pieces(self, text: str) -> list[int]:
        """The WordPiece ids of ``text``, as BERT's tokenizer splits it ([UNK] for a word it cannot)."""
        return [i for token in self._basic(text) for i in self._wordpiece(token)]

    def vector(self, word: str) -> np.ndarray:
        """The mean of ``word``'s pieces' rows (the [UNK] row for a word with none), as float32."""
        ids = self.pieces(word) or [self.unk]
        vector: np.ndarray = np.asarray(self.rows[ids], dtype=np.float32).mean(axis=0)
        return vector

    def _basic(self, text: str) -> list[str]:
        """BERT's basic tokenizer: control characters out, CJK characters apart, lower case without
        accents, then split on spaces and punctuation."""
        chars = []
        for c in text:
            code = ord(c)
            if code == 0 or code == 0xFFFD or _is_control(c):
                continue
            chars.append(f" {c} " if _is_cjk(code) else " " if c.isspace() else c)
        tokens = []
        for word in "".join(chars).split():
            if self.lower:
                word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
            tokens.extend(_split_punctuation(word))
        return tokens

    def _wordpiece(self, token: str) -> list[int]:
        """Greedy longest-match-first pieces of one token (``##`` for a piece inside it); [UNK] when
        some part of it matches no piece."""
        if len(token) > _MAX_CHARS:
            return [self.unk]
        ids, start = [], 0
        while start < len(token):
            end = len(token)
            while end > start:
                piece = token[start:end] if start == 0 else f"##{token[start:end]}"
                if piece in self.ids:
                    ids.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return ids


def _embedding(path: Path) -> np.ndarray:
    """The input-embedding matrix of a safetensors file, mapped from disk (read on use)."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    entry = header[_EMBEDDING]
    begin, end = entry["data_offsets"]
    dtype = _DTYPES[entry["dtype"]]
    rows, dim = entry["shape"]
    if end - begin != rows * dim * np.dtype(dtype).itemsize:
        raise ValueError(f"{_EMBEDDING} holds {end - begin} bytes, not {rows}×{dim} {entry['dtype']}")
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + size + begin, shape=(rows, dim))


def _is_control(c: str) -> bool:
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def _is_cjk(code: int) -> bool:
    return any(
        lo <= code <= hi
        for lo, hi in (
            (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
        )
    )  # fmt: skip


def _is_punctuation(c: str) -> bool:
    code = ord(c)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _split_punctuation(word: str) -> list[str]:
    """``word`` with every punctuation character a token of its own."""
    out: list[str] = []
    current = ""
    for c in word:
        if _is_punctuation(c):
            out.extend([current, c] if current else [c])
            current = ""
        else:
            current += c
    return [*out, current] if current else out
