"""How a model call is retried, and the one deadline no part of it passes."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .._checks import check_int, check_number
from .._exceptions import BackendError, RateLimitError

__all__ = ["RetryPolicy", "is_retryable"]

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections: yes; anything else: no."""
    return isinstance(exc, BackendError) and exc.retryable


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, honouring a server's Retry-After, within one deadline.

    **One deadline per call**: a model call (every attempt, every wait between them, a busy local
    server's slow answer) ends within ``max_elapsed`` seconds of its start. A request still unanswered
    then is cut (`BackendTimeoutError`); a wait that would end past it (a backoff, a Retry-After of
    3600 s) is not begun: the call ends at once with the error that asked for it (a 429 stays a
    `RateLimitError`). Within it, the wait before attempt k+1 is min(max_wait, initial_wait · 2^k)
    plus up to ``jitter`` seconds at random, and never less than the Retry-After a 429 asked for; a
    call gives up after ``max_attempts``. Retries draw no randomness from the explanation's generator,
    so a retried run gives the same explanation.

    ``halt_after``: calls in a row that fail on the server's faults (timeouts, 429s, 5xx, no
    connection, each after its retries) after which the engine sends nothing more
    (`ServerUnavailableError`): a dead or wedged server stops a run once, instead of costing a
    deadline per input.
    """

    max_attempts: int = 6
    initial_wait: float = 0.5
    max_wait: float = 30.0
    jitter: float = 0.5
    max_elapsed: float = 120.0
    halt_after: int = 3

    def __post_init__(self) -> None:
        check_int("max_attempts", self.max_attempts)
        check_int("halt_after", self.halt_after)
        for name in ("initial_wait", "max_wait", "jitter"):
            check_number(name, getattr(self, name), open_low=False)
        check_number("max_elapsed", self.max_elapsed)

    def wait(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1) before the next."""
        backoff = min(self.max_wait, self.initial_wait * 2.0 ** min(attempt - 1, 60)) + random.uniform(0, self.jitter)
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return max(backoff, exc.retry_after)
        return float(backoff)

    async def call(self, attempt: Callable[[int, float], Awaitable[T]]) -> T:
        """``attempt(number, deadline)``'s result, attempted again on a retryable error while the
        policy allows; ``deadline`` is the event loop's time the attempt must end by (`asyncio.timeout_at`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_elapsed
        for number in itertools.count(1):
            try:
                return await attempt(number, deadline)
            except BackendError as exc:
                if not exc.retryable or number >= self.max_attempts:
                    raise
                pause = self.wait(number, exc)
                if loop.time() + pause >= deadline:
                    raise
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")
