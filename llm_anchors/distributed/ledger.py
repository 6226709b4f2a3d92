"""One spend cap for a run's Ray workers: a ledger actor holding the run's `Budget`, a view in each worker.

A worker's engine reserves through its `LedgerView` exactly as it would on a
local `Budget` (the `SpendCap` protocol): the reservation is granted or
refused by the ledger before the call is sent. Settlements and releases go
without waiting and are applied in the order sent; `LedgerView.flush` waits
until the ledger has applied them, so the run's spend is exact whenever a
worker hands back an explanation. When a worker dies, every reservation it
still held is written off at its worst case: its call may have reached the
server, and nobody is left to say what it cost.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from .._exceptions import BudgetExceeded, LLMAnchorsError
from ..money.budget import Budget, BudgetReport, Reservation
from ..money.charge import Charge

__all__ = ["Ledger", "LedgerView"]


class Ledger:
    """The run's `Budget`, inside a Ray actor; each reservation is recorded with the worker that made it."""

    def __init__(self, caps: dict[str, Any], journal: str | None) -> None:
        self.budget = Budget(**caps, journal=journal)
        self.owners: dict[int, tuple[str, Reservation]] = {}
        self.tokens: dict[str, int] = {}
        self.dead: set[str] = set()

    async def reserve(
        self, charge: Charge, owner: str, token: str, wait: bool = False
    ) -> tuple[int, LLMAnchorsError | None, str]:
        """(reservation id, None) or (0, why it was refused); with the cap passed so far.
        ``token`` names the request, so that a caller cancelled before the answer can release it;
        ``wait``: as `Budget.reserve`."""
        if owner in self.dead:
            return 0, BudgetExceeded(f"{owner} was declared dead: it sends nothing more"), self.budget.passed
        try:
            reservation = await self.budget.reserve(charge, wait=wait)
        except LLMAnchorsError as exc:  # a cap, or a dollar cap over an unpriced model
            return 0, exc, self.budget.passed
        self.owners[reservation.id] = (owner, reservation)
        self.tokens[token] = reservation.id
        return reservation.id, None, self.budget.passed

    def settle(self, rid: int, actual: Charge) -> None:
        """What call ``rid`` cost (also after its worker was declared dead: the bill replaces the worst case)."""
        _, reservation = self.owners.pop(rid)
        self.budget.settle(reservation, actual)

    def release(self, rid: int) -> None:
        """Call ``rid`` was refused unbilled."""
        if (held := self.owners.pop(rid, None)) is not None:
            self.budget.release(held[1])

    def release_token(self, token: str) -> None:
        """Release what `reserve` granted a caller that stopped waiting for the answer."""
        if (rid := self.tokens.pop(token, None)) is not None:
            self.release(rid)

    def write_off(self, owner: str) -> int:
        """A worker died: count every reservation it still held as spent at its worst case
        (its call may have reached the server), refuse whatever it sends after; how many."""
        self.dead.add(owner)
        held = [reservation for who, reservation in self.owners.values() if who == owner]
        for reservation in held:
            self.budget.write_off(reservation)
        return len(held)

    def report(self) -> BudgetReport:
        return self.budget.report()

    def close(self) -> None:
        self.budget.close()


class LedgerView:
    """A worker's (or the coordinator's) `SpendCap`: the run's ledger actor, seen from here."""

    def __init__(self, ledger: Any, owner: str) -> None:
        self.ledger, self.owner = ledger, owner
        self._passed = ""
        self._requests = itertools.count(1)
        self._sent: list[Any] = []  # settlements and releases not yet known to be applied

    def __repr__(self) -> str:
        return f"LedgerView(owner={self.owner!r})"

    async def reserve(self, charge: Charge, *, wait: bool = False) -> Reservation:
        token = f"{self.owner}/{id(self)}/{next(self._requests)}"
        try:
            rid, refused, self._passed = await self.ledger.reserve.remote(charge, self.owner, token, wait)
        except asyncio.CancelledError:  # the ledger may grant it all the same: let it release it then
            self._sent.append(self.ledger.release_token.remote(token))
            raise
        if refused is not None:
            raise refused
        return Reservation(rid, charge)

    def settle(self, reservation: Reservation, actual: Charge) -> None:
        self._sent.append(self.ledger.settle.remote(reservation.id, actual))

    def release(self, reservation: Reservation) -> None:
        self._sent.append(self.ledger.release.remote(reservation.id))

    @property
    def passed(self) -> str:
        return self._passed

    def report(self) -> BudgetReport:
        import ray

        report: BudgetReport = ray.get(self.ledger.report.remote())
        return report

    def flush(self) -> None:
        """Return once the ledger has applied every settlement and release sent from here
        (raising what applying one raised: a journal that cannot be written)."""
        import ray

        sent, self._sent = self._sent, []
        ray.get(sent)
