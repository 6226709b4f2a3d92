"""`Cost`: what one explanation's calls cost, as the engine counted them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..money.charge import Charge
from .engine import QueryStats

__all__ = ["Cost"]


@dataclass(frozen=True)
class Cost:
    """What one explanation's calls cost.

    ``settled``: what the calls were billed (`Charge`: queries billed, a
    resent one too; tokens; exact `Decimal` dollars, ``cost.settled.usd``);
    ``reserved``: the worst cases held against the budget before the calls
    (empty without a budget); ``cache_hits``: texts answered without a
    call; ``retries``: failed calls sent again; ``failures``: failed calls
    by reason ("HTTP 429", "timeout", or the error's type); ``disputed``:
    calls whose reported usage could not be true (more prompt tokens than
    were sent, cached beyond the prompt, unreadable, ...), by reason: each
    is in ``settled`` at the larger of the worst case reserved for it and
    its bill; ``dearest_tier``: calls whose server named no service tier its
    price knows (``"auto"``, a tier it lacks), billed at the dearest tier of
    the model, their usage as reported.
    """

    settled: Charge = field(default_factory=Charge)
    reserved: Charge = field(default_factory=Charge)
    cache_hits: int = 0
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    disputed: dict[str, int] = field(default_factory=dict)
    dearest_tier: int = 0

    @classmethod
    def of(cls, stats: QueryStats) -> Cost:
        """The record of an explanation's calls."""
        return cls(stats.settled, stats.reserved, stats.cache_hits, stats.retries, dict(stats.failures),
                   dict(stats.disputed), stats.dearest_tier)  # fmt: skip
