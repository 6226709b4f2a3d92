"""Hard spend caps that hold with many requests in flight.

A batch's worst-case cost is *reserved* before it is sent; a batch whose
reservation would pass a cap is not sent (`BudgetExceeded`). When the
answer arrives the reservation is *settled* with what the call really
cost. Reserving and checking happen in one synchronous step under a lock,
so concurrent explanations sharing a `Budget` cannot race past the cap
(a check before the call and a charge after it, as popular tools do, can).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ._exceptions import BudgetExceeded, ConfigError

__all__ = ["Budget", "BudgetReport", "Charge", "Reservation"]


@dataclass(frozen=True)
class Charge:
    """Queries, tokens and dollars: of one call (its worst case before it is
    sent, or what it cost), or a sum of calls (``a + b``).

    The one accounting value of the library: a classifier's `Batch` and
    quote, a backend's `Completions`, the budget's ledger, an explanation's
    `Cost` and its progress reports all carry a `Charge`. ``usd`` is an
    exact `Decimal` (a string in JSON); ``estimated`` is True when a token
    count is an estimate rather than the model tokenizer's.
    """

    queries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: Decimal = Decimal(0)
    estimated: bool = False

    def __post_init__(self) -> None:  # from JSON: exact decimals from strings
        if not isinstance(self.usd, Decimal):
            object.__setattr__(self, "usd", Decimal(str(self.usd)))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Charge) -> Charge:
        return Charge(
            self.queries + other.queries,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.usd + other.usd,
            self.estimated or other.estimated,
        )


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
    """Which cap settled spend passed, and by how much ("" if none): it can
    only happen when calls cost more than reserved, i.e. a server reported
    more completion tokens than ``max_tokens`` allows."""

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


def _plain(charge: Charge) -> dict[str, Any]:
    return {"q": charge.queries, "p": charge.prompt_tokens, "c": charge.completion_tokens, "usd": str(charge.usd)}


def _charge(record: dict[str, Any]) -> Charge:
    return Charge(int(record["q"]), int(record["p"]), int(record["c"]), Decimal(record["usd"]))


class _Journal:
    """An append-only JSON-lines ledger of a budget's reserve/settle/release steps."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._keep_whole_lines()
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the budget's life)

    def _keep_whole_lines(self) -> None:
        """Drop a last line cut short by a killed process, so that appending stays readable."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) != len(data):
            self.path.write_bytes(whole)

    def replay(self) -> tuple[Charge, int]:
        """What the journal records as spent (open reservations at their worst case), and the last id."""
        settled, open_, last = Charge(), {}, 0
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"budget journal {self.path} is damaged: {line[:60]!r}") from exc
            key = next(k for k in ("r", "s", "x") if k in record)
            last = max(last, int(record[key]))
            if key == "r":
                open_[record["r"]] = _charge(record)
            elif key == "s":
                open_.pop(record["s"], None)
                settled = settled + _charge(record)
            else:
                open_.pop(record["x"], None)
        return sum(open_.values(), settled), last

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _decimal(value: float | int | str | Decimal | None, name: str) -> Decimal | None:
    if value is None:
        return None
    try:
        result = Decimal(str(value))
    except ArithmeticError as exc:
        raise ConfigError(f"{name} must be a number, got {value!r}") from exc
    if not result.is_finite() or result < 0:
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    return result


class Budget:
    """Caps on dollars, tokens (prompt + completion) and queries; any may be None.

    One budget may be given to one explainer or shared by many, across
    concurrent explanations (and threads). Each call reserves its worst
    case first (its prompt tokens and ``max_tokens`` completion tokens), so
    the cap holds as long as servers honour ``max_tokens``. A server that
    reports more than that can make settled spend pass the cap: then
    nothing more is sent, the explanations end as on any exhaustion, and
    `passed` (and the report) say by how much.

    ``parent``: a budget this one draws on as well (a cap per explanation
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
        parent: Budget | None = None,
        journal: str | os.PathLike[str] | None = None,
    ) -> None:
        self.max_usd = _decimal(max_usd, "max_usd")
        for name, value in (("max_tokens", max_tokens), ("max_queries", max_queries)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name} must be an int >= 0, got {value!r}")
        self.max_tokens = max_tokens
        self.max_queries = max_queries
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._open: dict[int, Reservation] = {}
        self._settled = Charge()
        self._calls = 0
        self._refused = 0
        self._over = 0
        self._passed = ""
        self.parent = parent
        self._in_parent: dict[int, Reservation] = {}
        self._journal = _Journal(Path(journal)) if journal is not None else None
        if self._journal is not None:
            self._settled, last_id = self._journal.replay()
            self._ids = itertools.count(last_id + 1)

    def __repr__(self) -> str:
        return f"Budget(max_usd={self.max_usd}, max_tokens={self.max_tokens}, max_queries={self.max_queries})"

    @property
    def settled(self) -> Charge:
        return self._settled

    @property
    def reserved(self) -> Charge:
        with self._lock:
            return sum((r.charge for r in self._open.values()), Charge())

    def reserve(self, charge: Charge) -> Reservation:
        """Hold ``charge`` against the caps, or raise `BudgetExceeded` and hold nothing."""
        with self._lock:
            self._check(charge)
            held = self.parent.reserve(charge) if self.parent is not None else None  # may refuse: nothing held
            return self._hold(charge, held)

    async def areserve(self, charge: Charge) -> Reservation:
        """`reserve`, for a caller on an event loop: a parent that answers over the
        network (a run's ledger shared by Ray workers) is awaited, not waited for."""
        if self.parent is None:
            return self.reserve(charge)
        with self._lock:
            self._check(charge)  # refused here: the parent is not asked
        held = await self.parent.areserve(charge)
        with self._lock:
            try:
                self._check(charge)  # again: other calls may have reserved meanwhile
            except BudgetExceeded:
                self.parent.release(held)
                raise
            return self._hold(charge, held)

    def _check(self, charge: Charge) -> None:
        committed = self._settled + sum((r.charge for r in self._open.values()), Charge()) + charge
        if over := self._over_cap(committed):
            self._refused += 1
            raise BudgetExceeded(f"sending {charge.queries} more queries could pass the cap: {over}")

    def _hold(self, charge: Charge, held_in_parent: Reservation | None) -> Reservation:
        reservation = Reservation(next(self._ids), charge)
        if held_in_parent is not None:
            self._in_parent[reservation.id] = held_in_parent
        if self._journal is not None:
            self._journal.write({"r": reservation.id, **_plain(charge)})
        self._open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, actual: Charge) -> None:
        """Replace a reservation by what the call really cost."""
        with self._lock:
            if self._open.pop(reservation.id, None) is None:
                raise ConfigError(f"reservation {reservation.id} was already settled or released")
            if actual.usd > reservation.charge.usd or actual.tokens > reservation.charge.tokens:
                self._over += 1
            self._settled = self._settled + actual
            if self._journal is not None:
                self._journal.write({"s": reservation.id, **_plain(actual)})
            if (held := self._in_parent.pop(reservation.id, None)) is not None and self.parent is not None:
                self.parent.settle(held, actual)
            if not self._passed and (over := self._over_cap(self._settled)):
                self._passed = f"settled spend passed the cap: {over} (calls cost more than reserved)"
            self._calls += 1

    @property
    def passed(self) -> str:
        """Which cap settled spend passed, by how much; "" while every cap holds."""
        return self._passed

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose call was not billed (refused before any work)."""
        with self._lock:
            if self._open.pop(reservation.id, None) is not None and self._journal is not None:
                self._journal.write({"x": reservation.id})
            if (held := self._in_parent.pop(reservation.id, None)) is not None and self.parent is not None:
                self.parent.release(held)

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
            )

    def close(self) -> None:
        """Close the journal file, if any."""
        if self._journal is not None:
            self._journal.close()

    def __enter__(self) -> Budget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
