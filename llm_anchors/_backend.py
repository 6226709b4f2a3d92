"""The `Backend` protocol: how an LLM is asked to complete prompts.

Adapters (``adapters/``) implement it for real servers; `MockBackend`
answers from a Python function, with a set latency, for tests and
benchmarks that must repeat exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ._classifier import Usage
from ._exceptions import ConfigError

__all__ = ["Backend", "Completion", "CompletionParams", "Completions", "MockBackend"]


@dataclass(frozen=True)
class CompletionParams:
    """Decoding settings: a label needs one greedy token and its alternatives."""

    max_tokens: int = 1
    temperature: float = 0.0
    top_logprobs: int = 5


@dataclass(frozen=True)
class Completion:
    """One prompt's answer: the text, and the log-probabilities of the
    alternatives for the first generated token when the server gave them."""

    text: str
    top_logprobs: dict[str, float] | None = None


@dataclass(frozen=True)
class Completions:
    """Answers to a list of prompts, in order, and the tokens they cost.

    ``usage_prompts`` is how many of the prompts the reported usage covers
    (llama-server reports the first prompt's only for a list).
    """

    items: list[Completion]
    usage: Usage = field(default_factory=Usage)
    usage_prompts: int | None = None


@runtime_checkable
class Backend(Protocol):
    """Completes prompts. ``identity`` names the model, not the endpoint:
    replicas of one model share it (and the query cache)."""

    @property
    def identity(self) -> str: ...

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions: ...

    async def aclose(self) -> None: ...


class MockBackend:
    """Answers each prompt with ``answer(prompt)`` after ``latency`` seconds.

    ``answer_batch`` (list of prompts -> list of answers) replaces
    ``answer`` when the answers are cheaper to compute together. With
    ``logprobs`` the answer comes as the first token's alternatives (the
    answer at -0.05, then ``others`` lower), the way a server with logprobs
    replies. Usage counts whitespace tokens; with ``report_usage=False``
    none is reported and the classifier counts tokens itself. It runs in
    this process (``is_local``): its tokens cost nothing unless a
    ``price`` is given to the classifier.
    """

    is_local = True

    def __init__(
        self,
        answer: Callable[[str], str] | None = None,
        *,
        answer_batch: Callable[[list[str]], list[str]] | None = None,
        latency: float = 0.0,
        logprobs: bool = True,
        others: Sequence[str] = (),
        report_usage: bool = True,
        name: str = "mock",
    ) -> None:
        if (answer is None) == (answer_batch is None):
            raise ConfigError("MockBackend needs exactly one of answer and answer_batch")
        self.answer = answer
        self.answer_batch = answer_batch
        self.report_usage = report_usage
        self.latency = latency
        self.logprobs = logprobs
        self.others = list(others)
        self.name = name
        self.calls: list[list[str]] = []

    @property
    def identity(self) -> str:
        return f"mock:{self.name}"

    is_local = True

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions:
        self.calls.append(list(prompts))
        if self.latency:
            await asyncio.sleep(self.latency)
        answers = self._answers(list(prompts))
        items = []
        for answer in answers:
            text = " " + answer
            top = None
            if self.logprobs:
                top = {text: -0.05}
                top.update({" " + o: -3.0 - i for i, o in enumerate(self.others) if " " + o != text})
            items.append(Completion(text, top))
        if not self.report_usage:
            return Completions(items)
        usage = Usage(sum(len(p.split()) for p in prompts), len(prompts) * params.max_tokens)
        return Completions(items, usage, len(prompts))

    def _answers(self, prompts: list[str]) -> list[str]:
        if self.answer_batch is not None:
            return self.answer_batch(prompts)
        assert self.answer is not None
        return [self.answer(p) for p in prompts]

    async def aclose(self) -> None:
        return None
