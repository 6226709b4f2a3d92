"""Runs on a `RayPool`: a resumable run into a results file, and a stream of explanations."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from ..explain.anchors import AnchorsExplainer
from ..explain.explanation import Explanation
from ..run.results import ResultsFile
from ..run.resumable import RunReport, Stream, resume
from .pool import RayPool

__all__ = ["explain_distributed", "explain_resumable_on_ray"]


async def explain_resumable_on_ray(
    pool: RayPool,
    texts: Sequence[Any],
    results: ResultsFile,
    *,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
    model: Mapping[str, Any] | None = None,
) -> RunReport:
    """`explain_resumable` over a started `RayPool`: the inputs ``results`` lacks, recorded
    as they finish; the run's ledger caps it (give it ``results.check_journal()`` as its
    journal), its memory is saved every ``save_every`` inputs."""
    config = await pool.config(model=dict(model or {}))
    results.check_inputs(texts)
    results.check_config(config)  # before the memory is touched
    await pool.remember(results)
    pool.recall([(texts[i], explanation) for i, explanation in results.explanations()])  # answers a repeat

    def stream(todo: list[int]) -> Stream:
        return pool.explain_stream((texts[i] for i in todo), errors="yield")

    return await resume(
        results, texts, config, pool.invalid, stream, run_budget=pool.budget, new_entries=lambda: pool.last_stored,
        save=pool.save_memory, save_every=save_every, on_result=on_result,
    )  # fmt: skip


async def explain_distributed(
    texts: Iterable[Any], make_explainer: Callable[[], AnchorsExplainer], *, workers: int = 2, **options: Any
) -> AsyncIterator[Explanation]:
    """Explain ``texts`` on ``workers`` Ray workers, yielding explanations in input
    order; ``options`` are `RayPool`'s (caps, journal, memory_dir, address)."""
    async with RayPool(make_explainer, workers=workers, **options) as pool:
        async for exp in pool.explain_stream(texts):
            yield exp
