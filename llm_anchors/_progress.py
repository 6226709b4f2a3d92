"""Progress reports: one frozen record per step, passed to a one-argument callback.

`explain` reports a `Progress` after every batch of queries; `explain_many`
a `StreamProgress` after every finished input. ``progress=True`` on
`explain_many` draws a bar on stderr.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._budget import Charge

if TYPE_CHECKING:
    from ._explanation import Explanation

__all__ = ["Progress", "StreamProgress", "stream_reporter"]


@dataclass(frozen=True)
class Progress:
    """Where an explanation stands, passed to ``explain(progress=...)`` after each batch:
    samples labelled, texts sent (``queries``), cache hits, what the calls cost so far
    (``spent``) and the time since it began."""

    samples: int
    queries: int
    cache_hits: int
    spent: Charge
    elapsed_s: float

    @property
    def prompt_tokens(self) -> int:
        return self.spent.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.spent.completion_tokens


@dataclass(frozen=True)
class StreamProgress:
    """Where a stream stands, passed to ``explain_many(progress=...)`` after each input."""

    done: int
    total: int
    explanation: Explanation


def bar(step: StreamProgress) -> None:
    """A progress bar on stderr, when it is a terminal."""
    if sys.stderr.isatty():
        width = 30
        filled = width * step.done // max(step.total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {step.done}/{step.total}")
        if step.done == step.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def stream_reporter(progress: bool | Callable[..., Any]) -> Callable[[StreamProgress], None] | None:
    """The callback ``explain_many`` calls: the user's, the bar (``True``) or none.

    A callback of two arguments ``(done, total)`` (before 0.2) still works, with a `DeprecationWarning`.
    """
    if not callable(progress):
        return bar if progress else None
    if _positional_arity(progress) == 2:
        warnings.warn(
            "explain_many's progress callback now takes one StreamProgress (.done, .total, .explanation); "
            "the (done, total) form goes in 0.3",
            DeprecationWarning,
            stacklevel=3,
        )
        legacy = progress
        return lambda step: legacy(step.done, step.total)
    return progress


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)
