import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llm_anchors import BackendError, ConfigError, RateLimitError, RetryPolicy

ROOT = Path(__file__).resolve().parent.parent


async def attempts(policy, failures, error):
    calls = []
    async for attempt in policy.retrying():
        with attempt:
            calls.append(1)
            if len(calls) <= failures:
                raise error
    return len(calls)


async def test_retries_until_it_succeeds_and_stops_at_max_attempts():
    fast = RetryPolicy(max_attempts=4, initial_wait=0.001, max_wait=0.002, jitter=0.001)
    assert await attempts(fast, 2, BackendError("503", classifier="x", status=503)) == 3
    with pytest.raises(BackendError):
        await attempts(fast, 10, BackendError("503", classifier="x", status=503))
    with pytest.raises(BackendError):  # a 400 is never retried
        await attempts(fast, 1, BackendError("400", classifier="x", status=400))


async def test_gives_up_after_max_elapsed():
    import time

    slow = RetryPolicy(max_attempts=1000, initial_wait=0.05, max_wait=0.05, jitter=0.0, max_elapsed=0.2)
    started = time.perf_counter()
    with pytest.raises(RateLimitError):
        await attempts(slow, 10**6, RateLimitError("429", classifier="x", retry_after=None))
    assert time.perf_counter() - started < 1.0


def test_bad_policies():
    for bad in ({"max_attempts": 0}, {"max_attempts": 2.5}, {"initial_wait": -1}, {"max_elapsed": 0}, {"jitter": "1"}):
        with pytest.raises(ConfigError):
            RetryPolicy(**bad)


def test_the_oldest_tenacity_pyproject_allows_works():
    """pyproject says tenacity>=8.1: run a retry on exactly 8.1.0 (which scripts/setup.sh caches)."""
    import re

    pinned = re.search(r'"tenacity>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    version = pinned if pinned.count(".") == 2 else pinned + ".0"
    from adapters.local_server import cache_dir

    target = cache_dir() / f"tenacity-{version}"
    assert (target / "tenacity").is_dir(), f"tenacity {version} is not in {target}: scripts/setup.sh puts it there"
    script = textwrap.dedent(
        """
        import asyncio, tenacity
        from llm_anchors import RateLimitError, RetryPolicy
        calls = []
        async def main():
            policy = RetryPolicy(max_attempts=4, initial_wait=0.001, max_wait=0.002, jitter=0.001)
            async for attempt in policy.retrying():
                with attempt:
                    calls.append(1)
                    if len(calls) < 3:
                        raise RateLimitError("429", classifier="x", retry_after=0.001)
        asyncio.run(main())
        print(tenacity.__file__, len(calls))
        """
    )
    env = {"PYTHONPATH": f"{target}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(target) in done.stdout and done.stdout.strip().endswith(" 3")
