"""What the explainer needs of a kind of input: `Sampler` and its `Instance`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from .._sync import in_thread
from ..search.rules import Rule
from ..search.samples import SampleRequest

__all__ = ["HideRate", "Instance", "Refines", "Sampler", "draw", "keep_independently"]


class Instance(Protocol):
    """One input to explain, split into features.

    ``query`` is the string the classifier is asked about (a text; a row as
    JSON; an image's ``digest:kept-bits``); ``features`` names each feature
    as it appears in an anchor (a word, a predicate such as "age > 47.00",
    a superpixel).
    """

    @property
    def query(self) -> str: ...

    @property
    def features(self) -> tuple[str, ...]: ...


@runtime_checkable
class Sampler(Protocol):
    """Splits inputs into features and draws perturbations that keep a rule.

    `TextSampler`, `TabularSampler` and `ImageSampler` implement it. All
    randomness comes from the generator passed in.
    """

    def settings(self) -> dict[str, object]: ...

    def describe(self, instance: Any) -> str:
        """The perturbation distribution of one input's explanation, in words (its claim names it)."""
        ...

    def features(self, x: object) -> Any:
        """The `Instance` of an input; `InvalidInputError` when it cannot be explained."""
        ...

    def sample(self, instance: Any, rule: Rule, n: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
        """``n`` perturbations (query strings) keeping ``rule``, and their (n × features) kept matrix."""
        ...

    def sample_present(self, instance: Any, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        """The kept matrix alone (for coverage: nothing is sent to the model)."""
        ...


@runtime_checkable
class Refines(Protocol):
    """A sampler whose features come at more than one level (`TextSampler`: sentences, then words)."""

    def refine(self, instance: Any, rule: Rule) -> Any | None:
        """The finer instance a coarse anchor ``rule`` leads to, or None when there is nothing finer to search."""
        ...


HideRate = float | Literal["uniform"]
"""How often a feature outside the rule is hidden: a fixed probability, or one drawn per sample from U(0, 1)."""


def keep_independently(n: int, n_features: int, rule: Rule, p_hide: HideRate, rng: np.random.Generator) -> np.ndarray:
    """An (n × features) kept matrix: each feature hidden with ``p_hide`` (with "uniform", a rate drawn
    for each sample from U(0, 1)), independently given that rate; ``rule``'s always kept."""
    rate = rng.random((n, 1)) if p_hide == "uniform" else p_hide
    present = rng.random((n, n_features)) >= rate
    if rule:
        present[:, sorted(rule)] = True
    return present


async def draw(
    sampler: Sampler, instance: Any, requests: Sequence[SampleRequest], rng: np.random.Generator
) -> list[tuple[list[str], np.ndarray]]:
    """The perturbations a round of requests asks for, rendered in request order (in a worker thread: a long
    input's texts take milliseconds each to render)."""
    return await in_thread(lambda: [sampler.sample(instance, r.rule, r.n, rng) for r in requests])
