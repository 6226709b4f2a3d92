"""MAnchors as its paper has it (ICML 2026, Algorithms 1–3): ``MAnchorsExplainer(strategy="paper")``.

For an input whose nearest remembered input is similar enough (cosine ≥ τ_sim), the remembered
intermediate rule is mapped word by word onto the most similar words of the new input (horizontal
transformation, HT), words that add nothing are pruned by light sampling, and Anchors' beam search
resumes from the result (vertical transformation, VT). Otherwise plain Anchors runs and the
intermediate rule it passed through (the shortest rule on the path to the answer whose estimated
precision ≥ τ_mid) is remembered. The memory is this strategy: it is never off.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._sync import in_thread
from ..memory.store import MemoryEntry
from ..propose.memory import MemoryProposer, MemoryUse
from ..samplers.base import draw
from ..search.base import SearchResult
from ..search.rules import Rule
from ..search.samples import SampleRequest
from .anchors import AnchorsExplainer
from .explaining import Explaining

__all__ = ["find"]


async def find(
    explainer: AnchorsExplainer, memory: MemoryProposer, run: Explaining
) -> tuple[SearchResult, dict[str, Any]]:
    """The nearest similar input's rule mapped, pruned and resumed (VT); else Anchors, its rule remembered."""
    lookup = await memory.look_up(run.instance, run.target, 1)
    if lookup.similar:
        return await _vertical(explainer, memory, run, lookup.similar[0], lookup.use)
    result = await explainer._levels(run, lambda: explainer._search(run, None))
    used = lookup.use
    if not run.budget_exhausted:
        memory.remember(run.instance, run.target, result, lookup.vector, empty_anchor=False)
        used = memory.count(used, run.stats.queries)
    return result, {"memory_hit": False, "memory": used}


async def _vertical(
    explainer: AnchorsExplainer, memory: MemoryProposer, run: Explaining, entry: MemoryEntry, looked_up: MemoryUse
) -> tuple[SearchResult, dict[str, Any]]:
    """HT, pruning, then the beam search resumed from what is left (the first level only)."""
    mapped = await in_thread(memory.features.horizontal, entry, run.instance)
    kept = await _prune(explainer, memory, run, mapped)
    names = run.instance.features
    starts = [frozenset(kept) if kept else None]  # the HT rule starts the first level; a finer one, nothing
    result = await explainer._levels(run, lambda: explainer._search(run, starts.pop() if starts else None))
    used = replace(
        looked_up,
        source=entry.query,
        ht_rule=tuple(names[p] for p in mapped),
        ht_pruned=tuple(names[p] for p in mapped if p not in kept),
    )
    return result, {"memory_hit": True, "memory": used}


async def _prune(
    explainer: AnchorsExplainer, memory: MemoryProposer, run: Explaining, positions: list[int]
) -> list[int]:
    """Drop the words whose removal lowers the rule's precision on a light sample by ``prune_margin``
    at most (a rule of one word is compared with the empty rule: VT never drops a word it starts
    with, so a word this input needs not would stay in its anchor)."""
    params = memory.params
    if not positions or params.prune_samples == 0:
        return positions
    rules = [frozenset(positions)] + [frozenset(positions) - {p} for p in positions]
    full, *without = await _precisions(explainer, run, rules, params.prune_samples, "prune")
    return [p for p, precision in zip(positions, without, strict=True) if precision < full - params.prune_margin]


async def _precisions(
    explainer: AnchorsExplainer, run: Explaining, rules: list[Rule], n: int, stage: str
) -> list[float]:
    """Precision of each rule on ``n`` fresh perturbations (counted as samples, under ``stage``)."""
    drawn = await draw(explainer.sampler, run.instance, [SampleRequest(rule, n, stage) for rule in rules], run.rng)
    hits = await explainer._label(run, [t for texts, _ in drawn for t in texts], stage)
    return [float(x) for x in hits.reshape(len(rules), n).mean(axis=1)]
