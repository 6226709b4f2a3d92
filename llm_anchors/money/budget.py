"""Hard spend caps that hold with many requests in flight.

A batch's worst-case cost is *reserved* before it is sent; a batch whose
reservation would pass a cap is not sent (`BudgetExceeded`). When the
answer arrives the reservation is *settled* with what the call really
cost. Reserving and checking happen in one synchronous step under a lock,
so concurrent explanations sharing a `Budget` cannot race past the cap
(a check before the call and a charge after it, as popular tools do, can).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._checks import check_dollars
from .._exceptions import BudgetExceeded, ConfigError
from .charge import Charge, disputed, implausible, minus
from .journal import Journal, JournalState, plain, read_journal

__all__ = ["Budget", "BudgetReport", "Reservation", "SpendCap", "check_caps"]


@dataclass(frozen=True)
class Reservation:
    """A worst case held against the caps until its call is settled."""

    id: int
    charge: Charge


@dataclass(frozen=True)
class BudgetReport:
    """Totals of a budget: settled spend, what is still reserved, and the caps."""

    caps: dict[str, str | int | None]
    settled: Charge
    reserved: Charge
    calls: int
    refused: int
    over_reservation: int
    passed: str = ""
    """Which cap settled spend passed, and by how much ("" if none): it
    happens only when calls were billed past what they were reserved at (a
    server that billed more tokens than its request allowed, a classifier
    that billed more than it quoted, calls written off at their worst case)."""
    reservations: int = 0
    """Reservations made so far (with a journal: since the journal began)."""

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(asdict(self), default=str, **kwargs)

    def table(self) -> str:
        lines = ["| | queries | prompt tokens | completion tokens | USD |", "| --- | ---: | ---: | ---: | ---: |"]
        rows = [("**settled**", self.settled), ("reserved now", self.reserved)]
        for name, c in rows:
            lines.append(f"| {name} | {c.queries:,} | {c.prompt_tokens:,} | {c.completion_tokens:,} | {c.usd:.6f} |")
        caps = ", ".join(f"{k} {v}" for k, v in self.caps.items() if v is not None) or "none"
        lines.append(f"\ncaps: {caps}; calls settled {self.calls}, refused {self.refused}")
        return "\n".join(lines)


@runtime_checkable
class SpendCap(Protocol):
    """What the query engine asks of a spend cap, and all it asks: the money path's one contract.

    Before a call is sent its worst case is reserved (`BudgetExceeded`: not
    sent; with ``wait``, a charge that fits once the calls in flight settle
    waits for them); when it ends the reservation is settled with what the call cost,
    or released when it was refused unbilled. ``passed`` says whether settled
    spend passed a cap (calls that cost more than reserved); `report` what
    has been spent. `Budget` is the cap of one process; a Ray run's workers
    share one through a view of its ledger.
    """

    async def reserve(self, charge: Charge, *, wait: bool = False) -> Reservation: ...

    def settle(self, reservation: Reservation, actual: Charge) -> None: ...

    def release(self, reservation: Reservation) -> None: ...

    @property
    def passed(self) -> str: ...

    def report(self) -> BudgetReport: ...


def check_caps(
    max_usd: float | int | str | Decimal | None = None, max_tokens: int | None = None, max_queries: int | None = None
) -> tuple[Decimal | None, int | None, int | None]:
    """The caps as a `Budget` holds them (dollars exact); a `ConfigError` for one that cannot be a cap."""
    for name, value in (("max_tokens", max_tokens), ("max_queries", max_queries)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{name} must be an int >= 0, got {value!r}")
    return check_dollars("max_usd", max_usd), max_tokens, max_queries


class Budget:
    """Caps on dollars, tokens (prompt + completion) and queries; any may be None.

    One budget may be given to one explainer or shared by many, across
    concurrent explanations (and threads). Each call reserves its worst
    case first (its prompt tokens and the completion tokens its request
    allows, reasoning included, at the dearest rate and tier it may be
    billed at) and is settled at what it was billed. A bill that could not
    be true (`implausible`: more tokens than were sent or allowed, cached
    beyond the prompt, below zero) counts part by part at the larger of the
    reservation and what was reported (`disputed`): a server that bills past
    what its request allowed is recorded at its bill, never below. When
    settled spend passes a cap so, nothing more is sent, the explanations
    end as on any exhaustion, and `passed` (and the report) say which cap
    and by how much.

    ``parent``: a cap this one draws on as well (a cap per explanation
    inside a run's cap): a call is sent only if both hold it.

    ``journal``: a file where every reservation, settlement and release is
    appended (and flushed) before the call goes out. A budget opened on an
    existing journal starts with what it records as spent, counting a
    reservation never settled (a process killed mid-call) at its worst
    case, so a run stopped at any point and started again never spends
    past its cap in total; start it again with a higher cap to go on.

    >>> budget = Budget(max_usd=0.50)
    >>> explainer = AnchorsExplainer(clf, budget=budget)
    """

    def __init__(
        self,
        max_usd: float | int | str | Decimal | None = None,
        max_tokens: int | None = None,
        max_queries: int | None = None,
        *,
        parent: SpendCap | None = None,
        journal: str | os.PathLike[str] | None = None,
    ) -> None:
        self.max_usd, self.max_tokens, self.max_queries = check_caps(max_usd, max_tokens, max_queries)
        self.parent = parent
        self._lock = threading.Lock()
        self._open: dict[int, Reservation] = {}
        self._held = Charge()  # the open reservations' sum, kept as they open and close: a check is O(1)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []  # waiting for room
        self._written_off: dict[int, Reservation] = {}
        self._in_parent: dict[int, Reservation] = {}
        self._settled = Charge()
        self._calls = self._refused = self._over = 0
        self._passed = ""
        self._journal: Journal | None = None
        last = 0
        if journal is not None:
            state = read_journal(journal) if Path(journal).exists() else JournalState(Charge(), Charge(), 0)
            self._settled, last = state.spent, state.reservations
            self._journal = Journal(Path(journal))
        self._ids = itertools.count(last + 1)
        self._last = last
        self._say_passed()  # a journal whose bills passed the cap says so again

    def __repr__(self) -> str:
        return f"Budget(max_usd={self.max_usd}, max_tokens={self.max_tokens}, max_queries={self.max_queries})"

    @property
    def journal(self) -> Path | None:
        """The file every reservation, settlement and release is appended to (None: not journaled)."""
        return self._journal.path if self._journal is not None else None

    @property
    def settled(self) -> Charge:
        return self._settled

    @property
    def reserved(self) -> Charge:
        with self._lock:
            return sum((r.charge for r in self._open.values()), Charge())

    async def reserve(self, charge: Charge, *, wait: bool = False) -> Reservation:
        """Hold ``charge`` against the caps (and the parent's), or raise `BudgetExceeded` and hold nothing.

        With ``wait`` (the engine's: every reservation it holds is a call in flight), a charge that fits
        what is settled but not what calls in flight still hold at their worst case waits for them to
        settle (most bills are far below their worst case) and is asked again; it is refused only when
        it cannot fit however they settle."""
        while True:
            with self._lock:
                room = self._room(charge, wait)
                if room and self.parent is None:
                    return self._hold(charge, None)
                woken = None if room else self._waiter()
            if woken is not None:
                await self._until(woken)
                continue
            assert self.parent is not None
            held = await self.parent.reserve(charge, wait=wait)
            with self._lock:
                try:
                    if self._room(charge, wait):  # again: other calls may have reserved meanwhile
                        return self._hold(charge, held)
                except BaseException:
                    self.parent.release(held)
                    raise
            self.parent.release(held)

    def _waiter(self) -> asyncio.Future[None]:
        """A future woken when a held reservation ends (made under the lock: no ending is missed)."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        self._waiters.append((loop, woken))
        return woken

    async def _until(self, woken: asyncio.Future[None]) -> None:
        try:
            await woken
        finally:
            with self._lock:
                self._waiters = [(loop, w) for loop, w in self._waiters if w is not woken]

    def _wake(self) -> None:
        """Wake every reservation waiting for room (under the lock; from any thread or event loop)."""
        for loop, woken in self._waiters:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits there any more
                loop.call_soon_threadsafe(_set, woken)
        self._waiters = []

    def _room(self, charge: Charge, wait: bool) -> bool:
        """Whether ``charge`` fits beside what is settled and held now (False: it fits once calls in
        flight settle, and ``wait``); `BudgetExceeded` when it cannot fit."""
        if charge.unpriced and self.max_usd is not None:
            raise ConfigError(
                "a dollar cap cannot hold: the model's price is unknown (served on this machine under a name "
                "with no price); give its price (--price-file, LLMClassifier(price=)) or declare it free "
                "(--free, price=FREE)"
            )
        over = self._over_cap(self._settled + self._held + charge)
        if over and (not wait or self._over_cap(self._settled + charge)):
            self._refused += 1
            raise BudgetExceeded(f"sending {charge.queries} more queries could pass the cap: {over}")
        return not over

    def _hold(self, charge: Charge, held_in_parent: Reservation | None) -> Reservation:
        reservation = Reservation(next(self._ids), charge)
        if self._journal is not None:
            self._journal.write({"r": reservation.id, **plain(charge)})  # before the call: else it is not sent
        self._last = reservation.id
        if held_in_parent is not None:
            self._in_parent[reservation.id] = held_in_parent
        self._open[reservation.id] = reservation
        self._held = self._held + charge
        return reservation

    def settle(self, reservation: Reservation, actual: Charge) -> None:
        """Replace a reservation by what the call really cost (also one written off: see `write_off`).
        A bill that could not be true (`implausible` against the reservation) counts at the reservation."""
        if implausible(actual, reservation.charge):
            actual = disputed(reservation.charge, actual)
        with self._lock:
            held = self._open.pop(reservation.id, None)
            if held is not None:
                self._held = minus(self._held, held.charge)
            if held is None and (held := self._written_off.pop(reservation.id, None)) is not None:
                self._settled = minus(self._settled, held.charge) + actual  # its worst case was counted
            elif held is None:
                raise ConfigError(f"reservation {reservation.id} was already settled or released")
            else:
                self._settled = self._settled + actual
            self._wake()
            if actual.usd > reservation.charge.usd or actual.tokens > reservation.charge.tokens:
                self._over += 1
            self._calls += 1
            self._say_passed()
            if (in_parent := self._in_parent.pop(reservation.id, None)) is not None and self.parent is not None:
                self.parent.settle(in_parent, actual)
            if self._journal is not None:
                self._journal.write({"s": reservation.id, **plain(actual)})

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose call was not billed (refused before any work)."""
        with self._lock:
            if (opened := self._open.pop(reservation.id, None)) is not None:
                self._held = minus(self._held, opened.charge)
            elif (held := self._written_off.pop(reservation.id, None)) is not None:
                self._settled = minus(self._settled, held.charge)
            else:
                return
            self._wake()
            if (in_parent := self._in_parent.pop(reservation.id, None)) is not None and self.parent is not None:
                self.parent.release(in_parent)
            if self._journal is not None:
                self._journal.write({"x": reservation.id})

    def write_off(self, reservation: Reservation) -> None:
        """Count an open reservation as spent at its worst case: its call may have reached the
        server, but nobody is left to settle it (a Ray worker died). A settlement or release
        that arrives later still replaces it."""
        with self._lock:
            if (held := self._open.pop(reservation.id, None)) is not None:
                self._held = minus(self._held, held.charge)
                self._wake()
                self._written_off[reservation.id] = held
                self._settled = self._settled + held.charge
                self._say_passed()

    @property
    def passed(self) -> str:
        """Which cap settled spend passed, by how much; "" while every cap holds."""
        return self._passed

    def _say_passed(self) -> None:
        """Say which cap settled spend passed and by how much (a server billed past what its calls
        allowed, or calls written off at their worst case), updated as it grows."""
        if over := self._over_cap(self._settled):
            self._passed = f"settled spend passed the cap by {self._excess(self._settled)}: {over}"

    def _excess(self, c: Charge) -> str:
        if self.max_usd is not None and c.usd > self.max_usd:
            return f"${c.usd - self.max_usd:.6f}"
        if self.max_tokens is not None and c.tokens > self.max_tokens:
            return f"{c.tokens - self.max_tokens:,} tokens"
        return f"{c.queries - (self.max_queries or 0):,} queries"

    def _over_cap(self, c: Charge) -> str:
        if self.max_usd is not None and c.usd > self.max_usd:
            return f"${c.usd:.6f} > max_usd ${self.max_usd}"
        if self.max_tokens is not None and c.tokens > self.max_tokens:
            return f"{c.tokens:,} tokens > max_tokens {self.max_tokens:,}"
        if self.max_queries is not None and c.queries > self.max_queries:
            return f"{c.queries:,} queries > max_queries {self.max_queries:,}"
        return ""

    def report(self) -> BudgetReport:
        with self._lock:
            return BudgetReport(
                caps={
                    "max_usd": str(self.max_usd) if self.max_usd is not None else None,
                    "max_tokens": self.max_tokens,
                    "max_queries": self.max_queries,
                },
                settled=self._settled,
                reserved=sum((r.charge for r in self._open.values()), Charge()),
                calls=self._calls,
                refused=self._refused,
                over_reservation=self._over,
                passed=self._passed,
                reservations=self._last,
            )

    def close(self) -> None:
        """Close the journal file, if any."""
        if self._journal is not None:
            self._journal.close()

    def __enter__(self) -> Budget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
