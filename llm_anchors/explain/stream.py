"""Many inputs explained as one stream: started in order, a few at a time, yielded in input order."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import Any, Literal

from .._checks import check_int
from .._exceptions import BudgetExceeded, ClassifierError, ConfigError, InvalidInputError
from ..money.budget import SpendCap
from .explanation import Explanation

__all__ = ["InputError", "in_order"]

InputError = InvalidInputError | ClassifierError
"""Why one input of a stream has no explanation: it cannot be explained, or its model calls failed."""

_END = object()  # the end of an input stream


def in_order(
    explain: Callable[..., Awaitable[Explanation]],
    texts: Iterable[Any],
    *,
    concurrent_inputs: int,
    budget_per_input: Callable[[], SpendCap | None] | None,
    errors: Literal["raise", "yield"],
    end_when_refused: bool,
) -> AsyncGenerator[Explanation | InputError, None]:
    """``explain(text, budget=...)`` of each of ``texts``, at most ``concurrent_inputs`` at a time, each
    yielded in input order as soon as it and those before it are done (`AnchorsExplainer.explain_stream`
    says what each option does; ``end_when_refused``: a `BudgetExceeded` ends the stream quietly).
    The options are checked now, before any input starts."""
    check_int("concurrent_inputs", concurrent_inputs)
    if errors not in ("raise", "yield"):
        raise ConfigError(f"errors must be 'raise' or 'yield', got {errors!r}")
    return _stream(explain, iter(texts), concurrent_inputs, budget_per_input, errors, end_when_refused)


async def _stream(
    explain: Callable[..., Awaitable[Explanation]],
    source: Any,
    concurrent_inputs: int,
    budget_per_input: Callable[[], SpendCap | None] | None,
    errors: str,
    end_when_refused: bool,
) -> AsyncGenerator[Explanation | InputError, None]:
    pending: deque[asyncio.Future[Explanation]] = deque()
    try:
        while True:
            running = [f for f in pending if not f.done()]
            while len(running) < concurrent_inputs and (text := next(source, _END)) is not _END:
                budget = budget_per_input() if budget_per_input is not None else None
                running.append(asyncio.ensure_future(explain(text, budget=budget)))
                pending.append(running[-1])
            if not pending:
                return
            if pending[0].done():
                done = pending.popleft()
                error = done.exception()
                if isinstance(error, BudgetExceeded) and end_when_refused:
                    return  # the cap refused an input's first query: the cap is spent
                yield error if errors == "yield" and isinstance(error, InputError) else done.result()
            else:  # start the next input as soon as any finishes; yield in order
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
