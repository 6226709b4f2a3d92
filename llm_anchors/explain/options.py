"""`ExplainerOptions`: `AnchorsExplainer`'s keywords, typed whole, as the explainers built on it take them."""

from __future__ import annotations

from typing import Literal, TypedDict

from ..models.retry import RetryPolicy
from ..money.budget import SpendCap
from ..query.cache import QueryCache
from ..samplers.base import Sampler
from ..samplers.text import Perturbation
from ..search.params import SearchParams
from .meta import SecondOpinion

__all__ = ["ExplainerOptions"]


class ExplainerOptions(TypedDict, total=False):
    """`AnchorsExplainer`'s keywords, as the explainers built on it take them (typed, whole)."""

    search: SearchParams | None
    seed: int | None
    sampler: Sampler | None
    perturbation: Perturbation | None
    max_concurrency: int
    request_size: int | None
    cache: QueryCache | None
    retry: RetryPolicy | None
    budget: SpendCap | None
    on_budget: Literal["raise", "return"]
    n_examples: int
    verify_determinism: int | None
    second_opinion: SecondOpinion | None
