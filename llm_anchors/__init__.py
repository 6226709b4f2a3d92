"""llm-anchors: explain a classifier's label with an anchor, and count its cost."""

from ._backend import Backend, Completion, CompletionParams, Completions, MockBackend
from ._bandit import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb
from ._budget import Budget, BudgetReport, Charge, Reservation
from ._cache import CacheWriteWarning, QueryCache
from ._classifier import UNPARSED, Batch, Classifier, FunctionClassifier, Label, Usage
from ._embeddings import SentenceEmbedder
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
    NondeterminismWarning,
    RateLimitError,
)
from ._explainer import AnchorsExplainer, Progress
from ._explanation import AnchorData, Cost, Explanation, Meta
from ._guided import GuidedSearch
from ._image import ImageExplainer, ImageInstance, ImageSampler
from ._llm import LLMClassifier
from ._manchors import MAnchorsExplainer, MemoryFeatures, TextMemoryFeatures
from ._memory import MemoryEntry, RuleMemory
from ._pricing import FREE, PRICES, Price, load_prices, price_for
from ._retry import RetryPolicy, is_retryable
from ._rules import Rule, covers, make_rule
from ._sampler import Instance, Sampler
from ._search import BeamSearch, RoundTrace, RuleStats, SampleRequest, Samples, SearchParams, SearchResult
from ._tabular import TabularExplainer, TabularInstance, TabularSampler
from ._text import TextInstance, TextSampler
from ._tokens import EstimateCounter, ServerTokenCounter, TiktokenCounter, TokenCount, TokenCounter
from ._version import __version__

__all__ = [
    "AnchorData",
    "AnchorsExplainer",
    "Backend",
    "BackendError",
    "BackendTimeoutError",
    "BadResponseError",
    "Batch",
    "BeamSearch",
    "Budget",
    "BudgetExceeded",
    "BudgetReport",
    "CacheWriteWarning",
    "Charge",
    "Classifier",
    "ClassifierError",
    "Completion",
    "CompletionParams",
    "Completions",
    "ConfigError",
    "Cost",
    "EstimateCounter",
    "Explanation",
    "FREE",
    "FunctionClassifier",
    "GuidedSearch",
    "ImageExplainer",
    "ImageInstance",
    "ImageSampler",
    "Instance",
    "InvalidInputError",
    "LLMAnchorsError",
    "LLMClassifier",
    "Label",
    "MAnchorsExplainer",
    "MemoryEntry",
    "MemoryFeatures",
    "Meta",
    "MockBackend",
    "NondeterminismWarning",
    "PRICES",
    "Price",
    "Progress",
    "QueryCache",
    "QueryEngine",
    "QueryStats",
    "RateLimitError",
    "Reservation",
    "RetryPolicy",
    "RoundTrace",
    "Rule",
    "RuleMemory",
    "RuleStats",
    "SampleRequest",
    "Sampler",
    "Samples",
    "SearchParams",
    "SearchResult",
    "SentenceEmbedder",
    "ServerTokenCounter",
    "TabularExplainer",
    "TabularInstance",
    "TabularSampler",
    "TextInstance",
    "TextMemoryFeatures",
    "TextSampler",
    "TiktokenCounter",
    "TokenCount",
    "TokenCounter",
    "UNPARSED",
    "Usage",
    "__version__",
    "compute_beta",
    "covers",
    "is_retryable",
    "kl_bernoulli",
    "kl_lower_bound",
    "kl_upper_bound",
    "load_prices",
    "lucb",
    "make_rule",
    "price_for",
]
