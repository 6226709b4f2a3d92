"""A text split into its features: words, sentences, or the words of some sentences among the others.

The text between features is kept verbatim, so a perturbation reads like the original; parts of the text
may be pinned (never a feature, never perturbed).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._exceptions import InvalidInputError
from ..search.rules import Rule
from .base import HideRate
from .similar import StandIns
from .words import WORD

__all__ = [
    "SENTENCE_END",
    "Span",
    "TextInstance",
    "free_regions",
    "mark_spans",
    "pinned_spans",
    "sentence_spans",
    "word_spans",
]

Span = tuple[int, int]
"""Where a part of a text is: its (start, end) character offsets."""

# Where a sentence ends: a run of whitespace holding a line break, or one
# after ".", "!" or "?" (closing quotes and brackets allowed between) and
# before what may start a sentence (a capital, a digit, an opening quote).
# Not after a common abbreviation or an initial ("Mr. Smith", "J. Smith").
# A sentence is a unit of hiding, not a claim about grammar.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|\s*\n\s*")
ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|No|Gen|Sen|Rep|Gov|Inc|Ltd|Co)|\b[A-Z])\.$")


def sentence_spans(text: str, start: int = 0, stop: int | None = None) -> list[Span]:
    """The spans of the sentences of ``text[start:stop]`` that hold a word, their closing punctuation included."""
    stop = len(text) if stop is None else stop
    spans, begin = [], start
    for end in SENTENCE_END.finditer(text, start, stop):
        if "\n" not in end.group() and ABBREVIATION.search(text, max(start, end.start() - 5), end.start()):
            continue
        close = end.start() + len(end.group()) - len(end.group().lstrip("\"'”’)]"))
        spans.append((begin, close))
        begin = end.end()
    spans.append((begin, stop))
    out = []
    for a, b in spans:
        piece = text[a:b]
        a, b = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
        if WORD.search(text, a, b):
            out.append((a, b))
    return out


def word_spans(text: str, start: int = 0, stop: int | None = None) -> list[Span]:
    """The spans of the words of ``text[start:stop]``."""
    return [m.span() for m in WORD.finditer(text, start, len(text) if stop is None else stop)]


def mark_spans(text: str, spans: Iterable[Span], wrap: Callable[[str], str], escape: Callable[[str], str] = str) -> str:
    """``text`` with each of ``spans`` (not overlapping) through ``wrap``, everything through ``escape`` first."""
    parts, last = [], 0
    for a, b in sorted(spans):
        parts += [escape(text[last:a]), wrap(escape(text[a:b]))]
        last = b
    parts.append(escape(text[last:]))
    return "".join(parts)


@dataclass(frozen=True)
class TextInstance:
    """One input split into its features (words, sentences, or both) and the text between them.

    ``unit``: what the features are: "word", "sentence", or "word in sentence" (coarse to fine: the words
    of some sentences and the other sentences whole); ``p_hide``: the rate at which its sampler hides
    them; ``pinned``: parts never perturbed (no feature lies in them); ``context``: features perturbed but
    never part of an anchor (coarse to fine: the sentences around those refined); ``max_anchor``: the most
    features an anchor of it may hold (None: any number); ``fills``: each feature's stand-ins under
    ``infill``, once its filler was asked (`TextSampler.prepare`)."""

    text: str
    words: tuple[str, ...]
    spans: tuple[Span, ...]
    unit: str = "word"
    p_hide: HideRate = 0.5
    pinned: tuple[Span, ...] = ()
    context: tuple[int, ...] = ()
    max_anchor: int | None = None
    fills: tuple[StandIns, ...] | None = None

    @property
    def query(self) -> str:
        """The text itself: what the classifier is asked about."""
        return self.text

    @property
    def features(self) -> tuple[str, ...]:
        """The words (or sentences)."""
        return self.words

    @classmethod
    def parse(
        cls, text: str, unit: Literal["word", "sentence"] = "word", p_hide: HideRate = 0.5, pinned: Sequence[Span] = ()
    ) -> TextInstance:
        """``text`` split into words or sentences, none of them inside a ``pinned`` span."""
        split = sentence_spans if unit == "sentence" else word_spans
        spans = [s for a, b in free_regions(len(text), pinned) for s in split(text, a, b)]
        return cls(text, tuple(text[a:b] for a, b in spans), tuple(spans), unit, p_hide, tuple(sorted(pinned)))

    def refine(self, kept: Rule, max_anchor: int | None = None) -> TextInstance:
        """Coarse to fine: the words inside the sentences ``kept`` (this instance's sentences), the other
        sentences whole (``context``); an anchor of at most ``max_anchor`` words."""
        spans: list[Span] = []
        context: list[int] = []
        for i, (a, b) in enumerate(self.spans):
            if i not in kept:
                context.append(len(spans))
            spans += word_spans(self.text, a, b) if i in kept else [(a, b)]
        words = tuple(self.text[a:b] for a, b in spans)
        unit = "word in sentence"
        return TextInstance(self.text, words, tuple(spans), unit, self.p_hide, self.pinned, tuple(context), max_anchor)

    def render(self, keep: np.ndarray, fill: str | None | Sequence[str | None]) -> str:
        """The text with every feature not kept replaced by ``fill``: a mask; None, deleted (the space
        before it goes with it, and before closing punctuation after it); or one of those per feature."""
        parts: list[str] = []
        last, deleted = 0, False
        for i, ((start, end), word, kept) in enumerate(zip(self.spans, self.words, keep, strict=True)):
            parts.append(_after_deletion(parts, self.text[last:start]) if deleted else self.text[last:start])
            instead = fill if fill is None or isinstance(fill, str) else fill[i]
            deleted = not kept and instead is None
            parts.append(word if kept else instead or "")
            last = end
        tail = self.text[last:]
        parts.append(_after_deletion(parts, tail, end=True) if deleted else tail)
        return "".join(parts)

    def mark(
        self,
        positions: Iterable[int],
        wrap: Callable[[str], str],
        escape: Callable[[str], str] = str,
        outer: Iterable[Span] = (),
        wrap_outer: Callable[[str], str] = str,
    ) -> str:
        """The text with the features at ``positions`` passed through ``wrap`` (for display), everything
        through ``escape`` first; ``outer`` spans (a coarse anchor's sentences) through ``wrap_outer``."""
        inner = [self.spans[p] for p in positions]

        def marked(a: int, b: int) -> str:
            return mark_spans(self.text[a:b], [(s - a, e - a) for s, e in inner if a <= s and e <= b], wrap, escape)

        parts, last = [], 0
        for a, b in sorted(outer):
            parts += [marked(last, a), wrap_outer(marked(a, b))]
            last = b
        parts.append(marked(last, len(self.text)))
        return "".join(parts)


def _after_deletion(parts: list[str], gap: str, end: bool = False) -> str:
    """The text between a deleted feature and the next (or the ``end``), joined so that no double space
    is left: its leading spaces go when the text before ends in one (or is empty), and that space too
    when the gap opens with closing punctuation or ends the text."""
    before = next((p for p in reversed(parts) if p), "")
    if before and before[-1] not in " \t":
        return gap
    stripped = gap.lstrip(" \t")
    if (stripped[:1] in tuple(".,;:!?)]}") or (end and not stripped)) and before:
        for k in range(len(parts) - 1, -1, -1):
            if parts[k]:
                parts[k] = parts[k].rstrip(" \t")
                break
    return stripped


def free_regions(length: int, pinned: Sequence[Span]) -> list[Span]:
    """The parts of a text of ``length`` characters outside the ``pinned`` spans."""
    regions, start = [], 0
    for a, b in sorted(pinned):
        if a > start:
            regions.append((start, a))
        start = max(start, b)
    if start < length:
        regions.append((start, length))
    return regions


def pinned_spans(text: str, pinned: object) -> list[Span]:
    """The spans of ``pinned`` in ``text``: each a substring (every place it occurs) or a [start, end] pair,
    widened to whole words (pinning "oo" of "good" pins "good": a word is never cut into features)."""
    words = [(m.start(), m.end()) for m in WORD.finditer(text)]
    starts = [a for a, _ in words]

    def widened(a: int, b: int) -> Span:
        for edge in (a, b - 1):
            i = bisect.bisect_right(starts, edge) - 1
            if i >= 0 and words[i][0] <= edge < words[i][1]:
                a, b = min(a, words[i][0]), max(b, words[i][1])
        return a, b

    return [widened(a, b) for a, b in _spans_of(text, pinned)]


def _spans_of(text: str, pinned: object) -> list[Span]:
    """The spans of ``pinned`` in ``text`` as given."""
    if not isinstance(pinned, list | tuple):
        raise InvalidInputError(f"pinned must be a list of substrings or [start, end] pairs, got {pinned!r}")
    spans: list[Span] = []
    for part in pinned:
        if isinstance(part, str) and part.strip():
            found = [(m.start(), m.start() + len(part)) for m in re.finditer(re.escape(part), text)]
            if not found:
                raise InvalidInputError(f"pinned part {part[:60]!r} is not in the text")
            spans += found
        elif (
            isinstance(part, list | tuple)
            and len(part) == 2
            and all(isinstance(i, int) and not isinstance(i, bool) for i in part)
            and 0 <= part[0] < part[1] <= len(text)
        ):
            spans.append((part[0], part[1]))
        else:
            raise InvalidInputError(
                f"pinned part {part!r} is neither a non-empty substring nor a [start, end] pair within "
                f"the text's {len(text)} characters"
            )
    return spans
