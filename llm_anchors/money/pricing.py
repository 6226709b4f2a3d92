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
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError

__all__ = ["FREE", "LOCAL", "PRICES", "Price", "load_prices", "price_for"]

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """USD per million input, cached-input and output tokens."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    as_of: str = ""
    source: str = ""
    known: bool = True
    """False for `LOCAL`: $0 assumed, not declared, so a dollar cap cannot rely on it."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> Decimal:
        """Exact dollars for a number of tokens."""
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        fresh = prompt_tokens - cached_tokens
        return (fresh * self.input + cached_tokens * cached_rate + completion_tokens * self.output) / MILLION


FREE = Price(Decimal(0), Decimal(0), Decimal(0), source="declared free")
"""A model that costs nothing, by the caller's word."""
LOCAL = Price(Decimal(0), Decimal(0), Decimal(0), source="assumed free: served on this machine", known=False)
"""A model served on this machine whose name has no price: $0 is assumed, and a dollar cap refuses it."""

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
    """Read ``{"model": {"input": "2.5", "output": "10", "cached_input": "1.25", "as_of": "..."}}``
    (USD per million tokens; finite, >= 0); anything else is a `ConfigError` naming the file."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read price file {path}: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"price file {path} must be an object of models, got {type(raw).__name__} {raw!r:.60}")
    return {str(model): _price(model, entry, path) for model, entry in raw.items()}


def _price(model: str, entry: Any, path: str | os.PathLike[str]) -> Price:
    if not isinstance(entry, dict):
        raise ConfigError(f"price of {model!r} in {path} must be an object with input and output")
    rates = {}
    for key in ("input", "output", "cached_input"):
        value = entry.get(key)
        if value is None and key == "cached_input":
            continue
        try:
            rate = Decimal(str(value)) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
        except ArithmeticError:
            rate = None
        if rate is None or not rate.is_finite() or rate < 0:
            raise ConfigError(f"price of {model!r} in {path}: {key} must be a finite number >= 0, got {value!r}")
        rates[key] = rate
    return Price(rates["input"], rates["output"], rates.get("cached_input"), as_of=str(entry.get("as_of", "")),
                 source=str(entry.get("source", str(path))))  # fmt: skip


_DATED = re.compile(r"^(?P<family>.+)-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(model: str, *, local: bool = False, prices: dict[str, Price] | None = None) -> Price:
    """The price of ``model`` from ``prices``, else the built-in table: by its name, its
    name without a provider prefix (``openai/gpt-4o-mini``), or its family when it is a
    dated snapshot (``gpt-4o-2024-08-06``). A model with no price is `LOCAL` when
    ``local`` (served on this machine), else a `ConfigError`."""
    table = {**PRICES, **(prices or {})}
    for name in dict.fromkeys([model, model.rsplit("/", 1)[-1]]):
        if name in table:
            return table[name]
        if (dated := _DATED.match(name)) is not None and dated["family"] in table:
            return table[dated["family"]]
    if local:
        return LOCAL
    raise ConfigError(
        f"no price for hosted model {model!r}: give one (--price-file or prices=) "
        f"or mark the model local; known: {', '.join(sorted(table))}"
    )
