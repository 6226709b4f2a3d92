"""`ImageExplainer`: Anchors for an image model, over an `ImageSampler`'s superpixels."""

from __future__ import annotations

from typing import Any

from ..samplers.image import ImageClassifier, ImageSampler
from .anchors import AnchorsExplainer

__all__ = ["ImageExplainer"]


class ImageExplainer(AnchorsExplainer):
    """Anchors for an image model: ``predict(images) -> labels`` on (n × H × W × 3) batches.

    >>> explainer = ImageExplainer(model.predict, ImageSampler(n_segments=16), seed=0)
    >>> exp = await explainer.explain(image)
    >>> save_anchor_png(exp, "anchor.png", explainer.sampler)   # llm_anchors.display
    """

    name = "ImageExplainer"

    def __init__(self, predict: Any, sampler: ImageSampler | None = None, *, name: str | None = None, **kwargs: Any):
        sampler = sampler or ImageSampler()
        super().__init__(ImageClassifier(predict, sampler, name=name), sampler=sampler, **kwargs)
