"""Argument checks shared by the constructors (a wrong value is a `ConfigError` naming it), and JSON read
back into the dataclasses that wrote it by their types alone (`decoded`)."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Hashable, Sequence
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
    by item, a union as the first of its types that reads it, a label as `_label` reads it, an int (≥ 0),
    float (finite), flag or name checked, a `Literal` one of its values; anything else (`Any`, a sampler's
    own settings, a `Decimal`'s string) as it is. ``where``: the field's path, for the error. How a type is
    read is worked out once per type (`_reader`), not again for every value and every item."""
    return _reader(hint)(raw, where)


Reader = Callable[[Any, str], Any]


@functools.cache
def _reader(hint: Any) -> Reader:
    """How to read a value of ``hint`` (see `decoded`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union([_reader(a) for a in args if a is not type(None)], type(None) in args)
    if dataclasses.is_dataclass(hint):
        return _dataclass(typing.cast(type, hint))
    if origin is tuple and args[1:] == (Ellipsis,):
        each = _reader(args[0])
        return _items(lambda items: [each] * len(items))
    if origin is tuple:
        fixed = [_reader(a) for a in args]
        return _items(lambda items: [r for r, _ in zip(fixed, items, strict=True)])  # one item per type
    if origin is dict:
        value = _reader(args[1])
        return lambda raw, where: {k: value(v, f"{where}[{k!r}]") for k, v in _mapping(raw, where).items()}
    if origin is typing.Literal:
        return functools.partial(_one_of, args)
    if hint is Hashable:  # a label
        return lambda raw, where: _label(raw)
    return _SIMPLE.get(hint, lambda raw, where: raw)


def _union(arms: list[Reader], optional: bool) -> Reader:
    def read(raw: Any, where: str) -> Any:
        if raw is None and optional:
            return None
        for arm in arms[:-1]:
            try:
                return arm(raw, where)
            except (TypeError, ValueError):
                continue
        return arms[-1](raw, where)

    return read


def _items(readers: Callable[[Sequence[Any]], list[Reader]]) -> Reader:
    """A tuple's reader: ``readers(items)`` gives each item's. The items are read under the tuple's path; only
    when one is refused are they read again, to name it (``where[i]``): no path is built for a good item."""

    def read(raw: Any, where: str) -> Any:
        items = _list(raw, where)
        try:
            return tuple(r(x, where) for r, x in zip(readers(items), items, strict=True))
        except (TypeError, ValueError):
            return tuple(r(x, f"{where}[{i}]") for i, (r, x) in enumerate(zip(readers(items), items, strict=True)))

    return read


def _dataclass(kind: type) -> Reader:
    fields: dict[str, Reader] = {}  # its fields' readers, worked out at its first value (a field may name it)

    def read(raw: Any, where: str) -> Any:
        if not fields:
            fields.update((name, _reader(hint)) for name, hint in _hints(kind).items())
        prefix = f"{where}." if where else ""
        given = {k: fields[k](v, prefix + k) if k in fields else v for k, v in _mapping(raw, where).items()}
        return kind(**given)

    return read


def _list(raw: Any, where: str) -> Any:
    if not isinstance(raw, list | tuple):
        raise TypeError(f"{where or 'it'} is {raw!r}, not a list")
    return raw


def _mapping(raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise TypeError(f"{where or 'it'} is {raw!r}, not a mapping")
    return raw


def _one_of(allowed: tuple[Any, ...], raw: Any, where: str) -> Any:
    if raw not in allowed:
        raise ValueError(f"{where} is {raw!r}, not one of {', '.join(map(repr, allowed))}")
    return raw


def _label(raw: Any) -> Hashable:
    """A label as JSON gives it back: a name, a number, a flag or null; a list is the tuple it was. A
    hand-edited ``{"x": 1}`` is a `TypeError`."""
    if isinstance(raw, list):
        return tuple(_label(item) for item in raw)
    if raw is None or isinstance(raw, str | int | bool) or (isinstance(raw, float) and math.isfinite(raw)):
        return raw
    raise TypeError(f"label is {raw!r}, not a label (a name, a number, a flag)")


def _int(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise TypeError(f"{where} is {raw!r}, not a int")
    if raw < 0:  # every count, index and seed is one
        raise ValueError(f"{where} is {raw!r}, below zero")
    return raw


def _float(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{where} is {raw!r}, not a float")
    if not math.isfinite(raw):
        raise ValueError(f"{where} is {raw!r}")
    return raw


def _of(kind: type) -> Reader:
    def read(raw: Any, where: str) -> Any:
        if not isinstance(raw, kind):
            raise TypeError(f"{where} is {raw!r}, not a {kind.__name__}")
        return raw

    return read


_SIMPLE: dict[Any, Reader] = {int: _int, float: _float, bool: _of(bool), str: _of(str)}


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """A dataclass's resolved field types (resolved once: `typing.get_type_hints` compiles each)."""
    return typing.get_type_hints(kind)
