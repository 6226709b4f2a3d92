"""Money: a `Charge`, caps (`SpendCap`, `Budget` and its journal), prices, token counts."""

from .budget import Budget, BudgetReport, Reservation, SpendCap
from .charge import Charge, disputed, implausible
from .journal import JournalState, read_journal
from .pricing import FREE, LOCAL, Price, check_service_tier, load_prices, price_for
from .tokens import EstimateCounter, TokenCount, TokenCounter

__all__ = [
    "FREE",
    "LOCAL",
    "Budget",
    "BudgetReport",
    "Charge",
    "EstimateCounter",
    "JournalState",
    "Price",
    "Reservation",
    "SpendCap",
    "TokenCount",
    "TokenCounter",
    "check_service_tier",
    "disputed",
    "implausible",
    "load_prices",
    "price_for",
    "read_journal",
]
