"""Explaining: the explanation and its parts, Anchors, the proxy, MAnchors, the tabular and image explainers."""

from .anchors import AnchorsExplainer
from .explanation import (
    AnchorData,
    Cost,
    Explanation,
    MemorySettings,
    MemoryUse,
    Meta,
    Opinion,
    ProxyUse,
    Recheck,
    SecondOpinion,
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
    "Opinion",
    "Progress",
    "ProgressBar",
    "Proxy",
    "ProxyUse",
    "Recheck",
    "SecondOpinion",
    "Settings",
    "Stage",
    "StreamProgress",
    "TabularExplainer",
]
