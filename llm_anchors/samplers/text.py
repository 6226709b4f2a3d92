"""Text perturbation: words or sentences as features, rendered back with the text between them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError, InvalidInputError
from ..search.rules import Rule
from .base import HideRate, keep_independently

__all__ = ["SENTENCE_END", "WORD", "TextInstance", "TextSampler", "Unit", "sentence_spans"]

# A word: letters/digits, with inner apostrophes or hyphens ("century's",
# "jean-claud"). Everything between words (spaces, punctuation) is kept
# verbatim, so a perturbation reads like the original.
WORD = re.compile(r"\w+(?:['’\-]\w+)*")

Unit = Literal["word", "sentence"]
"""What a feature of a text is: a word, or a sentence (hidden whole)."""

# Where a sentence ends: a run of whitespace holding a line break, or one
# after ".", "!" or "?" (closing quotes and brackets allowed between) and
# before what may start a sentence (a capital, a digit, an opening quote).
# Not after a common abbreviation or an initial ("Mr. Smith", "J. Smith").
# A sentence is a unit of hiding, not a claim about grammar.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|\s*\n\s*")
ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|No|Gen|Sen|Rep|Gov|Inc|Ltd|Co)|\b[A-Z])\.$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence of ``text`` that holds a word, its closing punctuation included."""
    spans, start = [], 0
    for end in SENTENCE_END.finditer(text):
        if "\n" not in end.group() and ABBREVIATION.search(text, max(0, end.start() - 5), end.start()):
            continue
        close = end.start() + len(end.group()) - len(end.group().lstrip("\"'”’)]"))
        spans.append((start, close))
        start = end.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        piece = text[a:b]
        a, b = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
        if WORD.search(text, a, b):
            out.append((a, b))
    return out


@dataclass(frozen=True)
class TextInstance:
    """One input split into its features (words, or sentences) and the text between them."""

    text: str
    words: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]

    @property
    def query(self) -> str:
        """The text itself: what the classifier is asked about."""
        return self.text

    @property
    def features(self) -> tuple[str, ...]:
        """The words (or sentences)."""
        return self.words

    @classmethod
    def parse(cls, text: str, unit: Unit = "word") -> TextInstance:
        if unit == "sentence":
            spans = sentence_spans(text)
            return cls(text, tuple(text[a:b] for a, b in spans), tuple(spans))
        matches = list(WORD.finditer(text))
        return cls(text, tuple(m.group() for m in matches), tuple(m.span() for m in matches))

    def render(self, keep: np.ndarray, mask: str) -> str:
        """The text with every feature not kept replaced by ``mask``."""
        parts: list[str] = []
        last = 0
        for (start, end), word, kept in zip(self.spans, self.words, keep, strict=True):
            parts.append(self.text[last:start])
            parts.append(word if kept else mask)
            last = end
        parts.append(self.text[last:])
        return "".join(parts)

    def mark(self, positions: Iterable[int], wrap: Callable[[str], str], escape: Callable[[str], str] = str) -> str:
        """The text with the words at ``positions`` passed through ``wrap``
        (for display), everything through ``escape`` first."""
        marked = set(positions)
        parts: list[str] = []
        last = 0
        for i, (start, end) in enumerate(self.spans):
            parts.append(escape(self.text[last:start]))
            word = escape(self.text[start:end])
            parts.append(wrap(word) if i in marked else word)
            last = end
        parts.append(escape(self.text[last:]))
        return "".join(parts)


class TextSampler:
    """Perturbs a text by hiding words (or sentences), keeping a rule's.

    ``unit``: what a feature is: a word (Anchors'), or a sentence, hidden
    whole. ``p_hide``: the probability that a feature outside the rule is
    replaced by ``mask``, independently: a number (Anchors' own
    distribution is 0.5), or "uniform", a rate drawn for each perturbation
    from U(0, 1) — on a long text a fixed 0.5 keeps half of it in every
    sample, which often names the label whatever the rule is; a drawn rate
    also asks what the rule holds when most of the text is gone.
    ``max_words`` bounds the input: the search's cost grows with it.
    """

    def __init__(
        self,
        *,
        unit: Unit = "word",
        mode: str = "unk",
        mask: str = "UNK",
        p_hide: HideRate = 0.5,
        max_words: int = 256,
    ) -> None:
        if unit not in ("word", "sentence"):
            raise ConfigError(f"unit must be 'word' or 'sentence', got {unit!r}")
        if mode != "unk":
            raise ConfigError(f"unknown perturbation mode {mode!r}; available: 'unk'")
        if p_hide != "uniform":
            check_number("p_hide", p_hide, high=1.0)
        check_int("max_words", max_words)
        if not isinstance(mask, str) or not mask.strip():
            raise ConfigError(f"mask must be a non-empty string (it replaces a word), got {mask!r}")
        self.unit: Unit = unit
        self.mode = mode
        self.mask = mask
        self.p_hide: HideRate = p_hide
        self.max_words = max_words

    @property
    def distribution(self) -> str:
        """The perturbation distribution, in words (the claim names it)."""
        drawn = self.p_hide == "uniform"
        rate = "a probability drawn per sample from U(0, 1)" if drawn else f"probability {self.p_hide:g}"
        return f"each {self.unit} outside the anchor replaced by {self.mask!r} with {rate}, independently"

    def settings(self) -> dict[str, object]:
        return {
            "kind": "text",
            "unit": self.unit,
            "mode": self.mode,
            "mask": self.mask,
            "p_hide": self.p_hide,
            "max_words": self.max_words,
            "distribution": self.distribution,
        }

    def features(self, text: object) -> TextInstance:
        """Split ``text`` into words; reject what cannot be explained."""
        if not isinstance(text, str):
            raise InvalidInputError(f"text to explain must be a str, got {type(text).__name__}")
        if not text.strip():
            raise InvalidInputError("text to explain is empty or whitespace only")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"text to explain is not valid Unicode ({exc.reason} at character {exc.start}): no model can read it"
            ) from None
        words = sum(1 for _ in WORD.finditer(text))
        if not words:
            raise InvalidInputError(f"text to explain has no words: {text[:80]!r}")
        if words > self.max_words:
            raise InvalidInputError(
                f"text to explain has {words} words, over the limit of {self.max_words} "
                "(max_words, --max-words: the search's cost grows with the words)"
            )
        return TextInstance.parse(text, self.unit)

    def sample_present(self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        """An (n × features) boolean matrix: which words (sentences) each perturbation keeps."""
        return keep_independently(n, len(instance.words), rule, self.p_hide, rng)

    def sample(
        self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[list[str], np.ndarray]:
        """``n`` perturbed texts that keep the words of ``rule``, and their matrix."""
        present = self.sample_present(instance, rule, n, rng)
        return self.render(instance, present), present

    def render(self, instance: TextInstance, present: Sequence[np.ndarray] | np.ndarray) -> list[str]:
        return [instance.render(row, self.mask) for row in present]
