"""The explained model: `Classifier` and `Backend`, the LLM classifier and the chat request it may send, retries."""

from .answer import Alternatives, LabelReader
from .backend import Backend, BaseBackend, Completion, CompletionParams, Completions, MockBackend, as_backend
from .classifier import (
    UNPARSED,
    BaseClassifier,
    Batch,
    Classifier,
    FunctionClassifier,
    Label,
    Probabilities,
    as_classifier,
)
from .llm import LLMClassifier
from .request import ChatRequest
from .retry import RetryPolicy, is_retryable

__all__ = [
    "UNPARSED",
    "Alternatives",
    "Backend",
    "BaseBackend",
    "BaseClassifier",
    "Batch",
    "ChatRequest",
    "Classifier",
    "Completion",
    "CompletionParams",
    "Completions",
    "FunctionClassifier",
    "LabelReader",
    "LLMClassifier",
    "Label",
    "Probabilities",
    "MockBackend",
    "RetryPolicy",
    "as_backend",
    "as_classifier",
    "is_retryable",
]
