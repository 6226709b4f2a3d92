"""When and how long to retry a failed model call (tenacity)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from .._checks import check_int, check_number
from .._exceptions import BackendError, RateLimitError

__all__ = ["RetryPolicy", "is_retryable"]


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections: yes; anything else: no."""
    return isinstance(exc, BackendError) and exc.retryable


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, honouring a server's Retry-After.

    The wait before attempt k+1 is min(max_wait, initial_wait · 2^k) plus
    up to ``jitter`` seconds at random, and never less than the
    Retry-After a 429 asked for. Retries draw no randomness from the
    explanation's generator, so a retried run gives the same explanation.

    A call gives up after ``max_attempts`` attempts, or when a retry would
    start more than ``max_elapsed`` seconds after its first attempt: one
    model call takes at most ``max_elapsed`` plus one request's timeout
    (120 + 60 s with the defaults and `OpenAICompatibleBackend`'s timeout).
    """

    max_attempts: int = 6
    initial_wait: float = 0.5
    max_wait: float = 30.0
    jitter: float = 0.5
    max_elapsed: float = 120.0

    def __post_init__(self) -> None:
        check_int("max_attempts", self.max_attempts)
        for name in ("initial_wait", "max_wait", "jitter"):
            check_number(name, getattr(self, name), open_low=False)
        check_number("max_elapsed", self.max_elapsed)

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self.max_attempts) | stop_after_delay(self.max_elapsed),
            wait=self._wait,
            reraise=True,
        )

    def _wait(self, retry_state: RetryCallState) -> float:
        """Tenacity's wait callback (tenacity < 8.2 passes ``retry_state`` by keyword).

        Computed here rather than with tenacity's ``wait_exponential_jitter``,
        whose arguments changed between the releases this project supports.
        """
        exponent = min(retry_state.attempt_number - 1, 60)
        backoff = min(self.max_wait, self.initial_wait * 2.0**exponent) + random.uniform(0.0, self.jitter)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return max(backoff, exc.retry_after)
        return float(backoff)
