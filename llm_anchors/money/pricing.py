"""Prices of hosted models, in exact decimal USD per million tokens, as providers bill them.

Prices come from pydantic's `genai-prices` (its data is bundled with the
package and never updated at run time): input, output, cache-read and
cache-write rates per model and provider, by date, by service tier
(``flex``). A price file (`load_prices`) or a `Price` argument overrides
them. A hosted model with no price is an error, never a silent $0; a model
served on this machine whose name has no price is `LOCAL` ($0 assumed,
which a dollar cap refuses).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .budget import Charge

__all__ = ["CACHE_MINIMUM", "FREE", "LOCAL", "Price", "load_prices", "price_for"]

MILLION = Decimal(1_000_000)

CACHE_MINIMUM = {"openai": 1024, "anthropic": 1024, "google": 1024, "azure": 1024}
"""The fewest prompt tokens a provider's prompt cache serves (documented minimums, read 2026-11;
Anthropic's Haiku models need 2,048)."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens: ``input`` (uncached), ``output`` (reasoning
    included), ``cache_read`` and ``cache_write`` (None: billed as input).
    ``as_of``: the date the price applies to; ``source``: where it comes from."""

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    as_of: str = ""
    source: str = ""
    known: bool = True
    """False for `LOCAL`: $0 assumed, not declared, so a dollar cap cannot rely on it."""
    provider: str = ""
    """Who bills it ("openai", "anthropic", ...; "" when not known): whose prompt cache applies."""

    def __post_init__(self) -> None:  # from JSON: exact decimals from strings
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Decimal):
                object.__setattr__(self, name, Decimal(str(value)))

    def cost(self, usage: Charge) -> Decimal:
        """Exact dollars for ``usage``: its cache reads and writes at their rates, the rest of
        its prompt at the input rate, its completion (reasoning included) at the output rate."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        fresh = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        total = fresh * self.input + usage.cache_read_tokens * read + usage.cache_write_tokens * write
        return (total + usage.completion_tokens * self.output) / MILLION

    def worst_case(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """The most a call of these tokens can cost: every prompt token at the dearest input rate
        (a cache write may cost more than an uncached token), the completion at the output rate."""
        dearest = max(rate for rate in (self.input, self.cache_read, self.cache_write) if rate is not None)
        return (prompt_tokens * dearest + completion_tokens * self.output) / MILLION

    def uncached(self, usage: Charge) -> Decimal:
        """What ``usage`` would cost with no prompt caching: every prompt token at the input rate."""
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / MILLION

    def describe(self) -> dict[str, str]:
        """The price as plain strings, for an explanation's record."""
        rates: dict[str, Decimal | None] = {"input": self.input, "output": self.output}
        rates |= {"cache_read": self.cache_read, "cache_write": self.cache_write}
        shown = {name: str(rate) for name, rate in rates.items() if rate is not None}
        return {**shown, "per": "1M tokens", "as_of": self.as_of, "source": self.source}


FREE = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), source="declared free")
"""A model that costs nothing, by the caller's word."""
LOCAL = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), source="assumed free: on this machine", known=False)
"""A model served on this machine whose name has no price: $0 is assumed, and a dollar cap refuses it."""


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read ``{"model": {"input": "2.5", "output": "10", "cache_read": "1.25", "cache_write": "3.1",
    "as_of": "..."}}`` (USD per million tokens; finite, >= 0); anything else is a `ConfigError` naming the file."""
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
    rates: dict[str, Decimal] = {}
    for key in ("input", "output", "cache_read", "cache_write"):
        value = entry.get(key)
        if value is None and key.startswith("cache"):
            continue
        try:
            rate = Decimal(str(value)) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
        except ArithmeticError:
            rate = None
        if rate is None or not rate.is_finite() or rate < 0:
            raise ConfigError(f"price of {model!r} in {path}: {key} must be a finite number >= 0, got {value!r}")
        rates[key] = rate
    return Price(
        rates["input"], rates["output"], rates.get("cache_read"), rates.get("cache_write"),
        as_of=str(entry.get("as_of", "")), source=str(entry.get("source", str(path))),
    )  # fmt: skip


_DATED = re.compile(r"^(?P<family>.+)-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(
    model: str,
    *,
    local: bool = False,
    prices: dict[str, Price] | None = None,
    api_url: str | None = None,
    service_tier: str | None = None,
) -> Price:
    """The price of ``model``: from ``prices`` (by name, by name without a provider prefix such as
    ``openai/``, or by family for a dated snapshot), else from genai-prices (the provider named by
    the prefix, or by ``api_url`` for a hosted server; at ``service_tier`` when given, e.g. "flex").
    A model with neither is `LOCAL` when ``local`` (served on this machine), else a `ConfigError`."""
    provider, _, bare = model.rpartition("/")
    for name in dict.fromkeys([model, bare]):
        if prices and name in prices:
            return prices[name]
        if prices and (dated := _DATED.match(name)) is not None and dated["family"] in prices:
            return prices[dated["family"]]
    found = _catalogue(bare, provider or None, None if local else api_url, service_tier)
    if found is not None:
        return found
    if local:
        return LOCAL
    raise ConfigError(
        f"no price for hosted model {model!r}: give one (--price-file or price=) or mark the model local "
        f"(genai-prices {_VERSION} knows the models of OpenAI, Anthropic, Google and others by their names)"
    )


_VERSION = metadata.version("genai-prices")


@lru_cache(maxsize=256)
def _catalogue(model: str, provider: str | None, api_url: str | None, service_tier: str | None) -> Price | None:
    """genai-prices' rates for ``model`` today, or None when it does not know the model."""
    from genai_prices import Usage, calc_price

    context = {"service_tier": service_tier} if service_tier else None

    def per_million(**tokens: int) -> Any:
        where: dict[str, Any] = {"provider_id": provider} if provider else {}
        if api_url and not provider:
            where = {"provider_api_url": api_url}
        return calc_price(Usage(**tokens), model_ref=model, price_context=context, **where)

    try:
        priced = per_million(input_tokens=1000)  # 1,000 tokens: below any long-context tier
    except (LookupError, ValueError):
        return None
    today = datetime.now(timezone.utc).date().isoformat()
    tier = f" ({service_tier})" if context else ""
    label = f"genai-prices {_VERSION}: {priced.provider.id}/{priced.model.id}{tier}"
    return Price(
        input=priced.total_price * 1000,
        output=per_million(output_tokens=1000).total_price * 1000,
        cache_read=per_million(input_tokens=1000, cache_read_tokens=1000).total_price * 1000,
        cache_write=per_million(input_tokens=1000, cache_write_tokens=1000).total_price * 1000,
        as_of=today,
        source=label,
        provider=priced.provider.id,
    )
