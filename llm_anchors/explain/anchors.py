"""`AnchorsExplainer`: drive the search with the query engine."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any, Literal, Self, overload

import numpy as np

from .._checks import check_int
from .._exceptions import BudgetExceeded, ConfigError, NoLabelError
from .._sync import SyncRunner, close_when_dropped, in_thread, sync_twin
from ..models.classifier import UNPARSED, Classifier, as_classifier
from ..models.retry import RetryPolicy
from ..money.budget import SpendCap
from ..query.cache import QueryCache
from ..query.engine import QueryEngine, QueryStats
from ..samplers.base import Instance, Refines, Sampler
from ..samplers.text import Perturbation, TextSampler
from ..samplers.text_instance import TextInstance
from ..search.base import Search, SearchResult
from ..search.beam import BeamSearch
from ..search.certify import Certifier
from ..search.drive import drive
from ..search.params import SearchParams
from ..search.rules import Rule, covers, make_rule
from ..search.samples import SampleRequest, Samples
from .explaining import (
    STRICT_RECHECK,
    Explaining,
    Made,
    Measured,
    asked_again,
    assemble,
    input_seed,
    scope,
)
from .explanation import Explanation, Level
from .labelling import Labelling
from .meta import DRAWN_BY, SecondOpinion, Settings
from .perturbing import Fillers, infills, opinion_sampler
from .progress import Progress, StreamProgress, stream_reporter
from .stream import InputError, in_order

__all__ = ["AnchorsExplainer", "InputError"]


class AnchorsExplainer:
    """Explains a classifier's label for a text with an anchor.

    ``search``: the search's and its certifier's parameters, one `SearchParams`
    (τ, δ, the certificate, the beam, …), recorded whole in ``meta.settings``.
    ``seed`` fixes every random draw (None: fresh entropy, recorded in the
    explanation's meta). ``sampler``: how inputs are split and perturbed
    (default: `TextSampler` with ``perturbation``, "unk" unless told: "delete",
    "similar", "infill"). ``max_concurrency`` bounds model requests in flight;
    ``request_size`` is the most texts per request (default: the search's
    ``batch_size``). ``cache`` may be shared
    between explainers of the same classifier; ``retry`` says how failed
    calls are retried (`RetryPolicy`). ``budget`` caps dollars, tokens and
    queries (`Budget`, which may be shared); when it runs out the
    explanation raises `BudgetExceeded`, or with ``on_budget="return"``
    returns the best rule found so far, with ``meta.budget_exhausted`` set
    and the precision bounds of the samples it has.

    The query cache keeps one answer per text, and the precision bounds
    assume the model gives it every time. A model that does not (a hosted
    LLM at temperature > 0; llama-server, whose log-probabilities move with
    the batch a prompt shares) makes the bounds overstate their confidence.
    ``verify_determinism=k`` (default: `STRICT_RECHECK` with
    ``certify="strict"``, else 0) asks the model again, bypassing the cache,
    about k of the explanation's texts (paid queries, counted): the count
    that changed label is in ``meta.determinism``, and any change warns
    (`NondeterminismWarning`). ``second_opinion`` (`SecondOpinion`): after the
    search, the anchor's precision under another perturbation, on fresh
    samples (paid), in ``data.second_opinion``.

    What an anchor guarantees (``exp.claim`` says it for each): with
    probability ≥ 1 − δ, the anchor returned has precision ≥ τ − epsilon_stop
    (``certify="default"``) or ≥ τ (``"strict"``), however many rules the
    search tested: each rule it chooses to test gets a share of δ and is
    judged only on samples drawn after it was chosen (`Certifier`).

    >>> explainer = AnchorsExplainer(clf, search=SearchParams(threshold=0.9), seed=0)
    >>> exp = await explainer.explain("a good and great movie")
    """

    name = "AnchorsExplainer"

    def __init__(
        self,
        classifier: Classifier,
        *,
        search: SearchParams | None = None,
        seed: int | None = None,
        sampler: Sampler | None = None,
        perturbation: Perturbation | None = None,
        max_concurrency: int = 8,
        request_size: int | None = None,
        cache: QueryCache | None = None,
        retry: RetryPolicy | None = None,
        budget: SpendCap | None = None,
        on_budget: Literal["raise", "return"] = "raise",
        n_examples: int = 5,
        verify_determinism: int | None = None,
        second_opinion: SecondOpinion | None = None,
    ) -> None:
        complete = as_classifier(classifier)
        check_int("seed", seed, minimum=0, optional=True)
        check_int("n_examples", n_examples, minimum=0)
        check_int("verify_determinism", verify_determinism, minimum=0, optional=True)
        self.classifier = classifier
        if search is not None and not isinstance(search, SearchParams):
            raise ConfigError(f"search must be a SearchParams, got {search!r}")
        self.params = search or SearchParams()
        if verify_determinism is None:  # a strict certificate asks the model twice about a few of its texts
            verify_determinism = STRICT_RECHECK if self.params.certify == "strict" else 0
        self.seed = seed
        if sampler is not None and not isinstance(sampler, Sampler):
            raise ConfigError(f"{sampler!r} is not a Sampler (it needs features, sample, sample_present, settings)")
        if sampler is not None and perturbation is not None:
            raise ConfigError("give the perturbation to the sampler (TextSampler(perturbation=...)), not beside it")
        self.sampler: Sampler = sampler or TextSampler(perturbation=perturbation or "unk")
        self.engine = QueryEngine(
            complete,
            cache=cache,
            max_concurrency=max_concurrency,
            request_size=self.params.batch_size if request_size is None else request_size,
            retry=retry,
        )
        if on_budget not in ("raise", "return"):
            raise ConfigError(f"on_budget must be 'raise' or 'return', got {on_budget!r}")
        self._on_budget: Literal["raise", "return"] = on_budget
        self.budget = budget
        """The cap every call of this explainer reserves against (a `Budget`, or a Ray run's ledger); None: none."""
        self.n_examples = n_examples
        self.verify_determinism = verify_determinism
        self.second_opinion = second_opinion
        self._second = opinion_sampler(self.sampler, second_opinion)
        self._fillers = Fillers(classifier, self.engine)
        self._labelling = Labelling(self.engine, self.sampler, self._fillers, self.on_budget == "raise")
        for s in (self.sampler, self._second):
            if infills(s):
                self._fillers.engine_for(s)  # no filler to be had: refused now, before any query
        self._sync = SyncRunner()
        close_when_dropped(self, self._sync, self.engine.classifier.aclose)  # dropped unclosed: no thread left

    async def aclose(self) -> None:
        """Close the classifier's connections, if it holds any (and an infill filler's)."""
        try:
            await self.engine.classifier.aclose()
        finally:
            await self._fillers.aclose()

    def close(self) -> None:
        """`aclose` for code that used the sync methods: also stops their event loop."""
        if self._sync.started:
            self._sync.run(self.aclose())
        self._sync.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def cache(self) -> QueryCache:
        return self.engine.cache

    @property
    def on_budget(self) -> Literal["raise", "return"]:
        """What a cap that refuses a call does: raise `BudgetExceeded`, or return the best rule so far. Fixed
        when the explainer is made (its labelling acts on it from then on)."""
        return self._on_budget

    def settings(self) -> Settings:
        """Every parameter that shapes an explanation, for its meta."""
        budget = self.budget
        return Settings(
            search=self.params,
            sampler=self.sampler.settings(),
            max_concurrency=self.engine.max_concurrency,
            request_size=self.engine.request_size,
            n_examples=self.n_examples,
            verify_determinism=self.verify_determinism,
            budget=repr(budget) if budget is not None else None,
            on_budget=self.on_budget,
            price=self.engine.classifier.price,
            second_opinion=self.second_opinion,
        )

    async def explain(
        self,
        text: Any,
        *,
        seed: int | None = None,
        progress: Callable[[Progress], None] | None = None,
        budget: SpendCap | None = None,
    ) -> Explanation:
        """Find the anchor of ``text``: the words that keep its label.

        ``text`` is whatever the sampler takes: a str (the default
        `TextSampler`), a row (`TabularSampler`), an image (`ImageSampler`).
        ``progress``, if given, is called after every batch of queries.
        ``budget``: a cap for this explanation alone (give it the
        explainer's budget as ``parent`` to hold both).
        """
        run = self._start(text, seed, budget)
        run.progress = progress
        await self._label_target(run)
        result, found = await self._find(run)
        return self._explanation(run, result, **found, **await self._recheck(run, result))

    async def _find(self, run: Explaining) -> tuple[SearchResult, dict[str, Any]]:
        """The anchor of a labelled input, and the meta fields its finding adds (MAnchors' sources)."""
        return await self._levels(run, lambda: self._search(run, None)), {}

    @overload
    def explain_stream(
        self,
        texts: Iterable[Any],
        *,
        concurrent_inputs: int = ...,
        budget_per_input: Callable[[], SpendCap | None] | None = ...,
        errors: Literal["raise"] = ...,
    ) -> AsyncGenerator[Explanation, None]: ...

    @overload
    def explain_stream(
        self,
        texts: Iterable[Any],
        *,
        concurrent_inputs: int = ...,
        budget_per_input: Callable[[], SpendCap | None] | None = ...,
        errors: Literal["yield"],
    ) -> AsyncGenerator[Explanation | InputError, None]: ...

    def explain_stream(
        self,
        texts: Iterable[Any],
        *,
        concurrent_inputs: int = 1,
        budget_per_input: Callable[[], SpendCap | None] | None = None,
        errors: Literal["raise", "yield"] = "raise",
    ) -> AsyncGenerator[Explanation | InputError, None]:
        """Explain a stream, yielding each explanation in input order as soon as
        it and those before it are done.

        ``texts`` may be any iterable, read lazily (a file of millions of
        lines). Inputs start in order, at most ``concurrent_inputs`` at a time
        (the explainer's ``max_concurrency`` bounds the requests they send
        together). For MAnchors an input cannot hit an entry that a
        neighbour still being explained will store, so more than one at a
        time buys wall time with some memory hits, and the memory then
        depends on timing (1, the default, is deterministic).
        ``budget_per_input``: makes each input's own cap (see `explain`).
        ``errors="yield"``: an input that cannot be explained (empty, too
        long: `InvalidInputError`, raised before any query) or whose model
        calls failed past their retries (`ClassifierError`: a 429 storm, a
        server down) yields its error in its place and the stream goes on;
        by default either ends the stream. A setting refused (`ConfigError`)
        always ends it, and so does a cap that refuses an input's first query
        (its label: without it there is no rule to return): `BudgetExceeded`,
        or with ``on_budget="return"`` the stream just ends there, the inputs
        from that one on unexplained.
        Leaving the loop early (``break``, an error, cancellation) cancels
        the inputs still being explained.
        """
        return in_order(self.explain, texts, concurrent_inputs=concurrent_inputs, budget_per_input=budget_per_input,
                        errors=errors, end_when_refused=self.on_budget == "return")  # fmt: skip

    async def explain_many(
        self,
        texts: Sequence[Any],
        *,
        concurrent_inputs: int = 1,
        progress: bool | Callable[[StreamProgress], None] = False,
    ) -> list[Explanation]:
        """Explain a stream; results in input order (`explain_stream`, collected). With
        ``on_budget="return"`` a cap that runs out ends the list early: the inputs it could not
        pay for have no explanation.

        ``progress``: a callback given a `StreamProgress` after each input (in
        input order), or True for a bar on stderr.
        """
        report = stream_reporter(progress, len(texts))
        out: list[Explanation] = []
        async for exp in self.explain_stream(texts, concurrent_inputs=concurrent_inputs):
            out.append(exp)
            if report is not None:
                report(StreamProgress(len(out), len(texts), exp))
        return out

    explain_sync = sync_twin(explain)
    explain_many_sync = sync_twin(explain_many)

    async def estimate_precision(
        self,
        text: Any,
        positions: Sequence[int],
        *,
        coarse: Sequence[int] | None = None,
        perturbation: Perturbation | None = None,
        n: int = 1000,
        seed: int = 2**31 - 1,
    ) -> float:
        """Precision of a rule on ``n`` fresh perturbations drawn with ``seed``. ``positions`` index the
        input's features; coarse to fine, the features under the coarse anchor ``coarse``
        (``exp.data.coarse.positions``): ``exp.data.features``. ``perturbation``: another operator's
        opinion of the rule (a text's: "unk", "delete", "similar", "infill"; default: the explainer's own)."""
        measured = await self.measure_precision(text, positions, coarse=coarse, perturbation=perturbation, n=n,
                                                seed=seed)  # fmt: skip
        return measured.precision

    estimate_precision_sync = sync_twin(estimate_precision)

    async def measure_precision(
        self,
        text: Any,
        positions: Sequence[int],
        *,
        coarse: Sequence[int] | None = None,
        perturbation: Perturbation | None = None,
        n: int = 1000,
        seed: int = 2**31 - 1,
    ) -> Measured:
        """`estimate_precision` with what it rests on: the perturbations labelled, their 95% interval, and
        whether the cap stopped it first (``on_budget="return"``: the precision of those answered, each one
        paid for counted)."""
        check_int("n", n)
        sampler = self.sampler
        if perturbation is not None:
            if not isinstance(sampler, TextSampler):
                raise ConfigError("perturbation= is for text: this explainer's sampler is not a TextSampler")
            sampler = sampler.with_perturbation(perturbation)
        run = self._start(text, seed)
        run.refine_to(self.sampler, coarse, positions)
        await self._label_input(run)
        instance = await self._prepared(run, run.instance, sampler)
        texts, _ = await in_thread(sampler.sample, instance, make_rule(positions), n, run.rng)
        queries = run.stats.queries
        try:
            hits = await self._label(run, texts, "estimate")
        except BudgetExceeded:
            if self.on_budget == "raise":
                raise
            kept, hits, _ = self._labelling.paid(run, texts, "estimate", queries)
            return Measured.of(hits[kept], n, stopped=True)
        return Measured.of(hits, n)

    measure_precision_sync = sync_twin(measure_precision)

    async def estimate_coverage(
        self, text: Any, positions: Sequence[int], *, coarse: Sequence[int] | None = None, n: int = 10_000,
        seed: int = 2**31 - 1,
    ) -> float:  # fmt: skip
        """Coverage of a rule: the share of ``n`` perturbations of the empty rule that keep its features
        (no model query). ``positions`` and ``coarse`` as `estimate_precision`."""
        check_int("n", n)
        run = self._start(text, seed)
        run.refine_to(self.sampler, coarse, positions)
        pool = await in_thread(self.sampler.sample_present, run.instance, frozenset(), n, run.rng)
        return float(covers(make_rule(positions), pool).mean())

    estimate_coverage_sync = sync_twin(estimate_coverage)

    # -- the steps of one explanation, reused by MAnchors -----------------

    def describe(self) -> str:
        """What this explainer runs, as a forecast names what it prices."""
        return "plain Anchors (the beam search)"

    def drawn_by(self) -> dict[str, Any]:
        """The settings that decide an explanation's draws (`DRAWN_BY`: the search's, the claim among them, and the
        sampler's), as plain data: with the input (and the rules the memory proposes for it), what they are
        seeded from (`input_seed`). Not those of what chooses the rules tested, nor of checks after the search."""
        return {k: v for k, v in asdict(self.settings()).items() if k in DRAWN_BY}

    def _start(self, text: object, seed: int | None, budget: SpendCap | None = None) -> Explaining:
        check_int("seed", seed, minimum=0, optional=True)
        instance = self.sampler.features(text)
        if seed is None:
            seed = self.seed
        if seed is None:
            seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        own = input_seed(seed, instance, self.drawn_by())
        rng, stats, infill = np.random.default_rng(own), QueryStats(), QueryStats()
        started = time.perf_counter()
        return Explaining(instance, own, rng, stats, started, Certifier(self.params), infill, run_seed=seed,
                          choice_seed=input_seed(seed, instance),
                          cap=budget if budget is not None else self.budget)  # fmt: skip

    async def _label_target(self, run: Explaining) -> None:
        """Label the input, and make its instance ready to be perturbed (its fills, under ``infill``)."""
        await self._label_input(run)
        run.instance = await self._prepared(run, run.instance)

    async def _label_input(self, run: Explaining) -> None:
        """The label the model gives the input itself (one query); `NoLabelError` when its answer names
        none of the labels: there is no label to explain."""
        (run.target,) = await self.engine.classify([run.instance.query], run.stats, cap=run.cap)
        if run.target == UNPARSED:
            raise NoLabelError(
                "its answer to the input names none of the labels (read as <unparsed>): there is no label to "
                "explain; check the prompt and the labels against what the model answers",
                classifier=self.engine.classifier.identity,
            )

    async def _prepared(self, run: Explaining, instance: Instance, sampler: Sampler | None = None) -> Instance:
        """``instance`` ready to be perturbed by ``sampler`` (the explainer's): its fills, under ``infill``."""
        return await self._fillers.prepared(instance, sampler or self.sampler, run.infill, run.cap)

    async def _search(self, run: Explaining, start: Rule | None) -> SearchResult:
        """Anchors' beam search (from ``start``, MAnchors' VT, when given)."""
        pool = await self._coverage_pool(run)
        n, (context, max_size, rate_per_sample) = len(run.instance.features), scope(run.instance)
        search = BeamSearch(n, pool, self.params, start, run.certifier, context, max_size, rate_per_sample)
        return await self._drive(run, search)

    async def _levels(self, run: Explaining, search: Callable[[], Awaitable[SearchResult]]) -> SearchResult:
        """Run ``search`` on the input and, when the sampler has a finer level under the anchor found (the
        words inside a text's anchor sentences), again on that level, with the same certifier: the finer
        anchor is returned when a non-empty one is certified, else the coarse one (``run.coarse`` records
        the coarse anchor under a finer one). An empty finer anchor says less than the coarse one: its
        words, hidden one by one, leave a few of them in most samples, and a few suffice."""
        coarse = await search()
        if not (isinstance(self.sampler, Refines) and coarse.success) or run.budget_exhausted:
            return coarse
        finer = await in_thread(self.sampler.refine, run.instance, coarse.rule)
        if finer is None:
            return coarse
        try:
            finer = await self._prepared(run, finer)
        except BudgetExceeded:  # the cap refused the finer level's fills: the coarse anchor stands
            if self.on_budget == "raise":
                raise
            run.budget_exhausted = True
            return coarse
        instance, run.instance = run.instance, finer
        fine = await search()
        if not (fine.success and fine.rule):  # none certified, or no word needed once they may stay one by one
            run.instance = instance
            return replace(coarse, tested=run.certifier.chosen)  # δ was shared with the word level's rules too
        positions = tuple(sorted(coarse.rule))
        spans = tuple(instance.spans[p] for p in positions) if isinstance(instance, TextInstance) else ()
        stats, unit = coarse.stats, getattr(instance, "unit", "")
        words = tuple(instance.features[p] for p in positions)
        run.coarse = Level(unit, words, positions, spans, stats.precision, stats.coverage)
        return fine

    async def _coverage_pool(self, run: Explaining) -> np.ndarray:
        """The unlabelled perturbations coverage is measured on (drawn in a worker thread: a long input's
        pool is millions of draws)."""
        n = self.params.coverage_samples
        return await in_thread(self.sampler.sample_present, run.instance, frozenset(), n, run.rng)

    async def _drive(self, run: Explaining, search: Search) -> SearchResult:
        """Run a search to its end, or to the best rule so far when the budget runs out (``on_budget``)."""
        try:
            return await drive(search.run(), lambda requests: self._answer(run, requests))
        except BudgetExceeded:
            if self.on_budget == "raise":
                raise
            run.budget_exhausted = True
            return search.best_so_far()

    async def _recheck(self, run: Explaining, result: SearchResult | None = None) -> dict[str, Any]:
        """After the search: the anchor's second opinion (``run.opinion``), then ask the model again about
        ``verify_determinism`` texts (those the anchor was judged on, when there is one; else any of the
        explanation's); meta fields."""
        if result is not None and self._second is not None and not run.budget_exhausted:
            assert self.second_opinion is not None
            await self._labelling.opinion(run, self._second, result.rule, self.second_opinion.samples)
        if not self.verify_determinism:
            return {}
        recheck = await asked_again(self.engine, run, result, self.verify_determinism)
        return {"determinism": recheck} if recheck is not None else {}

    async def _answer(self, run: Explaining, requests: list[SampleRequest]) -> list[Samples]:
        """One round of the search's samples, drawn and labelled (`Labelling.answer`)."""
        return await self._labelling.answer(run, requests)

    async def _label(self, run: Explaining, texts: list[str], stage: str) -> np.ndarray:
        """Label perturbations (counted as samples, under ``stage``): does each keep the input's label?"""
        return (await self._labelling.scored(run, texts, stage))[0]

    def _explanation(self, run: Explaining, result: SearchResult, **extra: Any) -> Explanation:
        """Assemble the explanation; ``extra`` adds meta fields (MAnchors)."""
        infill = infills(self.sampler) or infills(self._second)
        made = Made(self.name, self.classifier.identity, self.settings(), self.engine.in_flight(), infill)
        return assemble(run, result, made, self.n_examples, self.sampler.describe(run.instance), **extra)
