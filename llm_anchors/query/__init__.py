"""Asking the model: the query cache and the engine (dedupe, chunk, reserve, send, settle)."""

from .cache import CacheWriteWarning, QueryCache
from .engine import QueryEngine, QueryStats

__all__ = [
    "CacheWriteWarning",
    "QueryCache",
    "QueryEngine",
    "QueryStats",
]
