"""Progress reports: one frozen record per step, passed to a one-argument callback.

`explain` reports a `Progress` after every batch of queries; `explain_many`
a `StreamProgress` after every finished input. ``progress=True`` on
`explain_many` draws a bar on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

from ..money.charge import Charge

if TYPE_CHECKING:
    from .explanation import Explanation

__all__ = ["Progress", "ProgressBar", "StreamProgress", "stream_reporter"]


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


class ProgressBar:
    """One progress bar over a stream of inputs (tqdm): inputs done, ETA, dollars
    and queries so far, memory hit rate (MAnchors).

    On a terminal it redraws in place; otherwise it stays quiet but for a
    line every ``every`` (a share of the inputs) and one at the end. With
    ``spent`` (e.g. a run's `Budget.settled`, read each time) the dollars and
    queries shown are the whole run's, earlier sessions and cut-short work
    included, the figures its cap counts; without, the shown explanations'.
    """

    def __init__(
        self,
        total: int,
        done: int = 0,
        *,
        label: str = "",
        stream: TextIO | None = None,
        every: float = 0.05,
        spent: Callable[[], Charge] | None = None,
    ) -> None:
        from tqdm import tqdm

        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.total, self.initial, self.done, self.every, self.label = total, done, done, every, label
        self.usd, self.queries, self.hits, self.looked_up = Decimal(0), 0, 0, 0
        self.spent = spent
        self.started = time.perf_counter()
        self._next_line = done + max(1, int(total * every))
        self.bar = tqdm(total=total, initial=done, file=self.stream, disable=not self.live, unit="input",
                        desc=label or None, dynamic_ncols=True, smoothing=0.1)  # fmt: skip

    def update(self, index: int, explanation: Explanation, *_: Any) -> None:
        """Count one finished input (the signature `explain_resumable`'s ``on_result`` has)."""
        meta = explanation.meta
        self.done += 1
        self.usd += meta.cost.settled.usd
        self.queries += meta.queries
        if meta.memory_hit is not None:
            self.looked_up += 1
            self.hits += meta.memory_hit
        self.bar.set_postfix_str(self._numbers(), refresh=False)
        self.bar.update(1)
        if not self.live and (self.done >= self._next_line or self.done == self.total):
            self._next_line = self.done + max(1, int(self.total * self.every))
            self.stream.write(self._line() + "\n")
            self.stream.flush()

    def _numbers(self) -> str:
        hit_rate = f" · {self.hits / self.looked_up:.0%} memory hits" if self.looked_up else ""
        if self.spent is None:
            return f"${self.usd} · {self.queries:,} queries{hit_rate}{self._projected(self.queries, self.usd)}"
        run = self.spent()
        return f"${run.usd} · {run.queries:,} queries in all{hit_rate}{self._projected(run.queries, run.usd)}"

    def _projected(self, queries: int, usd: Decimal) -> str:
        """The whole run's projected total: what it spent, and as much per input still to do as so far."""
        now = self.done - self.initial
        if now <= 0 or self.done >= self.total:
            return ""
        left = self.total - self.done
        more_usd = (self.usd / now * left).quantize(Decimal("0.000001"))
        dollars = f", ${usd + more_usd}" if usd + more_usd else ""
        return f" · projected ~{queries + round(self.queries / now * left):,} queries{dollars}"

    def _line(self) -> str:
        """The line written off a terminal (tqdm, disabled there, keeps no rate)."""
        elapsed = time.perf_counter() - self.started
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        eta = f"ETA {(self.total - self.done) / rate:.0f}s" if rate > 0 else "ETA ?"
        prefix = f"{self.label}: " if self.label else ""
        return f"{prefix}{self.done:,}/{self.total:,} inputs · {self._numbers()} · {rate:.2f} inputs/s, {eta}"

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(total: int) -> Callable[[StreamProgress], None]:
    """``explain_many(progress=True)``: a `ProgressBar` on stderr."""
    shown = ProgressBar(total)

    def report(step: StreamProgress) -> None:
        shown.update(step.done - 1, step.explanation)
        if step.done == step.total:
            shown.close()

    return report


def stream_reporter(
    progress: bool | Callable[[StreamProgress], None], total: int
) -> Callable[[StreamProgress], None] | None:
    """The callback ``explain_many`` calls: the user's, the bar (``True``) or none."""
    if callable(progress):
        return progress
    return bar(total) if progress else None
