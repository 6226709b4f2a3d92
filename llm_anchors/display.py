"""Pictures of explanations: an image's anchor outlined, the rest dimmed; a run's HTML report.

>>> from llm_anchors.display import save_anchor_png, write_report
>>> save_anchor_png(exp, "anchor.png", sampler)   # the ImageSampler that explained it
>>> write_report("results.jsonl", "report.html")  # what llm-anchors report does
"""

from ._image import anchor_image, save_anchor_png
from ._report import write_report

__all__ = ["anchor_image", "save_anchor_png", "write_report"]
