"""`Completed`: an object with a protocol's required members, completed with its optional ones' defaults."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Completed"]


class Completed:
    """``inner`` with every optional member of its protocol: each value ``inner`` has of its type in
    ``values`` (read once: the engine asks per request), else the one ``defaults`` has; each method of
    ``methods`` its own, else ``defaults``'. The rest (``identity``, the call that answers) is
    ``inner``'s."""

    def __init__(
        self,
        inner: Any,
        defaults: object,
        values: Mapping[str, type | tuple[type, ...]],
        methods: Iterable[str],
    ) -> None:
        self.inner = inner
        for name, kind in values.items():
            own = getattr(inner, name, None)
            setattr(self, name, own if isinstance(own, kind) else getattr(defaults, name))
        for name in methods:
            own = getattr(inner, name, None)
            setattr(self, name, own if callable(own) else getattr(defaults, name))

    @property
    def identity(self) -> str:
        return str(self.inner.identity)

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")  # absent while unpickling: no recursion
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)
