"""Prices of hosted models, in exact decimal USD per million tokens.

The table below was copied from the providers' public price lists; the
date each was read is kept with it (``as_of``). Prices change: override
them with a JSON file (`load_prices`) or a `Price` argument. A hosted model
with no price is an error, never a silent $0; a local model costs $0 but
its tokens are still counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ._exceptions import ConfigError

__all__ = ["FREE", "PRICES", "Price", "load_prices", "price_for"]

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """USD per million input, cached-input and output tokens."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    as_of: str = ""
    source: str = ""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> Decimal:
        """Exact dollars for a number of tokens."""
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        fresh = prompt_tokens - cached_tokens
        return (fresh * self.input + cached_tokens * cached_rate + completion_tokens * self.output) / MILLION


FREE = Price(Decimal(0), Decimal(0), Decimal(0), source="local model")

_OPENAI = "https://openai.com/api/pricing (standard tier)"


def _p(inp: str, cached: str, out: str, as_of: str = "2025-08-07", source: str = _OPENAI) -> Price:
    return Price(Decimal(inp), Decimal(out), Decimal(cached), as_of=as_of, source=source)


PRICES: dict[str, Price] = {
    "gpt-4o": _p("2.50", "1.25", "10.00"),
    "gpt-4o-mini": _p("0.15", "0.075", "0.60"),
    "gpt-4.1": _p("2.00", "0.50", "8.00"),
    "gpt-4.1-mini": _p("0.40", "0.10", "1.60"),
    "gpt-4.1-nano": _p("0.10", "0.025", "0.40"),
    "gpt-5": _p("1.25", "0.125", "10.00"),
    "gpt-5-mini": _p("0.25", "0.025", "2.00"),
    "gpt-5-nano": _p("0.05", "0.005", "0.40"),
    "o4-mini": _p("1.10", "0.275", "4.40"),
    "gpt-3.5-turbo-instruct": _p("1.50", "1.50", "2.00"),
}
"""Built-in prices, USD per million tokens, read on the date in ``as_of``."""


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read ``{"model": {"input": "2.5", "output": "10", "cached_input": "1.25", "as_of": "..."}}``."""
    try:
        raw: dict[str, Any] = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read price file {path}: {exc}") from exc
    prices = {}
    for model, entry in raw.items():
        try:
            prices[model] = Price(
                Decimal(str(entry["input"])),
                Decimal(str(entry["output"])),
                Decimal(str(entry["cached_input"])) if entry.get("cached_input") is not None else None,
                as_of=str(entry.get("as_of", "")),
                source=str(entry.get("source", str(path))),
            )
        except (KeyError, TypeError, ArithmeticError) as exc:
            raise ConfigError(f"price of {model!r} in {path} needs numeric input and output: {exc}") from exc
        if min(prices[model].input, prices[model].output) < 0:
            raise ConfigError(f"price of {model!r} in {path} is negative")
    return prices


def price_for(model: str, *, local: bool = False, prices: dict[str, Price] | None = None) -> Price:
    """The price of ``model``: from ``prices``, else the built-in table; $0 when ``local``."""
    table = {**PRICES, **(prices or {})}
    if model in table:
        return table[model]
    if local:
        return FREE
    # A dated snapshot ("gpt-4o-mini-2024-07-18") costs what its family costs.
    family = max((m for m in table if model.startswith(m + "-")), key=len, default=None)
    if family is not None:
        return table[family]
    raise ConfigError(
        f"no price for hosted model {model!r}: give one (--price-file or prices=) "
        f"or mark the model local; known: {', '.join(sorted(table))}"
    )
