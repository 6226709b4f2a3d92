"""Pictures of explanations: an image's anchor outlined, the rest dimmed.

>>> from llm_anchors.display import save_anchor_png
>>> save_anchor_png(exp, "anchor.png", sampler)   # the ImageSampler that explained it
"""

from ._image import anchor_image, save_anchor_png

__all__ = ["anchor_image", "save_anchor_png"]
