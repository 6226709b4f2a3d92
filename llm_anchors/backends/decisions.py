"""Decision endpoints: a classification question about an input, answered with a probability per class.

Two shapes of the same request, one input a request, one choice question whose choices are the labels:

- **OpenAI's** ``POST /v1/decisions`` (``openai/types/decision*.py``, SDK 3.26+): ``{"model", "input",
  "questions": [{"type": "choice", "name", "instructions", "choices": [{"value"}]}]}`` answered by
  ``{"answers": [{"type": "choice", "choice", "confidence", "probabilities": [{"value", "probability"}]}
  | {"type": "refusal", "name"}], "usage": {"input_tokens", "input_tokens_details": {"cached_tokens",
  "cache_write_tokens"}, "output_tokens", "output_tokens_details": {"reasoning_tokens"}}}``.
- **vLLM's and llama-server's** ``POST /v1/systemone``: ``{"model", "state", "questions": {id: {"type":
  "choice", "instructions", "criteria": {label: null}}}}`` answered by ``{"answers": {id: {"type":
  "choice", "choice", "probabilities": {label: p}, "confidence"}}, "usage": {"input_tokens",
  "output_tokens"}}`` (for models whose template has a decision format; others answer 501).

The input is the classifier's rendered prompt; the question asks for one of the labels (`INSTRUCTIONS`).
A class's probability is the answer's, read as the first token's alternatives (its log); a refusal is
an answer that names no label (`UNPARSED`). The question's own tokens are billed as input: a call is
reserved with them (`DecisionCounter`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from .. import BadResponseError, ConfigError
from ..extend import AnswerWarning, Completion, TokenCount, TokenCounter

__all__ = ["INSTRUCTIONS", "DecisionCounter", "Shape", "decision_body", "probabilities", "read_decision", "unasked"]

Shape = Literal["decisions", "systemone"]
QUESTION = "label"
INSTRUCTIONS = "Which label does the model give this input? Answer with one of the choices."
_OVERHEAD = 32
"""Tokens a decision request may add around its input and question (roles, a template), reserved."""


def decision_body(shape: Shape, model: str, prompt: str, labels: Sequence[str]) -> dict[str, Any]:
    """The request asking which of ``labels`` ``prompt`` is given."""
    if len(labels) < 2:
        raise ConfigError("a decision needs the labels as its choices (CompletionParams.answers): got fewer than 2")
    if shape == "decisions":
        choices = [{"value": label} for label in labels]
        asked: dict[str, Any] = {"type": "choice", "name": QUESTION, "instructions": INSTRUCTIONS, "choices": choices}
        return {"model": model, "input": prompt, "questions": [asked]}
    criteria = dict.fromkeys(labels)
    question: dict[str, Any] = {"type": "choice", "instructions": INSTRUCTIONS, "criteria": criteria}
    return {"model": model, "state": prompt, "questions": {QUESTION: question}}


def read_decision(shape: Shape, raw: dict[str, Any], who: str, labels: Sequence[str] = ()) -> Completion:
    """The answer as a completion: the choice as its text (and its chosen token), each label's
    probability as its alternatives (log); a refusal as an empty answer (read as `UNPARSED`).

    Only the classes asked (``labels``, when given) are read (the others are said, `AnswerWarning`, once
    per set of classes). The choice is the answer, never another class; probabilities that cannot all
    be read (one not a number, below 0, above 1 by more than rounding, a class given twice) say nothing
    (`llm_anchors.models.answer`)."""
    answers = raw.get("answers")
    try:
        answer = answers[0] if shape == "decisions" else answers[QUESTION]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        raise BadResponseError("a decision with no answer to its question", classifier=who) from None
    if not isinstance(answer, dict) or answer.get("type") == "refusal":
        return Completion("")
    if answer.get("type") != "choice" or not isinstance(answer.get("choice"), str):
        raise BadResponseError(f"a decision answered {answer.get('type')!r}, not a choice", classifier=who)
    choice, said = answer["choice"], answer.get("probabilities")
    if extra := unasked(said, labels) if labels else []:
        warnings.warn(f"the decision endpoint gave probabilities for classes that were not asked ({', '.join(extra)}): "
                      f"only the labels' ({', '.join(labels)}) are read", AnswerWarning, stacklevel=4)  # fmt: skip
    return Completion(choice, probabilities(said, labels), chosen=choice)


def probabilities(said: Any, labels: Sequence[str] = ()) -> list[tuple[str, float]] | None:
    """Each class asked (every class said, when ``labels`` is empty) with its log-probability, as pairs
    in the order said, from OpenAI's ``[{"value", "probability"}]`` or vLLM's ``{label: p}``: a
    probability as its log (0 as −inf), anything else as NaN, for the classifier's reader to judge
    (`llm_anchors.models.answer`: a class given twice, or a value that is no probability, and the
    answer carries none). None when they are of no shape known."""
    if isinstance(said, list):
        if not all(isinstance(p, dict) for p in said):
            return None
        pairs = [(p.get("value"), p.get("probability")) for p in said]
    elif isinstance(said, dict):
        pairs = list(said.items())
    else:
        return None
    asked = set(labels)
    return [(str(v), _log(p)) for v, p in pairs if not asked or v in asked] or None


def _log(value: Any) -> float:
    """A probability's log (above 1 it reads above 0: the reader decides whether that is rounding); NaN,
    which the reader refuses, for anything that is not a number at least 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return math.nan
    return math.log(value) if value > 0 else -math.inf


def unasked(said: Any, labels: Sequence[str]) -> list[str]:
    """The classes a decision's probabilities name that were not asked (a model's own classes)."""
    if isinstance(said, list):
        names = [p.get("value") for p in said if isinstance(p, dict)]
    else:
        names = list(said) if isinstance(said, dict) else []
    return sorted({str(v) for v in names if v not in labels})


class DecisionCounter:
    """Input tokens of a decision: the prompt's (by ``inner``), the question's (its instructions and
    choices, counted the same way) and `_OVERHEAD` more; marked an estimate. The choices are the
    classifier's labels: `LLMClassifier` hands them over (`with_answers`) when it takes the counter."""

    def __init__(self, inner: TokenCounter, labels: Sequence[str] = ()) -> None:
        self.inner = inner
        self.labels = tuple(labels)

    def with_answers(self, labels: Sequence[str]) -> DecisionCounter:
        return DecisionCounter(self.inner, labels)

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        question = " ".join([INSTRUCTIONS, *self.labels, *([QUESTION] * len(self.labels))])
        counted = await self.inner.count([*prompts, question])
        *tokens, asked = counted.tokens
        return TokenCount([t + asked + _OVERHEAD for t in tokens], estimated=True)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
