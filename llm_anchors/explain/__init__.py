"""Explaining: the explanation and its parts, Anchors, MAnchors, the tabular and image explainers, progress."""

from .anchors import AnchorsExplainer
from .explanation import AnchorData, Cost, Explanation, MemorySettings, MemoryUse, Meta, Recheck, Settings, Stage
from .image import ImageExplainer
from .manchors import MAnchorsExplainer
from .progress import Progress, ProgressBar, StreamProgress
from .tabular import TabularExplainer

__all__ = [
    "AnchorData",
    "AnchorsExplainer",
    "Cost",
    "Explanation",
    "ImageExplainer",
    "MAnchorsExplainer",
    "MemorySettings",
    "MemoryUse",
    "Meta",
    "Progress",
    "ProgressBar",
    "Recheck",
    "Settings",
    "Stage",
    "StreamProgress",
    "TabularExplainer",
]
