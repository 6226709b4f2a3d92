"""Prices of hosted models, in exact decimal USD per million tokens, as providers bill them.

Prices come from pydantic's `genai-prices` (its data is bundled with the
package and never updated at run time): input, output, cache-read and
cache-write rates per model and provider, by date, and at each service
tier the provider serves the model at (OpenAI's ``flex``, ``priority``).
A price file (`load_prices`) or a `Price` argument overrides them. A
hosted model with no price is an error, never a silent $0; a model served
on this machine whose name has no price is `LOCAL` ($0 assumed, which a
dollar cap refuses).

A call's worst case (`Price.worst_case`) is at the dearest tier the model
has: a server may serve another tier than the one asked (an account whose
default is priority), and says which only in its answer.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .charge import Charge

__all__ = [
    "CACHE_MINIMUM",
    "FREE",
    "LOCAL",
    "STANDARD_TIERS",
    "Price",
    "check_service_tier",
    "load_prices",
    "price_for",
]

MILLION = Decimal(1_000_000)

CACHE_MINIMUM = {"openai": 1024, "anthropic": 1024, "google": 1024, "azure": 1024}
"""The fewest prompt tokens a provider's prompt cache serves (documented minimums, read 2026-11;
Anthropic's Haiku models need 2,048)."""

STANDARD_TIERS = ("default", "standard")
"""Names a server gives the standard tier (OpenAI says ``"default"``)."""


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
    tiers: tuple[tuple[str, Price], ...] = ()
    """The other service tiers the model is served at (``flex``, ``priority``, ...) with their
    rates; the rates above are the standard tier's."""

    def __post_init__(self) -> None:  # from JSON: exact decimals from strings, tiers from [name, {...}]
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Decimal):
                object.__setattr__(self, name, Decimal(str(value)))
        tiers = tuple((str(n), p if isinstance(p, Price) else Price(**p)) for n, p in self.tiers)
        object.__setattr__(self, "tiers", tiers)

    @property
    def tier_names(self) -> tuple[str, ...]:
        """The service tiers this price knows: the standard one, then the others."""
        return ("default", *(name for name, _ in self.tiers))

    def at(self, tier: str | None) -> Price | None:
        """The rates of calls served at ``tier`` (None or "default": the standard rates); None for a
        tier this price does not know."""
        if tier is None or tier in STANDARD_TIERS:
            return replace(self, tiers=()) if self.tiers else self
        return next((price for name, price in self.tiers if name == tier), None)

    def dearest(self, usage: Charge) -> Price:
        """Of this price's tiers, the one that bills ``usage`` most."""
        return max(self._all(), key=lambda p: p.cost(usage))

    def _all(self) -> list[Price]:
        return [self, *(price for _, price in self.tiers)]

    def cost(self, usage: Charge) -> Decimal:
        """Exact dollars for ``usage``: its cache reads and writes at their rates, the rest of
        its prompt at the input rate, its completion (reasoning included) at the output rate."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        fresh = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        total = fresh * self.input + usage.cache_read_tokens * read + usage.cache_write_tokens * write
        return (total + usage.completion_tokens * self.output) / MILLION

    def worst_case(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """The most a call of these tokens can cost, at any tier: every prompt token at the dearest
        input rate (a cache write may cost more than an uncached token), the completion at the output rate."""
        return max(price._worst(prompt_tokens, completion_tokens) for price in self._all())

    def _worst(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        dearest = max(rate for rate in (self.input, self.cache_read, self.cache_write) if rate is not None)
        return (prompt_tokens * dearest + completion_tokens * self.output) / MILLION

    def uncached(self, usage: Charge) -> Decimal:
        """What ``usage`` would cost with no prompt caching: every prompt token at the input rate."""
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / MILLION

    def describe(self) -> dict[str, str]:
        """The standard tier's price as plain strings, the other tiers named."""
        rates: dict[str, Decimal | None] = {"input": self.input, "output": self.output}
        rates |= {"cache_read": self.cache_read, "cache_write": self.cache_write}
        shown = {name: str(rate) for name, rate in rates.items() if rate is not None}
        tiers = {"tiers": ", ".join(self.tier_names)} if self.tiers else {}
        return {**shown, "per": "1M tokens", "as_of": self.as_of, "source": self.source, **tiers}


FREE = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), source="declared free")
"""A model that costs nothing, by the caller's word."""
LOCAL = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0), source="assumed free: on this machine", known=False)
"""A model served on this machine whose name has no price: $0 is assumed, and a dollar cap refuses it."""


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read ``{"model": {"input": "2.5", "output": "10", "cache_read": "1.25", "cache_write": "3.1",
    "as_of": "...", "tiers": {"priority": {"input": "5", "output": "20"}}}}`` (USD per million tokens;
    finite, >= 0; ``tiers``: the model's other service tiers, if any); anything else is a
    `ConfigError` naming the file."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read price file {path}: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"price file {path} must be an object of models, got {type(raw).__name__} {raw!r:.60}")
    return {str(model): _price(model, entry, path) for model, entry in raw.items()}


def _price(model: str, entry: Any, path: str | os.PathLike[str], *, tiered: bool = True) -> Price:
    if not isinstance(entry, dict):
        raise ConfigError(f"price of {model!r} in {path} must be an object with input and output")
    tiers = entry.get("tiers", {}) if tiered else {}
    if not isinstance(tiers, dict) or any(not isinstance(name, str) or not name.strip() for name in tiers):
        raise ConfigError(f"price of {model!r} in {path}: tiers must be an object of tier names, got {tiers!r:.60}")
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
        tiers=tuple((name, _price(f"{model} ({name})", rates, path, tiered=False)) for name, rates in tiers.items()),
    )  # fmt: skip


_DATED = re.compile(r"^(?P<family>.+)-(?:\d{4}-\d{2}-\d{2}|\d{4})$")


def price_for(
    model: str,
    *,
    local: bool = False,
    prices: dict[str, Price] | None = None,
    api_url: str | None = None,
) -> Price:
    """The price of ``model``, with its service tiers: from ``prices`` (by name, by name without a
    provider prefix such as ``openai/``, or by family for a dated snapshot), else from genai-prices
    (the provider named by the prefix, or by ``api_url`` for a hosted server). A model with neither
    is `LOCAL` when ``local`` (served on this machine), else a `ConfigError`. A model served on this
    machine under a priced name (a gateway such as LiteLLM forwarding to its provider) is priced."""
    provider, _, bare = model.rpartition("/")
    for name in dict.fromkeys([model, bare]):
        if prices and name in prices:
            return prices[name]
        if prices and (dated := _DATED.match(name)) is not None and dated["family"] in prices:
            return prices[dated["family"]]
    found = _catalogue(bare, provider or None, None if local else api_url)
    if found is not None:
        return found
    if local:
        return LOCAL
    raise ConfigError(
        f"no price for hosted model {model!r}: price it as the model it runs (--price-as openai/gpt-4o-mini), "
        "give its price (--price-file; in Python, price=), or declare it free (--free; in Python, price=FREE) "
        f"(genai-prices {_VERSION} knows the models of OpenAI, Anthropic, Google and others by their names)"
    )


def check_service_tier(price: Price, tier: str | None, model: str) -> None:
    """`ConfigError` unless ``tier`` (asked of the server) is one ``price`` knows for ``model``, or
    "auto" (the account's default, whatever it is: priced as the server says)."""
    if tier is None or tier == "auto" or tier in price.tier_names:
        return
    known = ", ".join(["auto", *price.tier_names])
    where = price.source or "its price"
    hint = f" (did you mean {tier.lower()!r}?)" if tier.lower() in price.tier_names else ""
    raise ConfigError(
        f"service tier {tier!r}{hint} is not a tier of {model!r} in {where}: it has {known}. "
        'Give the tier\'s price in a --price-file ("tiers"), or ask for another'
    )


_VERSION = metadata.version("genai-prices")


@lru_cache(maxsize=256)
def _catalogue(model: str, provider: str | None, api_url: str | None) -> Price | None:
    """genai-prices' rates for ``model`` today, with its service tiers, or None when it does not know the model."""
    from genai_prices import Usage, calc_price

    now = datetime.now(timezone.utc)

    def per_million(tier: str | None, **tokens: int) -> Any:
        where: dict[str, Any] = {"provider_id": provider} if provider else {}
        if api_url and not provider:
            where = {"provider_api_url": api_url}
        context = {"service_tier": tier} if tier else None
        return calc_price(Usage(**tokens), model_ref=model, price_context=context, genai_request_timestamp=now, **where)

    try:
        priced = per_million(None, input_tokens=1000)  # 1,000 tokens: below any long-context tier
    except (LookupError, ValueError):
        return None
    label = f"genai-prices {_VERSION}: {priced.provider.id}/{priced.model.id}"

    def at(tier: str | None) -> Price:
        return Price(
            input=per_million(tier, input_tokens=1000).total_price * 1000,
            output=per_million(tier, output_tokens=1000).total_price * 1000,
            cache_read=per_million(tier, input_tokens=1000, cache_read_tokens=1000).total_price * 1000,
            cache_write=per_million(tier, input_tokens=1000, cache_write_tokens=1000).total_price * 1000,
            as_of=now.date().isoformat(),
            source=f"{label} ({tier})" if tier else label,
            provider=priced.provider.id,
        )

    return replace(at(None), tiers=tuple((tier, at(tier)) for tier in _tiers(priced.model, now)))


def _tiers(model: Any, now: datetime) -> list[str]:
    """The service tiers genai-prices prices ``model`` at today, besides the standard one."""
    found = []
    for variant in getattr(model, "price_variants", None) or ():
        tier = variant.when.get("service_tier") if len(variant.when) == 1 else None
        active = variant.constraint is None or variant.constraint.active(now)
        if tier and tier not in STANDARD_TIERS and tier not in found and active:
            found.append(tier)
    return found
