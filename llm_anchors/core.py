"""The engine's parts, for code that extends it rather than uses it.

``llm_anchors`` exports what explaining a model needs; this module exports
what writing a new backend, classifier, sampler or search needs, and the
pieces the explainers are made of:

- contracts and their defaults: `Backend` / `BaseBackend`, `Classifier` /
  `BaseClassifier`, `Sampler`, `TokenCounter`, `MemoryFeatures` (with
  `TextMemoryFeatures`, `TabularMemoryFeatures`, `ImageMemoryFeatures`);
- the pure search: `BeamSearch`, `GuidedSearch`, `SearchParams`, the KL
  bounds and LUCB (`kl_*`, `compute_beta`, `lucb`), rules;
- the query engine and its accounting: `QueryEngine`, `QueryStats`,
  `Charge`, `Reservation`, `BudgetReport`;
- an explanation's parts: `AnchorData`, `Meta`, `Cost`, `RuleStats`;
- prices and the memory: `Price`, `PRICES`, `RuleMemory`, `SentenceEmbedder`.

These names may change between minor releases; the top-level ones do not.
"""

from ._backend import Backend, BaseBackend, Completion, CompletionParams, Completions, MockBackend, as_backend
from ._bandit import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb
from ._budget import BudgetReport, Charge, JournalState, Reservation, SpendCap, read_journal
from ._classifier import BaseClassifier, Batch, Classifier, Label, as_classifier
from ._embeddings import SentenceEmbedder
from ._engine import QueryEngine, QueryStats
from ._explanation import AnchorData, Cost, MemorySettings, MemoryUse, Meta, Recheck, Settings, Stage
from ._guided import GuidedSearch
from ._image import ImageInstance, ImageMemoryFeatures
from ._manchors import MemoryFeatures, TextMemoryFeatures
from ._memory import Memory, MemoryEntry, RuleMemory
from ._pricing import FREE, LOCAL, PRICES, Price, load_prices, price_for
from ._progress import Progress, ProgressBar, StreamProgress
from ._results import ResultsFile, input_hash, read_results
from ._resumable import RunReport, explain_resumable, run_config
from ._retry import is_retryable
from ._rules import Rule, covers, make_rule
from ._sampler import Instance, Sampler
from ._search import BeamSearch, RoundTrace, RuleStats, SampleRequest, Samples, SearchParams, SearchResult
from ._tabular import TabularInstance, TabularMemoryFeatures
from ._text import TextInstance
from ._tokens import EstimateCounter, TokenCount, TokenCounter

__all__ = [
    "FREE",
    "LOCAL",
    "PRICES",
    "AnchorData",
    "Backend",
    "BaseBackend",
    "BaseClassifier",
    "Batch",
    "BeamSearch",
    "BudgetReport",
    "Charge",
    "Classifier",
    "Completion",
    "CompletionParams",
    "Completions",
    "Cost",
    "EstimateCounter",
    "GuidedSearch",
    "ImageInstance",
    "ImageMemoryFeatures",
    "Instance",
    "JournalState",
    "Label",
    "Memory",
    "MemoryEntry",
    "MemoryFeatures",
    "MemorySettings",
    "MemoryUse",
    "Meta",
    "MockBackend",
    "Price",
    "Progress",
    "QueryEngine",
    "QueryStats",
    "Recheck",
    "Reservation",
    "ResultsFile",
    "RoundTrace",
    "Rule",
    "RuleMemory",
    "RuleStats",
    "ProgressBar",
    "RunReport",
    "SampleRequest",
    "Sampler",
    "Samples",
    "SearchParams",
    "SearchResult",
    "SentenceEmbedder",
    "Settings",
    "SpendCap",
    "Stage",
    "StreamProgress",
    "TabularInstance",
    "TabularMemoryFeatures",
    "TextInstance",
    "TextMemoryFeatures",
    "TokenCount",
    "TokenCounter",
    "as_backend",
    "as_classifier",
    "compute_beta",
    "covers",
    "explain_resumable",
    "input_hash",
    "is_retryable",
    "kl_bernoulli",
    "kl_lower_bound",
    "kl_upper_bound",
    "load_prices",
    "lucb",
    "make_rule",
    "price_for",
    "read_journal",
    "read_results",
    "run_config",
]
