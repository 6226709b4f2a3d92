"""Argument checks shared by the constructors (a wrong value is a `ConfigError` naming it), and JSON read
back into the dataclasses that wrote it by their types alone (`decoded`)."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Hashable
from decimal import Decimal
from typing import Any, TypeVar

from ._exceptions import ConfigError

__all__ = ["check_dollars", "check_int", "check_number", "decoded"]

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


def decoded(hint: Any, raw: Any, where: str = "") -> Any:
    """``raw`` (parsed JSON) read as a value of ``hint``, by the one rule the types give: a dataclass from its
    fields (a field left out at its default, one it does not have a `TypeError`), tuples and mappings item
    by item, a label as `_label` reads it, a number, flag or name checked (`_check_simple`), a `Literal`
    one of its values; anything else (`Any`, a sampler's own settings, a `Decimal`'s string) as it is.
    ``where``: the field's path, for the error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # the dataclasses read here hold no union but X | None
        return None if raw is None else decoded(next(a for a in args if a is not type(None)), raw, where)
    if dataclasses.is_dataclass(hint):
        if not isinstance(raw, dict):
            raise TypeError(f"{where or 'it'} is {raw!r}, not a mapping")
        hints, prefix = _hints(typing.cast(type, hint)), f"{where}." if where else ""
        fields = {k: decoded(hints[k], v, prefix + k) if k in hints else v for k, v in raw.items()}
        return typing.cast(type, hint)(**fields)
    if origin in (tuple, dict) and not isinstance(raw, list | tuple if origin is tuple else dict):
        raise TypeError(f"{where} is {raw!r}, not a {'list' if origin is tuple else 'mapping'}")
    if origin is tuple and args[1:] == (Ellipsis,):
        return tuple(decoded(args[0], item, f"{where}[{i}]") for i, item in enumerate(raw))
    if origin is tuple:
        return tuple(decoded(h, item, f"{where}[{i}]") for i, (h, item) in enumerate(zip(args, raw, strict=True)))
    if origin is dict:
        return {key: decoded(args[1], value, f"{where}[{key!r}]") for key, value in raw.items()}
    if origin is typing.Literal and raw not in args:
        raise ValueError(f"{where} is {raw!r}, not one of {', '.join(map(repr, args))}")
    if hint is Hashable:  # a label
        return _label(raw)
    _check_simple(raw, hint, where)
    return raw


def _label(raw: Any) -> Hashable:
    """A label as JSON gives it back: a name, a number, a flag or null; a list is the tuple it was. A
    hand-edited ``{"x": 1}`` is a `TypeError`."""
    if isinstance(raw, list):
        return tuple(_label(item) for item in raw)
    if raw is None or isinstance(raw, str | int | bool) or (isinstance(raw, float) and math.isfinite(raw)):
        return raw
    raise TypeError(f"label is {raw!r}, not a label (a name, a number, a flag)")


_SIMPLE = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """A dataclass's resolved field types (resolved once: `typing.get_type_hints` compiles each)."""
    return typing.get_type_hints(kind)


def _check_simple(got: Any, hint: Any, name: str) -> None:
    """`TypeError` unless ``got`` is of ``hint`` when that is an int, a float, a flag or a name."""
    allowed = _SIMPLE.get(getattr(hint, "__name__", "")) if isinstance(hint, type) else None
    if allowed and (not isinstance(got, allowed) or (bool not in allowed and isinstance(got, bool))):
        raise TypeError(f"{name} is {got!r}, not a {hint.__name__}")
    if hint is float and not math.isfinite(got):
        raise ValueError(f"{name} is {got!r}")
    if hint is int and got < 0:  # every count, index and seed is one
        raise ValueError(f"{name} is {got!r}, below zero")
