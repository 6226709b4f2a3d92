"""Labelling an explanation's samples: one round of the search's samples drawn, sent and counted, what a
cap that refuses a call part-way leaves (every sample paid for is kept), and a rule's precision on fresh
samples (the anchor's second opinion)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from .._exceptions import BudgetExceeded, ClassifierError, ServerUnavailableError
from .._secrets import redact
from .._sync import in_thread
from ..models.classifier import UNPARSED, Label, Probabilities
from ..query.engine import QueryEngine
from ..samplers.base import Instance, Sampler, draw
from ..samplers.text import TextSampler
from ..samplers.text_instance import TextInstance
from ..search.rules import Rule
from ..search.samples import SampleRequest, Samples
from .explaining import ROUND, Explaining, joined, pieces, split_samples
from .explanation import Opinion
from .perturbing import Fillers
from .progress import Progress

__all__ = ["Labelling"]


class Labelling:
    """How an explainer labels its samples: through ``engine``, drawn by ``sampler``; a cap that refuses a call
    part-way raises (``raise_on_budget``) or ends the search with every sample paid for kept."""

    def __init__(self, engine: QueryEngine, sampler: Sampler, fillers: Fillers, raise_on_budget: bool) -> None:
        self.engine, self.sampler, self.fillers, self.raise_on_budget = engine, sampler, fillers, raise_on_budget

    async def answer(self, run: Explaining, requests: list[SampleRequest]) -> list[Samples]:
        """Draw, label and return the samples one round of the search asked for, at most `ROUND` rendered
        at a time (a draw of millions is refused by the cap before more are rendered). When the cap refuses
        a call part-way (``on_budget="return"``), every sample already answered is returned (each one paid
        for is kept) and the search's next round is refused at once."""
        if run.refused is not None:
            raise run.refused
        got: list[list[Samples]] = [[] for _ in requests]
        for piece in pieces(requests, ROUND):
            drawn = await draw(self.sampler, run.instance, [r for _, r in piece], run.rng)
            batch = [t for texts, _ in drawn for t in texts]
            stages = {r.stage for _, r in piece}
            stage, queries = stages.pop() if len(stages) == 1 else "mixed", run.stats.queries
            kept = None
            try:
                hits, scores = await self.scored(run, batch, stage)
            except BudgetExceeded as exc:
                if self.raise_on_budget:
                    raise
                kept, hits, scores = self.paid(run, batch, stage, queries)
                run.refused, run.budget_exhausted = exc, True
                if not kept.any() and not any(got):
                    raise
            run.texts.extend(batch if kept is None else [t for t, k in zip(batch, kept, strict=True) if k])
            run.hits.extend((hits if kept is None else hits[kept]).tolist())
            for (index, _), samples in zip(piece, split_samples(drawn, hits, scores, kept), strict=True):
                got[index].append(samples)
            if run.refused is not None:
                break
        width = len(run.instance.features)
        return [joined(parts, width) for parts in got]

    def paid(
        self, run: Explaining, texts: list[str], stage: str, queries: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Of ``texts``, whose call the cap refused part-way, those answered all the same (the engine's cache
        holds each call's labels as it ends): which, and their labels and scores as `_scored` gives them."""
        key = self.engine.classifier.identity
        cached = [self.engine.cache.answer(key, t) for t in texts]
        kept = np.array([a is not None for a in cached], dtype=bool)
        answers = [a for a in cached if a is not None]
        hits, scores = self._recorded(run, [t for t, k in zip(texts, kept, strict=True) if k],
                                      [a[0] for a in answers], [a[1] for a in answers], stage, queries)  # fmt: skip
        full_hits = np.zeros(len(texts), dtype=bool)
        full_hits[kept] = hits
        full_scores = None
        if scores is not None:
            full_scores = np.full(len(texts), np.nan)
            full_scores[kept] = scores
        return kept, full_hits, full_scores

    async def scored(self, run: Explaining, texts: list[str], stage: str) -> tuple[np.ndarray, np.ndarray | None]:
        """`_label`, and the probability the model gave each perturbation the input's label (NaN where
        it gave none; None when it gave none at all)."""
        queries = run.stats.queries
        labels, probabilities = await self.engine.answers(texts, run.stats, cap=run.cap)
        return self._recorded(run, texts, labels, probabilities, stage, queries)

    def _recorded(
        self,
        run: Explaining,
        texts: list[str],
        labels: Sequence[Label],
        probabilities: Sequence[Probabilities | None],
        stage: str,
        queries: int,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Count ``texts``' answers as samples of ``stage`` (and the queries paid since ``queries``): whether
        each kept the input's label, and the probability it was given (None when none was)."""
        run.count(stage, len(labels), run.stats.queries - queries)
        run.samples += len(labels)
        run.unparsed += sum(1 for label in labels if label == UNPARSED)
        if run.progress is not None:
            run.progress(self._progress(run))
        hits = np.array([label == run.target for label in labels], dtype=bool)
        if all(p is None for p in probabilities):
            return hits, None
        return hits, np.array([np.nan if p is None else p.get(run.target, 0.0) for p in probabilities])

    @staticmethod
    def _progress(run: Explaining) -> Progress:
        s = run.stats
        elapsed = time.perf_counter() - run.started
        return Progress(run.samples, s.queries, s.cache_hits, s.settled, elapsed)

    async def opinion(self, run: Explaining, sampler: TextSampler, rule: Rule, n: int) -> None:
        """The precision of ``rule`` under ``sampler`` on fresh samples, drawn apart from the search's
        (the anchor is the same with or without it). An opinion that cannot be had leaves the paid
        explanation standing: a model or filler failing past its retries (or halted), or a cap that refuses it
        (``on_budget="return"``), make it missing, with the reason."""
        rng = np.random.default_rng([run.seed, 0x5EC])
        described = sampler.describe(run.instance) if isinstance(run.instance, TextInstance) else sampler.perturbation
        try:
            precision, instance = await self.fresh_precision(run, sampler, rule, n, rng, "second opinion")
        except BudgetExceeded as exc:
            if self.raise_on_budget:
                raise
            run.budget_exhausted = True
            run.opinion = Opinion(sampler.perturbation, described, None, 0, missing=f"the cap refused it: {exc}")
            return
        except (ClassifierError, ServerUnavailableError) as exc:
            run.opinion = Opinion(sampler.perturbation, described, None, 0, missing=redact(str(exc)))
            return
        assert isinstance(instance, TextInstance)
        run.opinion = Opinion.measured(sampler.perturbation, sampler.describe(instance), round(precision * n), n)

    async def fresh_precision(
        self, run: Explaining, sampler: Sampler, rule: Rule, n: int, rng: np.random.Generator, stage: str
    ) -> tuple[float, Instance]:
        """The precision of ``rule`` on ``n`` fresh perturbations under ``sampler``, drawn with ``rng``, labelled
        under ``stage``; and the instance they perturb (prepared for ``sampler``: infill's fills)."""
        instance = await self.fillers.prepared(run.instance, sampler, run.infill, run.cap)
        texts, _ = await in_thread(sampler.sample, instance, rule, n, rng)
        return float((await self.scored(run, texts, stage))[0].mean()), instance
