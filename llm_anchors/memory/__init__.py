"""MAnchors' memory: entries in HNSW (`RuleMemory`), sentence embeddings, what a kind of input gives it."""

from .features import MemoryFeatures
from .store import Memory, MemoryEntry, RuleMemory

__all__ = [
    "Memory",
    "MemoryEntry",
    "MemoryFeatures",
    "RuleMemory",
]
