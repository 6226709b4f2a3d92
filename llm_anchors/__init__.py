"""llm-anchors: explain a classifier's label with an anchor, and count its cost."""

from ._bandit import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb
from ._cache import QueryCache
from ._classifier import Classifier, FunctionClassifier, Label
from ._engine import QueryEngine, QueryStats
from ._exceptions import (
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    BudgetExceeded,
    ClassifierError,
    ConfigError,
    InvalidInputError,
    LLMAnchorsError,
    RateLimitError,
)
from ._explainer import AnchorsExplainer
from ._explanation import AnchorData, Cost, Explanation, Meta
from ._rules import Rule, covers, make_rule
from ._search import BeamSearch, RoundTrace, RuleStats, SampleRequest, Samples, SearchParams, SearchResult
from ._text import TextInstance, TextSampler
from ._version import __version__

__all__ = [
    "AnchorData",
    "AnchorsExplainer",
    "BackendError",
    "BackendTimeoutError",
    "BadResponseError",
    "BeamSearch",
    "BudgetExceeded",
    "Classifier",
    "ClassifierError",
    "ConfigError",
    "Cost",
    "Explanation",
    "FunctionClassifier",
    "InvalidInputError",
    "LLMAnchorsError",
    "Label",
    "Meta",
    "QueryCache",
    "QueryEngine",
    "QueryStats",
    "RateLimitError",
    "RoundTrace",
    "Rule",
    "RuleStats",
    "SampleRequest",
    "Samples",
    "SearchParams",
    "SearchResult",
    "TextInstance",
    "TextSampler",
    "__version__",
    "compute_beta",
    "covers",
    "kl_bernoulli",
    "kl_lower_bound",
    "kl_upper_bound",
    "lucb",
    "make_rule",
]
