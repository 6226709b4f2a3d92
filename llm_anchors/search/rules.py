"""Rules: sets of feature indices of one input, and what they cover."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["Rule", "covers", "make_rule"]

Rule = frozenset[int]
"""A rule: the features (word positions, for text) that must be kept."""


def make_rule(features: Iterable[int]) -> Rule:
    """Build a rule from feature indices."""
    return frozenset(int(f) for f in features)


def covers(rule: Rule, present: np.ndarray) -> np.ndarray:
    """Which rows of a boolean (samples × features) matrix satisfy ``rule``."""
    if not rule:
        return np.ones(present.shape[0], dtype=bool)
    return np.asarray(present[:, sorted(rule)].all(axis=1))
