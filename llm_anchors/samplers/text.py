"""Text perturbation: words as features, rendered back with their spacing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError, InvalidInputError
from ..search.rules import Rule
from .base import keep_independently

__all__ = ["WORD", "TextInstance", "TextSampler"]

# A word: letters/digits, with inner apostrophes or hyphens ("century's",
# "jean-claud"). Everything between words (spaces, punctuation) is kept
# verbatim, so a perturbation reads like the original.
WORD = re.compile(r"\w+(?:['’\-]\w+)*")


@dataclass(frozen=True)
class TextInstance:
    """One input split into words (the features) and the text between them."""

    text: str
    words: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]

    @property
    def query(self) -> str:
        """The text itself: what the classifier is asked about."""
        return self.text

    @property
    def features(self) -> tuple[str, ...]:
        """The words."""
        return self.words

    @classmethod
    def parse(cls, text: str) -> TextInstance:
        matches = list(WORD.finditer(text))
        return cls(text, tuple(m.group() for m in matches), tuple(m.span() for m in matches))

    def render(self, keep: np.ndarray, mask: str) -> str:
        """The text with every word not kept replaced by ``mask``."""
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
    """Perturbs a text by masking words, keeping a rule's words.

    mode "unk" (the Anchors papers' default): every word outside the rule
    is hidden (replaced by ``mask``) with probability ``p_hide``,
    independently. ``max_words`` bounds the
    input: the search's cost grows with it.
    """

    def __init__(
        self,
        *,
        mode: str = "unk",
        mask: str = "UNK",
        p_hide: float = 0.5,
        max_words: int = 256,
    ) -> None:
        if mode != "unk":
            raise ConfigError(f"unknown perturbation mode {mode!r}; available: 'unk'")
        check_number("p_hide", p_hide, high=1.0)
        check_int("max_words", max_words)
        if not isinstance(mask, str) or not mask.strip():
            raise ConfigError(f"mask must be a non-empty string (it replaces a word), got {mask!r}")
        self.mode = mode
        self.mask = mask
        self.p_hide = p_hide
        self.max_words = max_words

    def settings(self) -> dict[str, object]:
        return {
            "kind": "text",
            "mode": self.mode,
            "mask": self.mask,
            "p_hide": self.p_hide,
            "max_words": self.max_words,
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
        instance = TextInstance.parse(text)
        if not instance.words:
            raise InvalidInputError(f"text to explain has no words: {text[:80]!r}")
        if len(instance.words) > self.max_words:
            raise InvalidInputError(
                f"text to explain has {len(instance.words)} words, over the limit of {self.max_words} "
                "(max_words, --max-words: each word is a feature the search may test)"
            )
        return instance

    def sample_present(self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        """An (n × words) boolean matrix: which words each perturbation keeps."""
        return keep_independently(n, len(instance.words), rule, self.p_hide, rng)

    def sample(
        self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[list[str], np.ndarray]:
        """``n`` perturbed texts that keep the words of ``rule``, and their matrix."""
        present = self.sample_present(instance, rule, n, rng)
        return self.render(instance, present), present

    def render(self, instance: TextInstance, present: Sequence[np.ndarray] | np.ndarray) -> list[str]:
        return [instance.render(row, self.mask) for row in present]
