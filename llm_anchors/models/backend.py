"""The `Backend` protocol: how an LLM is asked to complete prompts.

Backends (``llm_anchors.backends``) implement it for real servers; `MockBackend`
answers from a Python function, with a set latency, for tests and
benchmarks that must repeat exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, cast, runtime_checkable

from .._complete import Completed
from .._exceptions import ConfigError
from ..money.charge import Charge
from ..money.tokens import TokenCounter
from .answer import Alternatives, Token, log_probabilities

__all__ = [
    "Backend", "BaseBackend", "Completion", "CompletionParams", "Completions", "MockBackend", "as_backend",
]  # fmt: skip


@dataclass(frozen=True)
class CompletionParams:
    """Decoding settings: a label needs one greedy token and its alternatives.

    ``max_tokens`` bounds every output token of an answer, a reasoning
    model's hidden reasoning included (sent to such a model as
    ``max_completion_tokens``); the budget reserves it for every prompt.
    ``answers`` (the labels) never change the answer read, only which alternatives a server reports.
    """

    max_tokens: int = 1
    temperature: float = 0.0
    top_logprobs: int = 5
    answers: tuple[str, ...] = ()
    """The answers whose first token's log-probability is wanted whatever the top ``top_logprobs`` are
    (`LLMClassifier`'s labels): a server that can say exactly those (vLLM's ``logprob_token_ids``) is
    asked for them and the token it chose instead of its top alternatives; others ignore it."""

    @classmethod
    def for_reasoning(cls, max_tokens: int = 256) -> CompletionParams:
        """A reasoning model's: room to reason before the label, and no log-probabilities (OpenAI's
        reasoning models refuse them, and a temperature other than their own)."""
        return cls(max_tokens=max_tokens, top_logprobs=0)

    @classmethod
    def for_decisions(cls, max_tokens: int = 16) -> CompletionParams:
        """A decision endpoint's (a backend whose ``decides`` is true): nothing is generated, but its
        bill may hold output and reasoning tokens: ``max_tokens`` is what each call reserves for them
        (a bill above it is disputed like any usage that cannot be true)."""
        return cls(max_tokens=max_tokens)


@dataclass(frozen=True)
class Completion:
    """One prompt's answer: the text, and the alternatives for the first generated token as the server
    said them (token -> log-probability, or pairs in the order said), when it gave them.
    ``cut``: the answer ended at the output bound before any text (a reasoning model that spent the
    bound reasoning: ``finish_reason`` "length", empty). ``chosen``: the first token the server says
    it generated (its alternative of that name is its log-probability), when it says; a decision's
    choice. What is read of them is `answer`'s: the label from ``text``, and `alternatives`."""

    text: str
    top_logprobs: Alternatives | None = None
    cut: bool = False
    chosen: str | None = None
    tokens: tuple[Token, ...] | None = None
    """Every output token with its alternatives, when the server gave them (a label read inside JSON)."""
    calls: tuple[tuple[str, str], ...] = ()
    """The tools the answer called, each with its arguments (JSON text)."""

    @cached_property
    def alternatives(self) -> dict[str, float] | None:
        """The first token's alternatives by token when they can be read whole (`log_probabilities`),
        else None: then they say nothing."""
        return log_probabilities(self.top_logprobs, self.text, self.chosen)


@dataclass(frozen=True)
class Completions:
    """Answers to a list of prompts, in order, and the tokens they cost.

    ``usage_prompts`` is how many of the prompts the reported usage covers
    (llama-server reports the first prompt's only for a list);
    ``service_tier`` the tier the server says it served them at (OpenAI's
    ``"default"``, ``"flex"``, ``"priority"``; None when it does not say).
    """

    items: list[Completion]
    usage: Charge = field(default_factory=Charge)
    usage_prompts: int | None = None
    service_tier: str | None = None
    usage_error: str = ""
    """Why the usage the server reported could not be read ("" when it could): the classifier
    then counts the call at its own worst case."""
    served_model: str | None = None
    """The model the answer says served it (OpenAI's ``model``: ``gpt-4o-mini-2024-07-18`` for
    ``gpt-4o-mini``); None when it does not say. Another model than asked, dearer, is billed as it."""


@runtime_checkable
class Backend(Protocol):
    """Completes prompts: the LLM behind an `LLMClassifier`.

    ``identity`` names the model, not the endpoint: replicas of one model
    share it (and the query cache). `complete` answers a list of prompts.
    The other members say how to price and send prompts; `BaseBackend`
    gives each a safe default, and `as_backend` fills them in for an object
    that has only ``identity`` and ``complete``:

    - ``model``: the model's name, to look up its price (None: unknown, so
      the classifier needs an explicit ``price=``);
    - ``is_local``: True only when the model runs here and its tokens cost
      nothing (default False: unknown means hosted, and priced);
    - ``api_url``: where the model is served (``https://api.openai.com/v1``),
      which tells its provider's prices apart (None: unknown);
    - ``service_tier``: the tier its requests ask for (``"flex"``), which
      prices them (None: the standard tier);
    - ``reasoning_effort``: how hard a reasoning model is asked to think
      (``"minimal"``), None for a model that does not reason: a reasoning
      model's answers need room for their reasoning (`CompletionParams.for_reasoning`);
    - ``max_request_size``: prompts one HTTP request takes (None: any);
    - `token_counter`: an exact prompt-token counter (None: a marked estimate);
    - ``served_model`` (optional, read with getattr): the name requests send when it is not ``model``
      (a gateway's alias, an Azure deployment): an answer naming it names the model asked;
    - ``decides`` (optional, read with getattr): True for a decision endpoint, which answers with the
      labels' probabilities (`CompletionParams.for_decisions`);
    - `aclose`: release connections (by default nothing).
    """

    @property
    def identity(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def is_local(self) -> bool: ...

    @property
    def api_url(self) -> str | None: ...

    @property
    def service_tier(self) -> str | None: ...

    @property
    def reasoning_effort(self) -> str | None: ...

    @property
    def max_request_size(self) -> int | None: ...

    def token_counter(self) -> TokenCounter | None: ...

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions: ...

    async def aclose(self) -> None: ...


_BACKEND_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "model": str, "is_local": bool, "api_url": str, "service_tier": str, "reasoning_effort": str,
    "max_request_size": int,
}  # fmt: skip


class BaseBackend:
    """The optional `Backend` members with their defaults; subclass it and
    write ``identity`` and ``complete``."""

    @property
    def model(self) -> str | None:
        return None

    @property
    def is_local(self) -> bool:
        return False

    @property
    def api_url(self) -> str | None:
        return None

    @property
    def service_tier(self) -> str | None:
        return None

    @property
    def reasoning_effort(self) -> str | None:
        return None

    @property
    def max_request_size(self) -> int | None:
        return None

    def token_counter(self) -> TokenCounter | None:
        return None

    async def aclose(self) -> None:
        return None


def as_backend(obj: Any) -> Backend:
    """``obj`` as a full `Backend`: itself when it has every member, else with the defaults
    of `BaseBackend` for those it lacks. `ConfigError` without ``identity`` and ``complete``."""
    if not hasattr(obj, "identity") or not callable(getattr(obj, "complete", None)):
        raise ConfigError(f"{obj!r} is not a Backend (it needs .identity and async .complete)")
    if isinstance(obj, Backend):
        return obj
    methods = ("token_counter", "aclose")
    return cast(Backend, Completed(obj, BaseBackend(), _BACKEND_OPTIONAL, methods))


class MockBackend(BaseBackend):
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

    @property
    def is_local(self) -> bool:
        return True

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
        usage = Charge(len(prompts), sum(len(p.split()) for p in prompts), len(prompts) * params.max_tokens)
        return Completions(items, usage, len(prompts))

    def _answers(self, prompts: list[str]) -> list[str]:
        if self.answer_batch is not None:
            return self.answer_batch(prompts)
        assert self.answer is not None
        return [self.answer(p) for p in prompts]
