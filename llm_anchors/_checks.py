"""Argument checks shared by the constructors: a wrong value is a `ConfigError` naming it."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, TypeVar

from ._exceptions import ConfigError

__all__ = ["check_dollars", "check_int", "check_number"]

T = TypeVar("T")


def check_int(name: str, value: Any, *, minimum: int = 1, optional: bool = False) -> None:
    """``value`` is an int ≥ ``minimum`` (a bool is not an int here), or None when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        more = " or None" if optional else ""
        raise ConfigError(f"{name} must be an integer >= {minimum}{more}, got {value!r}")


def check_number(
    name: str,
    value: Any,
    *,
    low: float = 0.0,
    high: float = math.inf,
    open_low: bool = True,
    open_high: bool = True,
    optional: bool = False,
) -> None:
    """``value`` is a real number within (low, high) (ends open or closed), or None when ``optional``."""
    if value is None and optional:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    inside = number and (value > low if open_low else value >= low) and (value < high if open_high else value <= high)
    if not inside:
        bounds = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        raise ConfigError(f"{name} must be a number in {bounds}{' or None' if optional else ''}, got {value!r}")


def check_dollars(name: str, value: float | int | str | Decimal | None) -> Decimal | None:
    """``value`` as exact dollars, a finite number >= 0 (None stays None)."""
    if value is None:
        return None
    try:
        result = Decimal(str(value))
    except ArithmeticError as exc:
        raise ConfigError(f"{name} must be a number, got {value!r}") from exc
    if not result.is_finite() or result < 0:
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    return result
