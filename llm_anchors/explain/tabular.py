"""`TabularExplainer`: Anchors for a tabular model, over a `TabularSampler`'s rows."""

from __future__ import annotations

from typing import Any

from ..samplers.tabular import TabularClassifier, TabularSampler
from .anchors import AnchorsExplainer

__all__ = ["TabularExplainer"]


class TabularExplainer(AnchorsExplainer):
    """Anchors for a tabular model: ``predict(matrix) -> labels`` over ``sampler``'s rows.

    >>> sampler = TabularSampler(train, names, categorical_names)
    >>> explainer = TabularExplainer(forest.predict, sampler, seed=0)
    >>> exp = await explainer.explain(row)   # "education = Bachelors AND ..."

    For MAnchors: ``MAnchorsExplainer(TabularClassifier(forest.predict, sampler), sampler=sampler)``.
    """

    name = "TabularExplainer"

    def __init__(self, predict: Any, sampler: TabularSampler, *, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(TabularClassifier(predict, sampler, name=name), sampler=sampler, **kwargs)
