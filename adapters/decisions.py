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
from typing import Any, Literal, TypeGuard

from llm_anchors import BadResponseError, ConfigError
from llm_anchors.extend import AnswerWarning, Completion, TokenCount, TokenCounter

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
    per set of classes). Probabilities that cannot all be read (one
    not a number, below 0, above 1 by more than rounding, a class given twice) say nothing: the choice
    alone is the answer, never another class (`probabilities`)."""
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


_ROUNDING = 1e-6  # a softmax may sum a probability one ulp past 1


def probabilities(said: Any, labels: Sequence[str] = ()) -> dict[str, float] | None:
    """The log-probability of each class asked (every class said, when ``labels`` is empty), from
    OpenAI's ``[{"value", "probability"}]`` or vLLM's ``{label: p}``; None when any of them cannot be
    read (a value not in [0, 1], a class given twice, an entry of another shape). A class at 0 is
    left out (it names nothing), as the classes not asked are."""
    if isinstance(said, list):
        if not all(isinstance(p, dict) for p in said):
            return None
        pairs = [(p.get("value"), p.get("probability")) for p in said]
    elif isinstance(said, dict):
        pairs = list(said.items())
    else:
        return None
    asked = set(labels)
    pairs = [(v, p) for v, p in pairs if not asked or v in asked]
    names = [v for v, _ in pairs]
    if len(set(names)) != len(names) or not all(isinstance(v, str) and _probability(p) for v, p in pairs):
        return None
    return {v: math.log(min(p, 1.0)) for v, p in pairs if p > 0} or None


def unasked(said: Any, labels: Sequence[str]) -> list[str]:
    """The classes a decision's probabilities name that were not asked (a model's own classes)."""
    if isinstance(said, list):
        names = [p.get("value") for p in said if isinstance(p, dict)]
    else:
        names = list(said) if isinstance(said, dict) else []
    return sorted({str(v) for v in names if v not in labels})


def _probability(value: Any) -> TypeGuard[float]:
    """A probability: a number in [0, 1] (up to rounding; not NaN, not a boolean)."""
    return isinstance(value, float | int) and not isinstance(value, bool) and 0 <= value <= 1 + _ROUNDING


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
