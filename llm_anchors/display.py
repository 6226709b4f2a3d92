"""Pictures of explanations: an image's anchor outlined, the rest dimmed. (A run's HTML report is
`llm_anchors.run.write_report`.)

>>> from llm_anchors.display import save_anchor_png
>>> save_anchor_png(exp, "anchor.png", sampler)   # the ImageSampler that explained it
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._exceptions import InvalidInputError
from .explain.explanation import Explanation
from .samplers.image import ImageInstance, ImageSampler, unit_range

__all__ = ["anchor_image", "save_anchor_png"]


def anchor_image(explanation: Explanation, sampler: ImageSampler, image: object | None = None) -> np.ndarray:
    """The explained image (H × W × 3, 0–1) with everything outside the anchor
    dimmed and the anchor's superpixels outlined.

    ``image``: the explained image, needed once ``sampler`` no longer holds it
    (it keeps its ``max_images`` most recent).
    """
    import skimage.segmentation

    instance = _instance(explanation, sampler, image)
    kept = np.zeros(len(instance.features), dtype=bool)
    kept[list(explanation.data.positions)] = True
    mask = kept[instance.segments]
    scaled = unit_range(instance.image)
    out = np.where(mask[..., None], scaled, 0.25 * scaled + 0.75 * 0.5)
    outline = np.where(mask, instance.segments + 1, 0)  # 0: background, never outlined
    edges = skimage.segmentation.find_boundaries(outline, mode="inner", background=0)  # type: ignore[no-untyped-call]
    out[edges] = (1.0, 0.85, 0.0)
    return out


def save_anchor_png(
    explanation: Explanation, path: str | Path, sampler: ImageSampler, image: object | None = None
) -> Path:
    """Write `anchor_image` as a PNG (Pillow, which scikit-image installs); small images are enlarged."""
    from PIL import Image

    pixels = (np.clip(anchor_image(explanation, sampler, image), 0, 1) * 255).astype(np.uint8)
    scale = max(1, 256 // max(pixels.shape[:2]))
    size = (pixels.shape[1] * scale, pixels.shape[0] * scale)
    picture = Image.fromarray(pixels).resize(size, Image.Resampling.NEAREST)
    path = Path(path)
    picture.save(path, format="PNG")
    return path


def _instance(explanation: Explanation, sampler: ImageSampler, image: object | None) -> ImageInstance:
    if image is not None:
        return sampler.features(image)
    instance = sampler.held(explanation.data.query)
    if instance is None:
        raise InvalidInputError("this image is no longer held by the sampler: pass image=")
    return instance
