"""Token counting behind one small interface, `TokenCounter`.

`EstimateCounter` (a conservative estimate: bytes / 3, rounded up, plus a
margin, marked as an estimate in every report) is the fallback when a
backend offers no exact counter. Exact counters live with the backends that
use them (``llm_anchors/backends/token_counters.py``: tiktoken, a server's /tokenize).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["EstimateCounter", "TokenCount", "TokenCounter"]


@dataclass(frozen=True)
class TokenCount:
    """Prompt tokens per prompt; ``estimated`` when not from the model's tokenizer."""

    tokens: list[int]
    estimated: bool = False

    @property
    def total(self) -> int:
        return sum(self.tokens)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the prompt tokens of prompts, in order."""

    async def count(self, prompts: Sequence[str]) -> TokenCount: ...


class EstimateCounter:
    """Over-estimates: UTF-8 bytes / 3 (tokens average ~4 bytes in English) plus ``margin``."""

    def __init__(self, margin: int = 8) -> None:
        self.margin = margin

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        return TokenCount([math.ceil(len(p.encode()) / 3) + self.margin for p in prompts], estimated=True)
