"""When and how long to retry a failed model call (tenacity)."""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ._exceptions import BackendError, RateLimitError

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
    """

    max_attempts: int = 6
    initial_wait: float = 0.5
    max_wait: float = 30.0
    jitter: float = 0.5

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        backoff = wait_exponential_jitter(multiplier=self.initial_wait, max=self.max_wait, jitter=self.jitter)(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return max(backoff, exc.retry_after)
        return float(backoff)
