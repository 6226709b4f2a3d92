"""Text perturbation: words or sentences as features, rendered back with the text between them."""

from __future__ import annotations

import copy
import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal, cast

import numpy as np

from .._checks import check_int, check_number
from .._exceptions import ConfigError, InvalidInputError
from ..models.classifier import Label
from ..search.rules import Rule
from .base import HideRate, keep_independently
from .embedder import SentenceEmbedder
from .infill import Filler, fill_prompt, fillable, pool_of
from .similar import Similar, StandIns, stand_ins
from .words import WORD

__all__ = [
    "MAX_WORDS",
    "SENTENCE_END",
    "WORD",
    "Span",
    "TextInstance",
    "TextSampler",
    "Unit",
    "mark_spans",
    "sentence_spans",
]


Perturbation = Literal["unk", "delete", "similar", "infill"]
"""What becomes of a hidden feature: replaced by a mask ("unk", Anchors'), deleted, or (a word) replaced by
one of its nearest words ("similar") or by a word a language model puts in its place ("infill")."""
PERTURBATIONS: tuple[Perturbation, ...] = ("unk", "delete", "similar", "infill")

Unit = Literal["word", "sentence", "auto"]
"""What a feature of a text is: a word; a sentence (hidden whole); or "auto": a text of a few sentences or
more is searched coarse to fine (its sentences, then the words inside the anchor's sentences), a shorter one
by words."""

MAX_WORDS = 20_000
"""The longest text explained by default, in words (a long book chapter): a search coarse to fine costs
about as much on it as on an article."""

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
    """The spans of ``pinned`` in ``text``: each a substring (every place it occurs) or a [start, end] pair."""
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


class TextSampler:
    """Perturbs a text by hiding words (or sentences), keeping a rule's.

    ``unit``: what a feature is: a word (Anchors'); a sentence, hidden whole; or "auto" (the default): a
    text of at least ``sentences_from`` sentences is searched coarse to fine (which sentences keep the
    label, then which words inside them, the other sentences hidden as before), a shorter one by words.
    ``p_hide``: the probability that a feature outside the rule is replaced by ``mask``, independently:
    a number (Anchors' own distribution is 0.5); "uniform", a rate drawn for each perturbation from
    U(0, 1) (on a long text a fixed 0.5 keeps half of it in every sample, which often names the label
    whatever the rule is; a drawn rate also asks what the rule holds when most of the text is gone); or
    "auto" (the default): "uniform" for a text searched by sentences, Anchors' 0.5 for one searched by
    words. ``refine_max``: the most words a finer anchor may hold; when no rule of that many words
    inside the anchor's sentences is certified, the sentences are the anchor (a longer list of words
    would say little more than they do). ``max_words`` bounds the input. An input is a str, or a mapping
    ``{"text": str, "pinned": [...]}`` whose pinned parts (substrings, or [start, end] character offsets)
    are never perturbed.
    """

    def __init__(
        self,
        *,
        perturbation: Perturbation = "unk",
        unit: Unit = "auto",
        mask: str = "UNK",
        p_hide: HideRate | Literal["auto"] = "auto",
        max_words: int = MAX_WORDS,
        sentences_from: int = 3,
        refine_max: int = 10,
        similar: Similar | None = None,
        embedder: SentenceEmbedder | None = None,
        filler: Filler | None = None,
    ) -> None:
        if unit not in ("word", "sentence", "auto"):
            raise ConfigError(f"unit must be 'word', 'sentence' or 'auto', got {unit!r}")
        if perturbation not in PERTURBATIONS:
            raise ConfigError(f"unknown perturbation {perturbation!r}; available: {', '.join(PERTURBATIONS)}")
        if p_hide not in ("uniform", "auto"):
            check_number("p_hide", p_hide, high=1.0)
        check_int("max_words", max_words)
        check_int("sentences_from", sentences_from)
        check_int("refine_max", refine_max)
        if not isinstance(mask, str) or not mask.strip():
            raise ConfigError(f"mask must be a non-empty string (it replaces a word), got {mask!r}")
        self.unit: Unit = unit
        self.perturbation: Perturbation = perturbation
        self.mask = mask
        self.similar = similar or Similar()
        self._embedder = embedder
        self.filler = filler
        self._stand_ins: OrderedDict[tuple[str, tuple[Span, ...]], list[StandIns]] = OrderedDict()
        self._lock = threading.Lock()
        self.p_hide: HideRate | Literal["auto"] = p_hide
        self.max_words = max_words
        self.sentences_from = sentences_from
        self.refine_max = refine_max

    @property
    def distribution(self) -> str:
        """The perturbation distribution, in words (the run's configuration names it)."""
        if self.unit != "auto" and self.p_hide != "auto":
            return self._describe(self.unit, self.p_hide)
        return (
            f"auto: a text of {self.sentences_from}+ sentences, "
            f"{self._describe('sentence', self._rate('sentence'))}, then each word of the anchor's sentences and "
            f"each other sentence likewise (an anchor of at most {self.refine_max} of those words); a shorter one, "
            f"{self._describe('word', self._rate('word'))}"
        )

    def describe(self, instance: TextInstance) -> str:
        """The distribution one explanation's precision is about (its claim names it)."""
        return self._describe(instance.unit, instance.p_hide)

    def _describe(self, unit: str, p_hide: HideRate) -> str:
        rate = "a probability drawn per sample from U(0, 1)" if p_hide == "uniform" else f"probability {p_hide:g}"
        what = {"word in sentence": "word of the anchor's sentences and each other sentence"}.get(unit, unit)
        if self.perturbation == "similar":
            by = self.similar.describe(self.embedder, self.mask)
            return f"each {what} outside the anchor replaced, with {rate}, independently, by {by}"
        if self.perturbation == "infill":
            by = "a word its filler model puts in that blank (drawn from the model's alternatives)"
            return (f"each {what} outside the anchor replaced, with {rate}, independently, by {by}; a stop word, "
                    f"a word with no fill, or a sentence, by {self.mask!r}")  # fmt: skip
        done = f"replaced by {self.mask!r}" if self.perturbation == "unk" else "deleted"
        return f"each {what} outside the anchor {done} with {rate}, independently"

    @property
    def embedder(self) -> SentenceEmbedder:
        """Where ``similar`` finds a word's nearest words (default: the packaged all-MiniLM-L6-v2)."""
        if self._embedder is None:
            self._embedder = SentenceEmbedder()
        return self._embedder

    def with_perturbation(self, perturbation: Perturbation) -> TextSampler:
        """This sampler with another perturbation (a second opinion on a rule), every other setting kept."""
        other = copy.copy(self)
        TextSampler.__init__(other, perturbation=perturbation, unit=self.unit, mask=self.mask, p_hide=self.p_hide,
                             max_words=self.max_words, sentences_from=self.sentences_from,
                             refine_max=self.refine_max, similar=self.similar, embedder=self._embedder,
                             filler=self.filler)  # fmt: skip
        return other

    def _rate(self, unit: str) -> HideRate:
        if self.p_hide != "auto":
            return self.p_hide
        return 0.5 if unit == "word" else "uniform"

    def settings(self) -> dict[str, object]:
        return {
            "kind": "text",
            "perturbation": self.perturbation,
            "unit": self.unit,
            "mask": self.mask,
            **({"similar": asdict(self.similar)} if self.perturbation == "similar" else {}),
            "p_hide": self.p_hide,
            "max_words": self.max_words,
            "sentences_from": self.sentences_from,
            "refine_max": self.refine_max,
            "distribution": self.distribution,
        }

    def features(self, x: object) -> TextInstance:
        """Split a text (or ``{"text": ..., "pinned": [...]}``) into its features; reject what cannot be explained."""
        text, pinned = _text_and_pinned(x)
        words = sum(1 for _ in WORD.finditer(text))
        if not words:
            raise InvalidInputError(f"text to explain has no words: {text[:80]!r}")
        if words > self.max_words:
            raise InvalidInputError(
                f"text to explain has {words} words, over the limit of {self.max_words} (max_words, --max-words)"
            )
        unit = self.unit
        if unit == "auto":
            sentences = len(TextInstance.parse(text, "sentence", pinned=pinned).spans)
            unit = "sentence" if sentences >= self.sentences_from else "word"
        instance = TextInstance.parse(text, unit, self._rate(unit), pinned)
        if not instance.spans:
            raise InvalidInputError("every word of the text is pinned: nothing is left to explain")
        return instance

    def refine(self, instance: TextInstance, rule: Rule) -> TextInstance | None:
        """The finer instance a coarse anchor ``rule`` leads to ("auto": the words inside its sentences),
        or None when there is nothing finer to search."""
        if self.unit != "auto" or instance.unit != "sentence" or not rule:
            return None
        return instance.refine(rule, self.refine_max)

    def rule_of(self, x: object, words: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, TextInstance]:
        """The rule a user's anchor names: the positions of ``words`` (each the first unused occurrence,
        exact, else case aside) and, for a text searched by sentences, the sentences holding them (the
        coarse rule the positions are under), as an explanation of it would give them; and the instance
        the positions index."""
        wanted = WORD.findall(words)
        if not wanted:
            raise InvalidInputError(f"the anchor {words!r} has no words")
        instance = self.features(x)
        coarse: tuple[int, ...] | None = None
        if instance.unit == "sentence":
            text = instance.text
            holding = {
                i
                for i, (a, b) in enumerate(instance.spans)
                for w in wanted
                if re.search(rf"\b{re.escape(w)}\b", text[a:b], re.I)
            }
            coarse = tuple(sorted(holding))
            instance = instance.refine(frozenset(coarse))
        lowered, phrase, context = (
            [w.lower() for w in instance.words],
            [w.lower() for w in wanted],
            set(instance.context),
        )
        for start in range(len(lowered) - len(phrase) + 1):  # the words as a phrase of the text, first
            span = range(start, start + len(phrase))
            if lowered[start : span.stop] == phrase and not set(span) & context:
                return tuple(span), coarse, instance
        taken: list[int] = []
        for word in wanted:
            free = [i for i in range(len(instance.words)) if i not in taken and i not in instance.context]
            exact = [i for i in free if instance.words[i] == word]
            loose = [i for i in free if instance.words[i].lower() == word.lower()]
            if not (exact or loose):
                raise InvalidInputError(f"the anchor's word {word!r} is not in the text (or not once more)")
            taken.append((exact or loose)[0])
        return tuple(sorted(taken)), coarse, instance

    def sample_present(self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        """An (n × features) boolean matrix: which words (sentences) each perturbation keeps."""
        return keep_independently(n, len(instance.words), rule, instance.p_hide, rng)

    def sample(
        self, instance: TextInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[list[str], np.ndarray]:
        """``n`` perturbed texts that keep the words of ``rule``, and their matrix."""
        present = self.sample_present(instance, rule, n, rng)
        return self.render(instance, present, rng), present

    def render(
        self, instance: TextInstance, present: Sequence[np.ndarray] | np.ndarray, rng: np.random.Generator | None = None
    ) -> list[str]:
        """The texts of a kept matrix: each hidden feature masked, deleted or (``similar``, ``infill``:
        drawn with ``rng``, after the matrix) replaced by a stand-in."""
        if self.perturbation in ("unk", "delete"):
            return [instance.render(row, self.mask if self.perturbation == "unk" else None) for row in present]
        if rng is None:
            raise ConfigError(f"the {self.perturbation} perturbation draws its stand-ins: render needs the generator")
        fallback: str | None = self.mask
        if self.perturbation == "infill":
            if instance.fills is None:
                raise ConfigError("infill: this input's fills were never asked for (TextSampler.prepare)")
            pools = list(instance.fills)
        else:
            pools = self.stand_ins_of(instance)
            fallback = self.mask if self.similar.fallback == "unk" else None
        picks = [rng.choice(len(p[0]), size=len(present), p=p[1]) if p else None for p in pools]
        return [
            instance.render(
                row, [p[0][k[i]] if p and k is not None else fallback for p, k in zip(pools, picks, strict=True)]
            )
            for i, row in enumerate(present)
        ]

    async def prepare(
        self, instance: TextInstance, ask: Callable[[list[str]], Awaitable[Sequence[Label]]]
    ) -> TextInstance:
        """The instance ready to be perturbed: under ``infill``, with each content word's fills, ``ask``
        (the filler's engine: paid, capped, cached) answering one blanked prompt per word; else itself."""
        if self.perturbation != "infill":
            return instance
        positions = [i for i in fillable(instance.words) if i not in instance.context]
        answers = await ask([fill_prompt(instance.text, instance.spans[i]) for i in positions]) if positions else []
        fills: list[StandIns] = [None] * len(instance.words)
        for i, answer in zip(positions, answers, strict=True):
            fills[i] = pool_of(answer, instance.words[i])
        return replace(instance, fills=tuple(fills))

    def stand_ins_of(self, instance: TextInstance) -> list[StandIns]:
        """Each feature's stand-ins under ``similar`` (none for a sentence), computed once per input."""
        key = (instance.text, instance.spans)
        with self._lock:
            if key in self._stand_ins:
                self._stand_ins.move_to_end(key)
                return self._stand_ins[key]
        words = [w if WORD.fullmatch(w) else None for w in instance.words]
        pools = stand_ins(words, self.embedder, self.similar)
        with self._lock:
            self._stand_ins[key] = pools
            while len(self._stand_ins) > 64:
                self._stand_ins.popitem(last=False)
        return pools


def _text_and_pinned(x: object) -> tuple[str, list[Span]]:
    """The text of an input, and its pinned spans (an input is a str, or a mapping with "text" and "pinned")."""
    pinned: object = []
    if isinstance(x, Mapping):
        record = cast(Mapping[str, object], x)
        if set(record) - {"text", "pinned"} or "text" not in record:
            keys = sorted(map(str, record))
            raise InvalidInputError(f"a text input is a str or {{'text': ..., 'pinned': [...]}}, got keys {keys}")
        x, pinned = record["text"], record.get("pinned", [])
    if not isinstance(x, str):
        raise InvalidInputError(f"text to explain must be a str, got {type(x).__name__}")
    if not x.strip():
        raise InvalidInputError("text to explain is empty or whitespace only")
    try:
        x.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"text to explain is not valid Unicode ({exc.reason} at character {exc.start}): no model can read it"
        ) from None
    return x, pinned_spans(x, pinned)
