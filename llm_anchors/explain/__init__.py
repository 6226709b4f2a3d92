"""Explaining: the explanation and its parts, Anchors, MAnchors, the tabular and image explainers."""

from .anchors import AnchorsExplainer
from .explaining import Measured
from .explanation import AnchorData, Explanation, Level, Opinion
from .image import ImageExplainer
from .manchors import MAnchorsExplainer
from .meta import Cost, MAnchorsSettings, MemoryUse, Meta, Recheck, SecondOpinion, Settings, Stage
from .options import ExplainerOptions
from .progress import Progress, ProgressBar, StreamProgress
from .sources import ProposerFactory
from .tabular import TabularExplainer

__all__ = [
    "AnchorData",
    "AnchorsExplainer",
    "ExplainerOptions",
    "Cost",
    "Explanation",
    "ImageExplainer",
    "Level",
    "MAnchorsExplainer",
    "Measured",
    "ProposerFactory",
    "MAnchorsSettings",
    "MemoryUse",
    "Meta",
    "Opinion",
    "Progress",
    "ProgressBar",
    "Recheck",
    "SecondOpinion",
    "Settings",
    "Stage",
    "StreamProgress",
    "TabularExplainer",
]
