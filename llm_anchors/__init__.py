"""llm-anchors: explain a classifier's label with an anchor, and count its cost.

The names here are what explaining needs: explainers, the classifiers they
explain, samplers, the cost controls, the result and the errors. Writing a
backend, classifier, sampler, cap or memory: `llm_anchors.extend`. A
dataset as a resumable run: `llm_anchors.run`; on Ray:
`llm_anchors.distributed`. Each part of the engine is a package of its own
(`search`, `money`, `models`, `query`, `memory`, `samplers`, `explain`).
The API may change until 1.0.
"""

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
    ServerUnavailableError,
)
from ._version import __version__
from .explain import (
    AnchorsExplainer,
    Explanation,
    ImageExplainer,
    MAnchorsExplainer,
    TabularExplainer,
)
from .models import UNPARSED, FunctionClassifier, LLMClassifier, RetryPolicy
from .money import Budget
from .propose import MemoryParams
from .query import CacheWriteWarning, QueryCache
from .samplers import ImageClassifier, ImageSampler, TabularClassifier, TabularSampler, TextSampler
from .search import SearchParams

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
    "MemoryParams",
    "MAnchorsExplainer",
    "NondeterminismWarning",
    "QueryCache",
    "RateLimitError",
    "RetryPolicy",
    "SearchParams",
    "ServerUnavailableError",
    "TabularClassifier",
    "TabularExplainer",
    "TabularSampler",
    "TextSampler",
    "__version__",
]
