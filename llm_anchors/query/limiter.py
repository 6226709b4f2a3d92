"""How many texts are in flight to the model at once: a limit that follows the server (AIMD).

A fixed number of requests in flight is wrong for every server but one: too few for a hosted API that
answers a hundred at once, too many for a two-thread server on a busy machine, where requests queue,
time out and are sent again while the server still works on them. `Limiter` keeps a limit on the texts
in flight, shared by every explanation of an engine, and moves it as TCP's congestion window does:

- it grows by one text for every limit's worth of texts answered at a steady latency (additive increase);
- it halves at once when a call times out, is refused for load (429, 5xx) or loses its connection, and
  loses a tenth when a call's latency per text rises past ``tolerance`` times the lowest seen lately
  (multiplicative decrease, at most once per round trip: the calls already in flight saw the old limit).
  Latency is read per text, and only of calls that carry a fair share of the limit (a quarter): a server
  that answers a batch at once answers one text alone no faster, and a queue that grows with the limit
  lengthens every call alike, so neither is a slowdown; a server that got slower per text is;
- a call carries at most half the limit (`size`), so a slow server gets smaller requests, and at least
  one text, so a run always goes on.

The limit never passes ``maximum`` (the engine's ``max_concurrency`` requests of the most texts a request
takes) nor falls below one text. Its trace (time, limit, texts in flight) is kept for the benchmarks.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass

from .._checks import check_int, check_number

__all__ = ["Limiter", "Outcome"]

Outcome = str
"""How a call ended, as the limiter reads it: "ok", "overload" (timeout, 429, 5xx, connection), "other"."""


@dataclass
class _Window:
    """The lowest latency seen lately: each new one counts, and the floor drifts up 1% a call, so a server
    that became slower for good is the new normal after a while, not a standing alarm."""

    floor: float = math.inf

    def add(self, latency: float) -> float:
        self.floor = min(latency, self.floor * 1.01)
        return self.floor


class Limiter:
    """The texts in flight to one model (see the module). ``acquire(n)`` waits until ``n`` more fit the
    limit (a call of more texts than the limit waits until nothing else is in flight), ``release(n)``
    gives them back, ``observe`` moves the limit with how a call ended."""

    def __init__(self, maximum: int, *, initial: int | None = None, tolerance: float = 3.0) -> None:
        check_int("maximum", maximum)
        check_int("initial", initial, optional=True)
        check_number("tolerance", tolerance, low=1.0)
        self.maximum = maximum
        self.limit = float(min(maximum, initial if initial is not None else max(1, maximum // 4)))
        self.tolerance = tolerance
        self.in_flight = 0
        self.lowest = float(self.limit)
        self.highest = float(self.limit)
        self.trace: deque[tuple[float, float, int]] = deque(maxlen=100_000)
        self._latency = _Window()
        self._last_cut = -math.inf
        self._round_trip = 0.0
        self._changed: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def size(self, most: int) -> int:
        """Texts the next call may carry: at most ``most`` (what a request takes), at most half the limit."""
        return max(1, min(most, int(self.limit // 2) or 1))

    async def acquire(self, n: int) -> None:
        """Wait until ``n`` texts more fit the limit (or nothing else is in flight)."""
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: self.in_flight == 0 or self.in_flight + n <= self.limit)
            self.in_flight += n
            self._record()

    async def release(self, n: int) -> None:
        changed = self._condition()
        async with changed:
            self.in_flight = max(0, self.in_flight - n)
            self._record()
            changed.notify_all()

    def observe(self, n: int, latency: float, outcome: Outcome) -> None:
        """Move the limit with a call of ``n`` texts that took ``latency`` seconds and ended so."""
        now = time.monotonic()
        if outcome == "overload":
            self._cut(now, 0.5)
        elif outcome == "ok":
            self._round_trip = latency if not self._round_trip else 0.8 * self._round_trip + 0.2 * latency
            per_text = latency / max(n, 1)
            fair = n >= self.limit / 4
            if fair and per_text > self.tolerance * self._latency.floor:
                self._cut(now, 0.9)
            else:
                self.limit = min(float(self.maximum), self.limit + n / max(self.limit, 1.0))
            if fair:
                self._latency.add(per_text)
        self.highest = max(self.highest, self.limit)
        self._record()  # a higher limit lets a waiting call go at the next release, which every call makes

    def _cut(self, now: float, factor: float) -> None:
        if now - self._last_cut < self._round_trip:  # the calls in flight were sent under the old limit
            return
        self._last_cut = now
        self.limit = max(1.0, self.limit * factor)
        self.lowest = min(self.lowest, self.limit)

    def _record(self) -> None:
        self.trace.append((time.monotonic(), self.limit, self.in_flight))

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._loop, self.in_flight = asyncio.Condition(), loop, 0
        return self._changed

    def __repr__(self) -> str:
        return f"Limiter(limit={self.limit:.1f}, in_flight={self.in_flight}, maximum={self.maximum})"
