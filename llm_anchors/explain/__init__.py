"""Explaining: the explanation and its parts, Anchors, the proxy, MAnchors, the tabular and image explainers."""

from .anchors import AnchorsExplainer
from .explanation import (
    AnchorData,
    Cost,
    Explanation,
    MemorySettings,
    MemoryUse,
    Meta,
    ProxyUse,
    Recheck,
    Settings,
    Stage,
)
from .image import ImageExplainer
from .manchors import MAnchorsExplainer
from .progress import Progress, ProgressBar, StreamProgress
from .proxy import Proxy
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
    "Proxy",
    "ProxyUse",
    "Recheck",
    "Settings",
    "Stage",
    "StreamProgress",
    "TabularExplainer",
]
