"""The one exception tree of llm-anchors.

```
LLMAnchorsError
├── InvalidInputError        bad text or argument given to an explainer
├── ConfigError              an impossible combination of settings
├── ClassifierError          the explained model failed or answered badly
│   ├── BackendError         a remote model server failed
│   │   ├── RateLimitError
│   │   ├── BackendTimeoutError
│   │   ├── UnreachableError  no connection could be made: the request never left (never billed)
│   │   ├── BadResponseError
│   │   └── RequestRejectedError  the server refused the request as sent (HTTP 400): ``param`` says what
│   │       └── PromptTooLongError  the prompt does not fit the model's context (an InvalidInputError too)
│   └── NoLabelError          the model's answer to the input names no label (an InvalidInputError too)
├── ServerUnavailableError   the model's server failed calls in a row: nothing more is sent
└── BudgetExceeded           the spend cap would be passed
```

Adapters map their SDK's exceptions into this tree at the boundary, so
callers and the retry policy only ever see these types.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AnswerWarning",
    "BackendError",
    "BackendTimeoutError",
    "BadResponseError",
    "BudgetExceeded",
    "ClassifierError",
    "ConfigError",
    "InvalidInputError",
    "LLMAnchorsError",
    "NoLabelError",
    "NondeterminismWarning",
    "OutputCutWarning",
    "PromptCacheWarning",
    "PromptTooLongError",
    "RateLimitError",
    "RequestRejectedError",
    "ServerUnavailableError",
    "SetAsideWarning",
    "UnreachableError",
]


class LLMAnchorsError(Exception):
    """Root of every error raised by llm-anchors."""


class InvalidInputError(LLMAnchorsError, ValueError):
    """The input to explain is empty, too long or not text."""


class ConfigError(LLMAnchorsError, ValueError):
    """A parameter is out of range or settings contradict each other."""


class ClassifierError(LLMAnchorsError):
    """The explained classifier raised or returned something unusable.

    `classifier` names the classifier, so a stream of explanations over
    several models says which one failed.
    """

    def __init__(self, message: str, *, classifier: str) -> None:
        super().__init__(f"{classifier}: {message}")
        self.classifier = classifier
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its keyword arguments, so it crosses processes (a Ray worker's error) whole."""
        return _rebuild, (type(self), self.message, self._keywords())

    def _keywords(self) -> dict[str, Any]:
        return {"classifier": self.classifier}


class BackendError(ClassifierError):
    """A model server could not answer.

    ``status`` is the HTTP status when there was one; ``retryable`` says
    whether the same request may succeed later (5xx: yes; other 4xx: no);
    ``sent``: whether the request left for the model (False: a step before
    it failed, a probe or a token count it needed); ``billable``: whether the
    call may have been billed, so that it counts as queries and at its
    worst case (an answer that came, however refused, was not; one that did
    not come, or came garbled, may have been).
    """

    bills = False  # what a failure of this kind costs when its request was sent

    def __init__(self, message: str, *, classifier: str, status: int | None = None, sent: bool = True) -> None:
        super().__init__(message, classifier=classifier)
        self.status = status
        self.sent = sent

    def _keywords(self) -> dict[str, Any]:
        return {**super()._keywords(), "status": self.status, "sent": self.sent}

    @property
    def billable(self) -> bool:
        return self.sent and self.bills

    @property
    def retryable(self) -> bool:
        return self.status is not None and self.status >= 500


class RateLimitError(BackendError):
    """The server answered 429; ``retry_after`` is its hint in seconds."""

    def __init__(self, message: str, *, classifier: str, retry_after: float | None = None) -> None:
        super().__init__(message, classifier=classifier, status=429)
        self.retry_after = retry_after

    def _keywords(self) -> dict[str, Any]:
        return {"classifier": self.classifier, "retry_after": self.retry_after}

    @property
    def retryable(self) -> bool:
        return True


class BackendTimeoutError(BackendError):
    """The server did not answer in time, or the connection dropped."""

    bills = True

    @property
    def retryable(self) -> bool:
        return True


class UnreachableError(BackendError):
    """No connection to the server could be made (refused, no route, a name not found, a proxy that
    refused to connect, a connect timeout): the request never left this machine, so nothing can have
    been billed. Retried like a timeout."""

    @property
    def retryable(self) -> bool:
        return True


class BadResponseError(BackendError):
    """The server answered, but not in a shape that can be read.

    ``transient``: the body was not JSON at all (cut short, or a proxy's HTML
    page): the same request may well succeed, so it is retried. JSON of the
    wrong shape is not retried.
    """

    bills = True

    def __init__(
        self, message: str, *, classifier: str, status: int | None = None, transient: bool = False, sent: bool = True
    ) -> None:
        super().__init__(message, classifier=classifier, status=status, sent=sent)
        self.transient = transient

    def _keywords(self) -> dict[str, Any]:
        return {**super()._keywords(), "transient": self.transient}

    @property
    def retryable(self) -> bool:
        return self.transient


class RequestRejectedError(BackendError):
    """The server refused the request as sent (HTTP 400, or refused before sending): resending it
    cannot help. ``param`` names what it refused, when it says (vLLM: ``logprobs``, ``input_tokens``)."""

    def __init__(
        self, message: str, *, classifier: str, status: int | None = 400, param: str | None = None, sent: bool = True
    ) -> None:
        super().__init__(message, classifier=classifier, status=status, sent=sent)
        self.param = param

    def _keywords(self) -> dict[str, Any]:
        return {**super()._keywords(), "param": self.param}


class PromptTooLongError(RequestRejectedError, InvalidInputError):
    """A prompt and its output bound do not fit the model's context: the input is too long for this
    model and prompt (an `InvalidInputError` of the input, never retried, never billed)."""


class NoLabelError(ClassifierError, InvalidInputError):
    """The model's answer to the input itself names none of the labels (`UNPARSED`): there is no label
    to explain. An `InvalidInputError` of the input with this model and prompt: a run records it as
    failed, not as a fault."""


class ServerUnavailableError(LLMAnchorsError):
    """The model's server failed ``RetryPolicy.halt_after`` calls in a row (each after its retries): the
    engine sends nothing more. Not an input's fault: a run stops (exit 6) and the same command goes on
    once the server answers."""


class BudgetExceeded(LLMAnchorsError):
    """Sending the next batch could pass the spend cap, so it was not sent."""


class AnswerWarning(UserWarning):
    """An answer held something other than asked, which the reader left out or billed for: a
    decision's classes that were not asked, another model than the one asked."""


class PromptCacheWarning(UserWarning):
    """A prompt laid out so that the provider's prompt cache cannot serve it (its static prefix is
    below the provider's minimum, or its static part comes after the text)."""


class OutputCutWarning(UserWarning):
    """Answers ended at the output bound before naming a label (a reasoning model spent it
    reasoning): they count as `UNPARSED`."""


class SetAsideWarning(UserWarning):
    """A run's damaged memory or query cache was set aside (renamed, never deleted) and rebuilt: the
    memory from the results file, the cache empty (its labels are asked again when needed)."""


class NondeterminismWarning(RuntimeWarning):
    """The explained model gave a text another label when asked again (``verify_determinism``)."""


def _rebuild(cls: type[ClassifierError], message: str, keywords: dict[str, Any]) -> ClassifierError:
    """Unpickle a `ClassifierError` (its constructor takes keyword-only arguments)."""
    return cls(message, **keywords)
