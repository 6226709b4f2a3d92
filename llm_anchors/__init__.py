"""llm-anchors: explain a classifier's label with an anchor, and count its cost.

The names here are the stable API: explainers, the classifiers they
explain, samplers, the cost controls, the result and the errors. The
engine's parts, for extending it (protocols, search, query engine,
accounting), are in `llm_anchors.core`.
"""

from ._budget import Budget
from ._cache import CacheWriteWarning, QueryCache
from ._classifier import UNPARSED, FunctionClassifier
from ._exceptions import (
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    BudgetExceeded,
    ClassifierError,
    ConfigError,
    InvalidInputError,
    LLMAnchorsError,
    NondeterminismWarning,
    RateLimitError,
)
from ._explainer import AnchorsExplainer
from ._explanation import Explanation
from ._image import ImageClassifier, ImageExplainer, ImageSampler
from ._llm import LLMClassifier
from ._manchors import MAnchorsExplainer
from ._retry import RetryPolicy
from ._tabular import TabularClassifier, TabularExplainer, TabularSampler
from ._text import TextSampler
from ._version import __version__

__all__ = [
    "UNPARSED",
    "AnchorsExplainer",
    "BackendError",
    "BackendTimeoutError",
    "BadResponseError",
    "Budget",
    "BudgetExceeded",
    "CacheWriteWarning",
    "ClassifierError",
    "ConfigError",
    "Explanation",
    "FunctionClassifier",
    "ImageClassifier",
    "ImageExplainer",
    "ImageSampler",
    "InvalidInputError",
    "LLMAnchorsError",
    "LLMClassifier",
    "MAnchorsExplainer",
    "NondeterminismWarning",
    "QueryCache",
    "RateLimitError",
    "RetryPolicy",
    "TabularClassifier",
    "TabularExplainer",
    "TabularSampler",
    "TextSampler",
    "__version__",
]
