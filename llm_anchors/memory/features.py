"""`MemoryFeatures`: what MAnchors' memory needs of a kind of input (its key, and HT)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .store import MemoryEntry

__all__ = ["MemoryFeatures"]


@runtime_checkable
class MemoryFeatures(Protocol):
    """What MAnchors needs of a kind of input: a memory key and an HT.

    ``embed`` gives unit vectors (compared by cosine); ``describe`` what an
    entry keeps of its rule's features for HT; ``horizontal`` maps a
    remembered rule onto the positions of a new input's features.
    `TextMemoryFeatures`, `TabularMemoryFeatures` and `ImageMemoryFeatures`
    implement it; a sampler offers its kind's as ``memory_features()``.
    """

    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, instances: Sequence[Any]) -> np.ndarray: ...

    def describe(self, instance: Any, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]: ...

    def horizontal(self, entry: MemoryEntry, instance: Any) -> list[int]: ...

    def keys(self, instance: Any) -> tuple[str, ...]:
        """A name per feature that means the same in every input (a lower-cased
        word, a predicate), or () when features have none (superpixels)."""
        ...
