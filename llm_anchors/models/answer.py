"""How an LLM's answer is read: the label its text names, and what its first token's alternatives say.

One rule, for every endpoint and shape of answer: **the label is what the answer's text (a decision's
choice) names; the alternatives only score the labels and never choose one.** A text naming no label is
`UNPARSED`, however likely a label was among the alternatives.

The alternatives are read whole or not at all (`log_probabilities`): every value a log-probability,
no token listed twice, their probabilities summing to at most 1, and the generated token among them;
and they describe the answer only when the generated token counts for the label read (for none, when
it names none). An answer whose alternatives fail any of these carries no probabilities; its label
still judges.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .classifier import UNPARSED, Label, Probabilities


@dataclass(frozen=True)
class Place:
    """Where an answer names its label: its message's ``content``; a field (``path``) of the JSON its content
    holds; or a field (``path``) of the arguments of its call of ``tool``."""

    kind: Literal["content", "json", "tool"] = "content"
    path: tuple[str, ...] = ()
    tool: str | None = None

    def __str__(self) -> str:
        field = ".".join(self.path)
        return {"content": "the message's content", "json": f"the JSON field {field!r}",
                "tool": f"the argument {field!r} of the tool {self.tool!r}"}[self.kind]  # fmt: skip


__all__ = [
    "MIN_PREFIX", "ROUNDING", "Alternatives", "LabelReader", "Place", "Token", "answered", "generated",
    "log_probabilities", "normal", "read_at",
]  # fmt: skip

Alternatives = Mapping[str, Any] | Sequence[tuple[str, Any]]
"""A first token's alternatives as a server said them: token -> log-probability, or (token,
log-probability) pairs in the order said (a token may be listed twice; a value may be anything)."""

ROUNDING = 1e-3
"""How far above 0 a log-probability (and above 1 a sum of probabilities) may read and still be one:
a server's rounding of a certain token."""

MIN_PREFIX = 3
"""A text shorter than this names a label only if it spells it whole."""

_LEADING = "\"'`*_:([ "  # what a model may put before its answer (a quote, markdown's emphasis)


def normal(text: str) -> str:
    """An answer or a label as compared: lower case, single spaces, no leading quote, mark or space."""
    return " ".join(text.lower().split()).lstrip(_LEADING)


def log_probabilities(said: Alternatives | None, text: str, chosen: str | None = None) -> dict[str, float] | None:
    """The alternatives by token, when they can be read whole, else None.

    They can be when every token is a string listed once, every value a log-probability (a number, not
    NaN, at most `ROUNDING` above 0; −inf is probability 0), their probabilities sum to at most
    1 + `ROUNDING`, and the generated token is among them: ``chosen`` when the server names it, else
    the longest alternative the text begins with, letter for letter.
    """
    if not said:
        return None
    pairs = list(said.items()) if isinstance(said, Mapping) else list(said)
    tokens = [token for token, _ in pairs]
    if not all(isinstance(t, str) for t in tokens) or len(set(tokens)) != len(tokens):
        return None
    values = [_log_probability(value) for _, value in pairs]
    if any(v is None for v in values):
        return None
    read = {token: float(v) for token, v in zip(tokens, values, strict=True) if v is not None}
    if math.fsum(math.exp(v) for v in read.values()) > 1 + ROUNDING:
        return None
    return read if generated(read, text, chosen) is not None else None


def generated(alternatives: Mapping[str, Any], text: str, chosen: str | None = None) -> str | None:
    """The token an answer's text was generated from, when it is among ``alternatives``: ``chosen``
    when the server names it, else the longest alternative the text begins with, letter for letter."""
    if chosen is not None:
        return chosen if chosen in alternatives else None
    begun = [token for token in alternatives if token and text.startswith(token)]
    return max(begun, key=len) if begun else None


def _log_probability(value: Any) -> float | None:
    """``value`` as a log-probability (at most 0), or None when it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value > ROUNDING:
        return None
    return min(float(value), 0.0)


class LabelReader:
    """Reads answers against a classifier's labels: the label a text names (`label`) and the probability
    the first token gives each label (`probabilities`)."""

    def __init__(self, labels: Sequence[str]) -> None:
        self._normal = {label: normal(label) for label in labels}

    def label(self, text: str) -> Label:
        """The label ``text`` spells (the longest, ending where a word ends: "pos" is not "positive"),
        else the one label it begins, by at least `MIN_PREFIX` letters (an answer cut short: "posit"),
        else `UNPARSED`."""
        said = normal(text)
        if not said:
            return UNPARSED
        if (spelled := self._spelled(said)) is not None:
            return spelled
        begun = self._begun(said)
        return begun[0] if len(begun) == 1 and len(said) >= MIN_PREFIX else UNPARSED

    def probabilities(
        self, text: str, alternatives: Mapping[str, float] | None, chosen: str | None = None
    ) -> Probabilities | None:
        """Each label's probability from an answer's readable alternatives (`log_probabilities`): the sum
        over the tokens that count for that label (`_counts_for`). None without alternatives, or when
        the generated token does not count for the label ``text`` names (for none, when it names none):
        they then describe another answer than the one read."""
        if alternatives is None:
            return None
        own = generated(alternatives, text, chosen)
        label = self.label(text)
        if own is None or self._counts_for(own) != (set() if label == UNPARSED else {label}):
            return None
        out: Probabilities = dict.fromkeys(self._normal, 0.0)
        for token, logprob in alternatives.items():
            if len(could := self._counts_for(token)) == 1:
                out[could.pop()] += math.exp(logprob)
        return {label: min(p, 1.0) for label, p in out.items()}

    def _counts_for(self, token: str) -> set[Label]:
        """The labels a first token could start: spelling one whole (" Positive", "positive."), or
        beginning it by any number of letters ("pos", "P"). A token that could start two ("positive" of
        "positive" and "positive mixed") counts for neither: its probability is left out."""
        said = normal(token)
        if not said:
            return set()
        could = set(self._begun(said))
        if (spelled := self._spelled(said)) is not None:
            could.add(spelled)
        return could

    def _begun(self, said: str) -> list[Label]:
        """The labels the normalised answer ``said`` begins (by any number of letters)."""
        return [label for label, n in self._normal.items() if n.startswith(said)]

    def _spelled(self, said: str) -> Label | None:
        """The longest label the normalised answer ``said`` spells whole, not the start of a longer word."""
        spelled = [
            label for label, n in self._normal.items() if said.startswith(n) and not said[len(n) :][:1].isalnum()
        ]
        return max(spelled, key=lambda label: len(self._normal[label])) if spelled else None


Token = tuple[str, Alternatives | None]
"""One output token as the server said it, with its alternatives (its own log-probability among them)."""


def read_at(
    reader: LabelReader,
    place: Place,
    text: str,
    tokens: Sequence[Token] | None = None,
    calls: Sequence[tuple[str, str]] = (),
) -> tuple[Label, Probabilities | None]:
    """The label an answer names at ``place`` (`Place`), and the probabilities its tokens give the labels
    there: for a JSON field, those of the token where the field's value begins (less what precedes the
    value in that token); none for a tool call's argument (providers give no log-probabilities there).
    An answer that does not parse, lacks the field, or holds there no string naming a label is
    `UNPARSED`, never another label."""
    if place.kind == "tool":
        arguments = next((a for name, a in calls if place.tool in (None, name)), None)
        value = _field(_json(arguments), place.path)
        return (reader.label(value) if isinstance(value, str) else UNPARSED), None
    value = _field(_json(text), place.path)
    if not isinstance(value, str):
        return UNPARSED, None
    label = reader.label(value)
    start = _value_start(text, place.path[-1], value) if place.path else None
    at = _token_at(tokens, text, start) if tokens is not None and start is not None else None
    if at is None or start is None:
        return label, None
    alternatives, chosen = at
    rest = text[start:]
    return label, reader.probabilities(rest, log_probabilities(alternatives, rest, chosen), chosen)


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _field(value: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _value_start(text: str, key: str, value: str) -> int | None:
    """Where, in the JSON ``text``, the string ``value`` of the field ``key`` begins (after its quote)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(rf"{re.escape(json.dumps(key))}\s*:\s*\"", text):
        try:
            said, _ = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            continue
        if said == value:
            return match.end()
    return None


def _token_at(tokens: Sequence[Token], text: str, start: int) -> tuple[list[tuple[str, Any]], str] | None:
    """The alternatives of the token in which ``text`` reaches ``start``, and the token generated, each less
    what precedes ``start`` in it (an alternative that does not begin so is left out); None when the
    tokens do not spell the text up to that token's end (what follows it, a server may trim)."""
    offset = 0
    for token, said in tokens:
        if text[offset : offset + len(token)] != token:
            return None
        if offset <= start < offset + len(token):
            prefix = text[offset:start]
            pairs = list(said.items()) if isinstance(said, Mapping) else list(said or [])
            kept = [(t[len(prefix) :], lp) for t, lp in pairs if isinstance(t, str) and t.startswith(prefix)]
            return kept, token[len(prefix) :]
        offset += len(token)
    return None


class _Said(Protocol):
    """What an answer said, as `Completion` holds it."""

    @property
    def text(self) -> str: ...

    @property
    def cut(self) -> bool: ...

    @property
    def chosen(self) -> str | None: ...

    @property
    def tokens(self) -> tuple[Token, ...] | None: ...

    @property
    def calls(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def alternatives(self) -> dict[str, float] | None: ...


def answered(reader: LabelReader, place: Place | None, completion: _Said) -> tuple[Label, Probabilities | None]:
    """What a completion says, read once: the label it names where it is read (its text; a request's JSON
    field or tool argument, `read_at`), or `UNPARSED`; and each label's probability as its tokens say
    (`LabelReader.probabilities`), None when they cannot be read whole or do not describe the label read.
    An answer cut short at the output bound says neither."""
    if completion.cut:
        return UNPARSED, None
    if place is not None and place.kind != "content":
        return read_at(reader, place, completion.text, completion.tokens, completion.calls)
    label = reader.label(completion.text)
    return label, reader.probabilities(completion.text, completion.alternatives, completion.chosen)
