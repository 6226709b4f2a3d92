"""The retry policy: backoff, Retry-After, and the one deadline no part of a call passes."""

import asyncio
import time

import pytest

from llm_anchors import BackendError, ConfigError, RateLimitError, RetryPolicy


async def attempts(policy, failures, error):
    """How many attempts ``policy`` makes of a call that fails ``failures`` times with ``error``."""
    calls = []

    async def attempt(number, deadline):
        calls.append(number)
        if len(calls) <= failures:
            raise error
        return len(calls)

    return await policy.call(attempt)


async def test_retries_until_it_succeeds_and_stops_at_max_attempts():
    fast = RetryPolicy(max_attempts=4, initial_wait=0.001, max_wait=0.002, jitter=0.001)
    assert await attempts(fast, 2, BackendError("503", classifier="x", status=503)) == 3
    with pytest.raises(BackendError):
        await attempts(fast, 10, BackendError("503", classifier="x", status=503))
    with pytest.raises(BackendError):  # a 400 is never retried
        await attempts(fast, 1, BackendError("400", classifier="x", status=400))


# Each: a policy, and the error every attempt fails with; the call must end within the deadline (0.3 s).
PAST_THE_DEADLINE = {
    "backoff": (RetryPolicy(max_attempts=1000, initial_wait=0.05, max_wait=0.05, jitter=0.0, max_elapsed=0.3),
                RateLimitError("429", classifier="x", retry_after=None)),
    "Retry-After 3600": (RetryPolicy(max_attempts=6, max_elapsed=0.3),
                         RateLimitError("429", classifier="x", retry_after=3600.0)),
    "Retry-After 200": (RetryPolicy(max_attempts=6, max_elapsed=0.3),
                        RateLimitError("429", classifier="x", retry_after=200.0)),
    "a long backoff": (RetryPolicy(max_attempts=6, initial_wait=30.0, max_wait=30.0, jitter=0.0, max_elapsed=0.3),
                       BackendError("503", classifier="x", status=503)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAST_THE_DEADLINE))
async def test_a_wait_past_the_deadline_is_never_begun_the_call_ends_with_its_error(name):
    policy, error = PAST_THE_DEADLINE[name]
    started = time.perf_counter()
    with pytest.raises(type(error)):
        await attempts(policy, 10**6, error)
    assert time.perf_counter() - started < policy.max_elapsed + 0.2


async def test_the_deadline_is_handed_to_every_attempt():
    policy = RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.001, jitter=0.0, max_elapsed=5.0)
    seen = []

    async def attempt(number, deadline):
        seen.append(deadline)
        if number < 3:
            raise BackendError("503", classifier="x", status=503)
        return number

    begun = asyncio.get_running_loop().time()
    assert await policy.call(attempt) == 3
    assert len(set(seen)) == 1 and begun + 5.0 <= seen[0] <= begun + 5.5  # one deadline, set at the start


def test_bad_policies():
    for bad in ({"max_attempts": 0}, {"max_attempts": 2.5}, {"initial_wait": -1}, {"max_elapsed": 0}, {"jitter": "1"},
                {"halt_after": 0}):  # fmt: skip
        with pytest.raises(ConfigError):
            RetryPolicy(**bad)
