"""The async query engine: dedupe, cache, chunk and send concurrently."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from .._checks import check_int
from .._exceptions import (
    BackendError,
    BackendTimeoutError,
    BudgetExceeded,
    ClassifierError,
    RateLimitError,
    ServerUnavailableError,
    UnreachableError,
)
from ..models.classifier import Batch, Classifier, Label, Probabilities, as_classifier, require_stable_identity
from ..models.retry import RetryPolicy, is_retryable
from ..money.budget import Reservation, SpendCap
from ..money.charge import Charge, disputed, implausible
from .cache import QueryCache
from .limiter import Limiter

R = TypeVar("R")

__all__ = ["QueryEngine", "QueryStats"]


@dataclass
class QueryStats:
    """What one explanation's queries came to, accumulated as its calls end.

    ``queries``: texts sent to the model (a text counts once, however many
    times it is resent); ``cache_hits``: texts answered from the cache or
    by a request already in flight; ``retries``: failed calls sent again;
    ``reserved``: the worst cases held against the budget before each call
    (only with a budget); ``settled``: what the calls cost (a billed retry
    included; a call whose reported usage could not be true, at its worst
    case: ``disputed``).
    """

    queries: int = 0
    cache_hits: int = 0
    retries: int = 0
    reserved: Charge = field(default_factory=Charge)
    settled: Charge = field(default_factory=Charge)
    failures: dict[str, int] = field(default_factory=dict)
    """Failed calls by reason ("HTTP 429", "HTTP 503", "timeout", or the error's type)."""
    disputed: dict[str, int] = field(default_factory=dict)
    """Calls whose reported usage could not be true, by reason: each counted at the larger of its worst
    case and its bill."""
    dearest_tier: int = 0
    """Calls billed at the dearest service tier: their server named none the price knows."""


class _Abandoned(Exception):
    """The request carrying a text was cancelled before its answer came: ask again."""


class _TooDear(Exception):
    """The cap refused a call's worst case (nothing was sent): a smaller call may fit."""

    def __init__(self, error: BudgetExceeded) -> None:
        super().__init__(str(error))
        self.error = error


def _reason(exc: Exception) -> str:
    """Why a call failed, for `QueryStats.failures`."""
    if isinstance(exc, BackendTimeoutError):
        return "timeout"
    if isinstance(exc, UnreachableError):
        return "unreachable"
    if isinstance(exc, BackendError) and exc.status is not None:
        return f"HTTP {exc.status}"
    return type(exc).__name__


def _load(exc: BaseException) -> str:
    """What a failed call says of the server's load, for the limiter: "overload" (it did not answer in
    time, refused for load, dropped the connection), else "other" (a refusal of the request itself)."""
    if isinstance(exc, BackendTimeoutError | RateLimitError | UnreachableError):
        return "overload"
    if isinstance(exc, BackendError) and exc.status is not None and exc.status >= 500:
        return "overload"
    return "other"


def _outcome(future: asyncio.Future[Label]) -> BaseException | None:
    return future.exception() if future.done() and not future.cancelled() else None


def _given(batch: Batch) -> list[Probabilities | None]:
    """A batch's probabilities, one per label (None each where it gave none, or not one per label)."""
    given = batch.probabilities
    return list(given) if given is not None and len(given) == len(batch.labels) else [None] * len(batch.labels)


class QueryEngine:
    """Labels texts through a classifier, never asking for one text twice.

    Texts not yet cached are sent at most ``request_size`` at a time (fewer
    when the classifier's ``max_request_size`` says so), one request per call.
    How many texts are in flight at once, across every explanation that
    shares this engine, follows the server (`Limiter`: it grows while answers
    come back at a steady latency, shrinks at once on timeouts, 429s, 5xx and
    rising latency), never past ``max_concurrency`` requests of the most
    texts a request takes; a call carries at most half of it, so a slow
    server gets smaller requests. A text already in flight for another
    explanation is awaited, not sent again. When a chunk fails the others
    still finish and are cached before the error is raised, so a retry pays
    only for what was lost.
    """

    def __init__(
        self,
        classifier: Classifier,
        *,
        cache: QueryCache | None = None,
        max_concurrency: int = 8,
        request_size: int = 100,
        retry: RetryPolicy | None = None,
    ) -> None:
        check_int("max_concurrency", max_concurrency)
        check_int("request_size", request_size)
        self.classifier = as_classifier(classifier)
        self.cache = cache if cache is not None else QueryCache()
        if self.cache.path is not None:
            require_stable_identity(classifier, f"the persisted query cache {self.cache.path}")
        self.max_concurrency = max_concurrency
        self.request_size = request_size
        self.retry = retry or RetryPolicy()
        self.limiter = Limiter(max_concurrency * self._call_size, initial=2 * self._call_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inflight: dict[str, asyncio.Future[Label]] = {}
        self.billed_calls = 0
        """Calls of this engine (each attempt, for any explanation) that may have been billed: answered,
        timed out, cut short; not those refused or that never left."""
        self.failed_in_a_row = 0
        """Calls ended on the server's faults since the last that was answered (`RetryPolicy.halt_after`)."""
        self.halted: ServerUnavailableError | None = None
        """Why this engine sends nothing more (None: it sends): its server failed too many calls in a row.
        `reopen` lets it send again."""

    async def classify(self, texts: Sequence[str], stats: QueryStats, *, cap: SpendCap | None) -> list[Label]:
        """The label of every text, in order (see `answers`)."""
        return (await self.answers(texts, stats, cap=cap))[0]

    async def answers(
        self, texts: Sequence[str], stats: QueryStats, *, cap: SpendCap | None
    ) -> tuple[list[Label], list[Probabilities | None]]:
        """The label of every text, in order, and the probabilities the classifier gave the labels
        (None where it gives none).

        A text already in flight for another explanation is awaited, not
        sent again; if that explanation is cancelled before its answer
        came, the text is asked again here.
        """
        self._bind_loop()
        if not self.cache.enabled:
            return await self._uncached(texts, stats, cap)
        key = self.classifier.identity
        pending: dict[str, asyncio.Future[Label]] = {}
        known: dict[str, tuple[Label, Probabilities | None]] = {}  # read now: a bounded cache may drop them
        to_send: list[str] = []
        waited: set[str] = set()  # in flight for another explanation
        for text in texts:
            if text in pending or text in known:
                stats.cache_hits += 1
                continue
            answer = self.cache.answer(key, text)
            if answer is not None:
                stats.cache_hits += 1
                known[text] = answer
            elif text in self._inflight:
                stats.cache_hits += 1
                pending[text] = self._inflight[text]
                waited.add(text)
            else:
                future: asyncio.Future[Label] = asyncio.get_running_loop().create_future()
                self._inflight[text] = pending[text] = future
                to_send.append(text)
        # Shielded: cancelling this explanation must not cancel an answer another one awaits.
        waiting = [asyncio.shield(f) for text, f in pending.items() if text in waited]
        sent, *awaited = await asyncio.gather(self._send_all(to_send, stats, cap), *waiting, return_exceptions=True)
        for outcome in [*(sent if isinstance(sent, list) else [sent]), *awaited]:  # each call's error, then theirs
            if isinstance(outcome, BaseException) and not isinstance(outcome, _Abandoned):
                raise outcome
        again = [t for t in waited if isinstance(_outcome(pending[t]), _Abandoned)]
        if again:  # their sender was cancelled: ask them ourselves
            stats.cache_hits -= len(again)
            labels, probabilities = await self.answers(again, stats, cap=cap)
            known.update(zip(again, zip(labels, probabilities, strict=True), strict=True))
        for text, future in pending.items():
            if text not in known:
                cached = self.cache.answer(key, text)  # its sender cached the probabilities first
                known[text] = future.result(), cached[1] if cached is not None else None
        return [known[text][0] for text in texts], [known[text][1] for text in texts]

    def in_flight(self) -> tuple[int, int]:
        """The texts in flight the limiter allows now, and the most a request carries at that limit."""
        return int(self.limiter.limit), self.limiter.size(self._call_size)

    async def recheck(self, texts: Sequence[str], stats: QueryStats, *, cap: SpendCap | None) -> list[Label]:
        """Ask the model about ``texts`` again, whatever the cache holds (paid, counted as queries)."""
        self._bind_loop()
        return (await self._uncached(texts, stats, cap))[0]

    async def _uncached(
        self, texts: Sequence[str], stats: QueryStats, cap: SpendCap | None
    ) -> tuple[list[Label], list[Probabilities | None]]:
        """Every text sent, duplicates included: what a run without a cache pays."""

        async def send(chunk: list[str]) -> Batch:
            try:
                return await self._call(chunk, stats, cap)
            finally:
                await self.limiter.release(len(chunk))

        # Every call ends before this returns or raises: none goes on spending after its explanation ended.
        outcomes = await self._spread(list(texts), send)
        labels: list[Label] = []
        probabilities: list[Probabilities | None] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            labels.extend(outcome.labels)
            probabilities.extend(_given(outcome))
        return labels, probabilities

    async def _send_all(self, texts: list[str], stats: QueryStats, cap: SpendCap | None) -> list[BaseException | None]:
        """Send ``texts`` in calls sized and spaced by the limiter; each call's error (None: it went
        well). The texts never sent (this was cancelled first) end their in-flight futures."""
        chunks: list[list[str]] = []

        async def send(chunk: list[str]) -> None:
            await self._send(chunk, stats, cap)

        try:
            return [o if isinstance(o, BaseException) else None for o in await self._spread(texts, send, chunks)]
        except BaseException as exc:
            sent = sum(len(c) for c in chunks)
            self._fail(texts[sent:], exc)
            raise

    async def _spread(
        self, texts: list[str], send: Callable[[list[str]], Awaitable[R]], chunks: list[list[str]] | None = None
    ) -> list[R | BaseException]:
        """Each next call of ``texts`` as large as the limiter allows, sent once its texts fit the limit
        (``send`` releases them); every call's result or error, in order. ``chunks``: the calls begun."""
        chunks = chunks if chunks is not None else []
        tasks: list[asyncio.Future[R]] = []
        start = 0
        try:
            while start < len(texts):
                chunk = texts[start : start + self.limiter.size(self._call_size)]
                await self.limiter.acquire(len(chunk))
                chunks.append(chunk)
                start += len(chunk)
                tasks.append(asyncio.ensure_future(send(chunk)))
            return list(await asyncio.gather(*tasks, return_exceptions=True))
        except BaseException:  # cancelled: the calls begun are cancelled too, and end before this does
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    @property
    def _call_size(self) -> int:
        """Texts per call: ``request_size``, or less when one request of the
        classifier's backend takes fewer (so a retry resends one request)."""
        limit = self.classifier.max_request_size
        return min(self.request_size, limit) if isinstance(limit, int) and limit > 0 else self.request_size

    async def _send(self, chunk: list[str], stats: QueryStats, cap: SpendCap | None) -> None:
        """Send one chunk (its texts hold the limiter's room until it ends) and resolve its in-flight
        futures, whatever happens (even cancellation)."""
        try:
            try:
                batch = await self._call(chunk, stats, cap)
            finally:
                await self.limiter.release(len(chunk))
            labels = batch.labels
            if len(labels) != len(chunk):
                raise ClassifierError(
                    f"returned {len(labels)} labels for {len(chunk)} texts", classifier=self.classifier.identity
                )
        except BaseException as exc:
            self._fail(chunk, exc)
            raise
        self.cache.put_many(self.classifier.identity, zip(chunk, labels, strict=True), _given(batch))
        for text, label in zip(chunk, labels, strict=True):
            self._inflight.pop(text).set_result(label)
        if cap is not None and cap.passed:  # labels kept; the explanation ends here
            raise BudgetExceeded(f"{cap.passed}: the classifier billed more than it quoted")

    async def _call(self, chunk: list[str], stats: QueryStats, cap: SpendCap | None) -> Batch:
        """One call, retried on 429, 5xx, timeouts and dropped connections. A call whose worst case the
        cap cannot hold however the calls in flight settle is sent as two smaller ones (near the cap
        a request of one text may fit where one of eight does not); one text that cannot fit is refused."""
        try:
            return await self._retried(chunk, stats, cap)
        except _TooDear as refused:
            if len(chunk) == 1:
                raise refused.error from None
        half = len(chunk) // 2
        first = await self._call(chunk[:half], stats, cap)
        second = await self._call(chunk[half:], stats, cap)
        probabilities = (
            None if first.probabilities is None and second.probabilities is None else _given(first) + _given(second)
        )
        return Batch(
            first.labels + second.labels,
            first.charge + second.charge,
            first.disputed or second.disputed,
            probabilities=probabilities,
        )

    def reopen(self) -> None:
        """Send again after `halted` (the server answers again)."""
        self.halted, self.failed_in_a_row = None, 0

    async def _retried(self, chunk: list[str], stats: QueryStats, cap: SpendCap | None) -> Batch:
        """One call under the retry policy's deadline; the `halt_after`-th call in a row to fail on the
        server's faults halts the engine (`ServerUnavailableError`), and a halted engine sends nothing."""
        if self.halted is not None:
            raise self.halted
        counted: list[bool] = []  # the call's texts counted as queries (by its first attempt that reached the model)
        try:
            batch = await self.retry.call(
                lambda number, deadline: self._paid_call(chunk, stats, cap, number > 1, deadline, counted)
            )
        except Exception as exc:
            if is_retryable(exc):
                self.failed_in_a_row += 1
                if self.failed_in_a_row >= self.retry.halt_after and self.halted is None:
                    self.halted = ServerUnavailableError(
                        f"the model's server failed {self.failed_in_a_row} calls in a row (the last: {exc}); "
                        "nothing more is sent: the same command goes on once it answers"
                    )
                if self.halted is not None:
                    raise self.halted from exc
            raise
        self.failed_in_a_row = 0
        return batch

    async def _paid_call(
        self,
        chunk: list[str],
        stats: QueryStats,
        cap: SpendCap | None,
        retry: bool,
        deadline: float,
        counted: list[bool],
    ) -> Batch:
        """Reserve the worst case, call, settle with what the call cost.

        Without a budget nothing is reserved, so counting tokens stays off the
        critical path. ``queries`` counts a text once when first sent; a
        resend is a retry.
        """
        worst = reservation = None
        budget = cap
        if budget is not None:
            worst = await self._quote(chunk)
            try:
                reservation = await budget.reserve(worst, wait=True)  # what calls in flight hold: wait for it
            except BudgetExceeded as exc:
                raise _TooDear(exc) from None
            stats.reserved += worst
        if retry:
            stats.retries += 1
        sent = time.monotonic()
        try:
            batch = await self._answered_by(chunk, deadline)
        except BaseException as exc:
            self.limiter.observe(len(chunk), time.monotonic() - sent, _load(exc))
            if isinstance(exc, Exception):
                reason = _reason(exc)
                stats.failures[reason] = stats.failures.get(reason, 0) + 1
            # A refusal (429, 5xx, 4xx) or a request that never left (no connection, a step before it failed)
            # is not billed; a timeout, a dropped connection or a garbled answer may have been: its worst case.
            billed = not isinstance(exc, BackendError) or exc.billable
            if billed:
                self._count(chunk, stats, counted)
                self.billed_calls += 1
                if worst is None and isinstance(exc, Exception):
                    with contextlib.suppress(Exception):
                        worst = await self._quote(chunk)
                self._settle(reservation, worst or Charge(queries=len(chunk)), stats, cap)
            elif reservation is not None and budget is not None:
                budget.release(reservation)
            raise
        self.limiter.observe(len(chunk), time.monotonic() - sent, "ok")
        self._count(chunk, stats, counted)
        self.billed_calls += 1
        charge = replace(batch.charge, queries=len(chunk))
        stats.dearest_tier += batch.dearest_tier
        if why := batch.disputed or implausible(charge, worst):
            stats.disputed[why] = stats.disputed.get(why, 0) + 1
            if worst is None:  # no budget: nothing reserved, so a quote now (or the queries alone)
                worst = Charge(queries=len(chunk))
                with contextlib.suppress(Exception):
                    worst = await self._quote(chunk)
            charge = disputed(worst, charge)
        self._settle(reservation, charge, stats, cap)
        return batch

    @staticmethod
    def _count(chunk: list[str], stats: QueryStats, counted: list[bool]) -> None:
        """Count a call's texts as queries once: when an attempt of it first reached the model."""
        if not counted:
            stats.queries += len(chunk)
            counted.append(True)

    async def _answered_by(self, chunk: list[str], deadline: float) -> Batch:
        """The classifier's answer to ``chunk``, cut at ``deadline`` (the loop's time: `RetryPolicy.call`)."""
        try:
            async with asyncio.timeout_at(deadline) as limit:
                return await self.classifier.classify(chunk)
        except TimeoutError:
            if not limit.expired():
                raise
            raise BackendTimeoutError(
                f"no answer within the call's deadline ({self.retry.max_elapsed:g} s: RetryPolicy.max_elapsed, "
                "--max-elapsed)",
                classifier=self.classifier.identity,
            ) from None

    async def _quote(self, chunk: list[str]) -> Charge:
        return await self.classifier.quote(chunk)

    def _settle(self, reservation: Reservation | None, actual: Charge, stats: QueryStats, cap: SpendCap | None) -> None:
        if reservation is not None and cap is not None:
            cap.settle(reservation, actual)
        stats.settled += actual

    def _fail(self, chunk: list[str], exc: BaseException) -> None:
        """End the chunk's in-flight futures: with its error, or, when its sender was
        cancelled, with `_Abandoned` so that other explanations awaiting them ask again."""
        error = exc if isinstance(exc, Exception) else _Abandoned()
        for text in chunk:
            future = self._inflight.pop(text, None)
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: waiters re-raise it themselves

    def _bind_loop(self) -> None:
        # asyncio primitives belong to one event loop; a sync wrapper may
        # drive this engine from a fresh loop each call.
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._inflight = {}
