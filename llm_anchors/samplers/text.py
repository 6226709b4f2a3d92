"""`TextSampler`: how a text is split (`TextInstance`) and perturbed: which features hide, what becomes of them."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, replace
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
from .text_instance import Span, TextInstance, pinned_spans
from .words import WORD

__all__ = ["MAX_WORDS", "PERTURBATIONS", "Perturbation", "TextSampler", "Unit"]


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
        self._siblings: dict[Perturbation, TextSampler] = {}
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
        """This sampler with another perturbation (a second opinion on a rule), every other setting kept: made
        once per operator, so its embedder and stand-ins are not loaded and computed again on every call."""
        if perturbation == self.perturbation:
            return self
        with self._lock:
            if perturbation not in self._siblings:
                self._siblings[perturbation] = TextSampler(
                    perturbation=perturbation, unit=self.unit, mask=self.mask, p_hide=self.p_hide,
                    max_words=self.max_words, sentences_from=self.sentences_from, refine_max=self.refine_max,
                    similar=self.similar, embedder=self._embedder, filler=self.filler,
                )  # fmt: skip
            return self._siblings[perturbation]

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
        instance = None
        if self.unit != "word":  # by sentences, if there are enough of them ("auto")
            instance = TextInstance.parse(text, "sentence", self._rate("sentence"), pinned)
            if self.unit == "auto" and len(instance.spans) < self.sentences_from:
                instance = None
        if instance is None:
            instance = TextInstance.parse(text, "word", self._rate("word"), pinned)
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
            finer = self.refine(instance, frozenset(coarse))
            if finer is None:  # no sentence holds the words, or sentences are the features ("sentence")
                raise InvalidInputError(f"the anchor {words!r} names no words this sampler can search in the text")
            instance = finer
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
            free = [i for i in range(len(instance.words)) if i not in taken and i not in context]
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
