"""Driving a search generator (Anchors', the guided search's): its rounds of sample
requests answered by the caller, its steps in worker threads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from .._sync import in_thread
from .samples import SampleRequest, Samples

__all__ = ["drive"]

R = TypeVar("R")


async def drive(
    search: Generator[list[SampleRequest], list[Samples], R],
    answer: Callable[[list[SampleRequest]], Awaitable[list[Samples]]],
) -> R:
    """Run a search generator (Anchors', the guided search's), answering each round of requests with ``answer``.

    Each step of the search (its fits, bounds and choices: CPU that grows with the input) runs in a worker
    thread, so the event loop goes on serving other explanations, signals and cancellation meanwhile."""
    done, value = await in_thread(_step, search, None)
    while not done:
        done, value = await in_thread(_step, search, await answer(value))
    result: R = value
    return result


def _step(
    search: Generator[list[SampleRequest], list[Samples], Any], answers: list[Samples] | None
) -> tuple[bool, Any]:
    """One step of ``search`` (its first when ``answers`` is None): (False, its next requests), or (True, its
    result) once it returned. StopIteration cannot cross a thread into a future, so it becomes a value here."""
    try:
        return False, next(search) if answers is None else search.send(answers)
    except StopIteration as stop:
        return True, stop.value
