"""One explanation run spread over Ray workers, with one budget and one memory.

Each worker is a Ray actor running an ordinary explainer, made by the
caller's ``make_explainer``, with its own event loop and connections to the
model servers. Its budget is a view of one ledger actor (`distributed.ledger`):
every call reserves its worst case there before it is sent and settles
after, exactly as in one process, so the cap holds for the whole run. A
MAnchors worker looks up its replica of the run's memory, or one memory
actor (`distributed.memory`); the entry an explanation stores is added to the
run's memory by the coordinator when it accepts that explanation, and
reaches every replica with that worker's next input, so each input sees
what every worker learnt before it started, and a worker that dies leaves
nothing half added. The coordinator hands each worker one input at a time
and yields explanations in input order. A worker that dies mid-input is
replaced; its input is explained again elsewhere, its settled spend stays
counted and the calls it had in flight are written off at their worst case.

With one worker a run gives exactly the explanations of one process.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import Any, Literal, overload

from .._exceptions import ConfigError
from ..explain.anchors import AnchorsExplainer, InputError
from ..explain.explanation import Explanation
from ..explain.repeats import as_repeat
from ..memory.store import MemoryEntry, RuleMemory
from ..money.budget import BudgetReport, check_caps
from ..run.memory_dir import check_memory_dir, load_memory, lock_memory
from ..run.results import ResultsFile
from ..run.resumable import missing_entries
from .ledger import Ledger, LedgerView
from .memory import Entries, MemoryHolder, memory_at
from .watchdog import watch_ray
from .worker import Worker

__all__ = ["PoolStats", "RayPool"]

RAY_MISSING = "explaining on Ray needs ray: pip install 'llm-anchors[ray]'"


def import_ray() -> ModuleType:
    """Ray, or a `ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


@dataclass
class PoolStats:
    """What a distributed run did: explanations accepted, memory hits, workers lost, inputs redone."""

    explained: int = 0
    memory_hits: int = 0
    workers_lost: int = 0
    inputs_redone: int = 0


class RayPool:
    """A pool of Ray workers sharing one budget and one memory.

    >>> async with RayPool(make_explainer, workers=4, max_queries=100_000) as pool:
    ...     async for exp in pool.explain_stream(texts):
    ...         ...

    ``make_explainer``: a function of no arguments returning the explainer
    each worker runs (sent to the workers with cloudpickle; it must not
    capture an open connection). Its budget is replaced by the run's:
    ``max_usd``, ``max_tokens``, ``max_queries`` cap the whole run,
    journaled in ``journal`` if given (see `Budget`). ``memory_dir``: a
    MAnchors memory loaded at the start if saved there, saved there at the
    end. ``address``: a Ray cluster (``"auto"``, ``"ray://host:10001"``);
    without, a local Ray runtime is started and stopped with the run.
    ``max_replacements``: workers started in place of dead ones before the
    run goes on with fewer (default: ``workers``). The ledger and the
    memory live on this machine (their files are here).
    ``max_usd_per_input``: each explanation's own cap, within the run's.
    ``memory``: MAnchors' shared memory is a copy in each worker,
    ``"replicas"`` (the default: looked up locally; the entries the run
    accepted since a worker's last input come with its next), or one
    ``"actor"`` (each lookup a call to it; one copy in RAM, for a memory too
    big to hold once per worker). Either way an input sees every entry
    accepted before it started: same hit rate, replicas 1.3× faster with 4
    workers on the text RF (docs/benchmarks.md).
    """

    def __init__(
        self,
        make_explainer: Callable[[], AnchorsExplainer],
        *,
        workers: int = 2,
        max_usd: float | int | str | Decimal | None = None,
        max_tokens: int | None = None,
        max_queries: int | None = None,
        journal: str | os.PathLike[str] | None = None,
        memory_dir: str | os.PathLike[str] | None = None,
        address: str | None = None,
        max_replacements: int | None = None,
        ray_init: dict[str, Any] | None = None,
        max_usd_per_input: float | int | str | Decimal | None = None,
        memory: Literal["actor", "replicas"] = "replicas",
    ) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be an int >= 1, got {workers!r}")
        if memory not in ("actor", "replicas"):
            raise ConfigError(f"memory must be 'actor' or 'replicas', got {memory!r}")
        check_caps(max_usd, max_tokens, max_queries)  # bad caps fail here, not in an actor
        if memory_dir is not None:
            check_memory_dir(memory_dir)  # not discovered at the end, once the run was paid
        self.max_usd_per_input = check_caps(max_usd_per_input)[0]
        self.memory = memory
        self.ray = import_ray()
        self.make_explainer = make_explainer
        self.workers = workers
        self.caps: dict[str, Any] = {"max_usd": max_usd, "max_tokens": max_tokens, "max_queries": max_queries}
        self.journal = str(journal) if journal is not None else None
        self.memory_dir = str(memory_dir) if memory_dir is not None else None
        self.address = address
        self.max_replacements = workers if max_replacements is None else max_replacements
        self.ray_init = ray_init or {}
        self.stats = PoolStats()
        self.budget: LedgerView | None = None
        """The run's cap, seen from here (its ledger's report: what the whole run spent)."""
        self._started_ray = False
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._ledger: Any = None
        self._holder: Any = None
        self._pool: list[Any] = []
        self._memory_lock = lock_memory(memory_dir) if memory_dir is not None else None  # one run a memory
        self._count = 0
        self._owner_of: dict[Any, str] = {}
        self._pid_of: dict[Any, Any] = {}  # each worker's process id, asked when it started
        self._known: dict[str, Explanation] = {}  # explanations made in this run, by their input's text
        self._copy: RuleMemory | None = None  # with replicas: the run's memory, saved from here
        self._log: Entries = []  # with replicas: every entry, in the order accepted
        self._synced: dict[Any, int] = {}  # with replicas: how much of the log each worker has
        self.last_stored: list[MemoryEntry] = []  # the memory entries of the explanation last yielded

    async def __aenter__(self) -> RayPool:
        await asyncio.to_thread(self._start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def _start(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            ray.init(address=self.address, **{**options, **self.ray_init})
            self._started_ray = True
            self._watchdog = watch_ray()
        here = _on_this_node(ray)
        self._new_ledger()
        self._pool = [self._new_worker() for _ in range(self.workers)]
        identity: tuple[int, str, str] | None = ray.get(self._pool[0].memory_identity.remote())  # others load meanwhile
        if identity is not None and self.memory_dir is not None:  # set aside here, before a replica or actor reads it
            dim, embedder, scope = identity
            load = functools.partial(RuleMemory.load, embedder_id=embedder, dim=dim, scope=scope)
            load_memory(load, self.memory_dir, "the results file")
        if identity is not None and self.memory == "actor":
            holder = ray.remote(MemoryHolder).options(num_cpus=0, scheduling_strategy=here)
            self._holder = holder.remote(*identity, self.memory_dir)
        elif identity is not None:
            self._copy = memory_at(*identity, self.memory_dir)
            self._log = list(zip(self._copy.entries, self._copy.vectors, strict=True))
        ray.get([self._attach(w) for w in self._pool])  # all up before any input

    def _attach(self, worker: Any) -> Any:
        """Give ``worker`` the run's ledger and memory."""
        return worker.attach.remote(self._ledger, self.max_usd_per_input, self._holder)

    def _new_ledger(self) -> None:
        ledger = self.ray.remote(Ledger).options(num_cpus=0, scheduling_strategy=_on_this_node(self.ray))
        self._ledger = ledger.remote(self.caps, self.journal)
        self.budget = LedgerView(self._ledger, "coordinator")

    async def set_budget(
        self,
        *,
        max_usd: float | int | str | Decimal | None = None,
        max_tokens: int | None = None,
        max_queries: int | None = None,
        journal: str | os.PathLike[str] | None = None,
    ) -> None:
        """Start a new ledger with these caps for the streams that follow; the workers
        (their models loaded) and the memory are kept."""
        check_caps(max_usd, max_tokens, max_queries)
        old = self._ledger
        self.caps = {"max_usd": max_usd, "max_tokens": max_tokens, "max_queries": max_queries}
        self.journal = str(journal) if journal is not None else None
        self._new_ledger()
        await asyncio.gather(*(self._attach(w) for w in self._pool))
        await old.close.remote()
        self.ray.kill(old)

    def _new_worker(self) -> Any:
        name = f"worker-{self._count}"
        self._count += 1
        worker = self.ray.remote(Worker).options(num_cpus=0).remote(self.make_explainer, name)
        self._owner_of[worker] = name
        self._pid_of[worker] = worker.pid.remote()  # asked now, before it is busy: an actor answers in turn
        return worker

    def close(self) -> None:
        """Stop the workers (a call one still had in flight is written off at its worst case),
        save the memory (if ``memory_dir``), close the journal, stop the ledger and the memory
        (and Ray, if started here)."""
        ray = self.ray
        try:
            for worker in self._pool:
                ray.kill(worker)
            if self._ledger is not None:
                ray.get([self._ledger.write_off.remote(self._owner_of[w]) for w in self._pool])
            self._pool = []
            self._save()
            if self._ledger is not None:
                ray.get(self._ledger.close.remote())
        finally:
            for actor in [*self._pool, self._ledger, self._holder]:
                if actor is not None:
                    ray.kill(actor)
            self._pool = []
            if self._memory_lock is not None:
                self._memory_lock.close()
                self._memory_lock = None
            if self._started_ray:
                ray.shutdown()
            if self._watchdog is not None:
                self._watchdog.communicate(timeout=30)  # its stdin closes: it ends what Ray left behind

    def report(self) -> BudgetReport:
        """The run's ledger: settled, reserved, calls, refusals."""
        if self.budget is None:
            raise ConfigError("the run has not started: use `async with RayPool(...)`")
        return self.budget.report()

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (to watch them, or to kill one in a test), asked of each
        when it started: a worker explaining an input would answer only once it is done."""
        return [int(pid) for pid in self.ray.get([self._pid_of[w] for w in self._pool])]

    async def save_memory(self) -> None:
        """Save the memory to ``memory_dir`` now (atomically), as `close` does at the end."""
        await asyncio.to_thread(self._save)

    def _save(self) -> None:
        if self.memory_dir is not None and self._holder is not None:
            self.ray.get(self._holder.save.remote(self.memory_dir))
        elif self.memory_dir is not None and self._copy is not None:
            self._copy.save(self.memory_dir)

    def worker_cpu_s(self) -> float:
        """CPU seconds the live workers used so far, summed (a benchmark's cost per query)."""
        return float(sum(self.ray.get([w.cpu_s.remote() for w in self._pool])))

    def memory_size(self) -> int:
        """Entries in the run's memory (0 for plain Anchors)."""
        if self._holder is not None:
            return int(self.ray.get(self._holder.size.remote()))
        return len(self._copy) if self._copy is not None else 0

    @overload
    def explain_stream(
        self, texts: Iterable[Any], *, seed: int | None = ..., errors: Literal["raise"] = ...
    ) -> AsyncGenerator[Explanation, None]: ...

    @overload
    def explain_stream(
        self, texts: Iterable[Any], *, seed: int | None = ..., errors: Literal["yield"]
    ) -> AsyncGenerator[Explanation | InputError, None]: ...

    async def explain_stream(
        self, texts: Iterable[Any], *, seed: int | None = None, errors: Literal["raise", "yield"] = "raise"
    ) -> AsyncGenerator[Explanation | InputError, None]:
        """Explain ``texts`` over the workers, yielding explanations in input order.

        A worker that dies (its process killed, its machine lost) is replaced
        and its input given to the next free worker; an input is never
        yielded twice. ``errors``: as `AnchorsExplainer.explain_stream`; an
        error a worker ends with arrives as itself, without Ray's remote
        traceback. Ending early (an input's error, or ``aclose()`` after a
        ``break``, as ``contextlib.aclosing`` does) waits for the inputs in
        flight to end on their workers and drops them, so their spend is in
        the ledger when it returns; cancelling (Ctrl-C) does not wait:
        closing the run stops the workers.
        """
        items = list(texts)
        todo: deque[int] = deque(range(len(items)))
        done: dict[int, tuple[Explanation | InputError, list[MemoryEntry]]] = {}
        running: dict[asyncio.Future[Any], tuple[Any, int]] = {}
        idle = list(self._pool)
        following = 0
        repeats = await self._pool[0].answers_repeats.remote() if self._pool else False
        first: dict[str, int] = {}  # an input's text, and the index of its first occurrence being explained
        waiting: dict[int, list[int]] = {}  # the repeats of an input still on a worker
        try:
            while following < len(items):
                while idle and todo:
                    index = todo.popleft()
                    if repeats:
                        known = self._repeat(items[index], index, first, waiting)
                        if isinstance(known, Explanation):
                            done[index] = (known, [])
                        if known is not None:
                            continue  # answered now, or when its first occurrence is
                    worker = idle.pop(0)
                    call = worker.explain.remote(items[index], seed, self._pull(worker))
                    future = asyncio.wrap_future(call.future())
                    running[future] = (worker, index)
                if not running and following not in done:
                    raise ConfigError("every Ray worker died: see the Ray logs (ray status, /tmp/ray/session_latest)")
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED) if running else ((), ())
                for future in finished:
                    worker, index = running.pop(future)
                    try:
                        raw, entries, error = future.result()
                    except self.ray.exceptions.RayActorError:
                        idle.extend(await self._replace(worker, index, todo))
                        continue
                    idle.append(worker)
                    if error is not None and not (errors == "yield" and isinstance(error, InputError)):
                        raise error
                    item = error if error is not None else await self._accept(raw, entries)
                    done[index] = (item, [entry for entry, _ in entries])
                    kept = item if isinstance(item, Explanation) and not item.meta.budget_exhausted else None
                    if repeats and kept is not None:
                        self._known[_said(items[index])] = kept
                    first.pop(_said(items[index]), None)
                    for repeat in waiting.pop(index, []):  # its repeats: its explanation, or asked themselves
                        if kept is not None:
                            done[repeat] = (as_repeat(kept, 0.0), [])
                        else:
                            todo.appendleft(repeat)
                while following in done:
                    item, self.last_stored = done.pop(following)
                    yield item
                    following += 1
        except asyncio.CancelledError:  # torn down (Ctrl-C): closing the run stops the workers
            running.clear()
            raise
        finally:
            await self._drain(running)

    def _repeat(
        self, text: Any, index: int, first: dict[str, int], waiting: dict[int, list[int]]
    ) -> Explanation | bool | None:
        """An exact repeat's explanation when its text was explained before (in this run, or recalled
        from its results file); True when its text is being explained now (it waits for it: `waiting`);
        None when it is to be explained (the first of its text, noted in `first`)."""
        said = _said(text)
        if (known := self._known.get(said)) is not None:
            return as_repeat(known, 0.0)
        if first.setdefault(said, index) != index:
            waiting.setdefault(first[said], []).append(index)
            return True
        return None

    def recall(self, explained: Sequence[tuple[Any, Explanation]]) -> None:
        """Remember explanations made before (a resumed run's texts and explanations): an exact repeat of
        one is answered with it, at no query, when the workers answer repeats (MAnchors' memory on)."""
        for text, explanation in explained:
            if not explanation.meta.budget_exhausted:
                self._known[_said(text)] = explanation

    async def config(self, **more: Any) -> dict[str, Any]:
        """The run configuration of the workers' explainer (see `run_config`)."""
        config: dict[str, Any] = await self._pool[0].config.remote(more)
        return config

    async def invalid(self, texts: Sequence[Any]) -> list[str]:
        """Why each text cannot be explained by the workers' explainer ("" when it can)."""
        reasons: list[str] = await self._pool[0].invalid.remote(list(texts))
        return reasons

    async def _drain(self, running: dict[asyncio.Future[Any], tuple[Any, int]]) -> None:
        """Wait for the inputs still on workers when the stream is left early (an error,
        a cap, a ``break``) and drop them, so that their spend is in the ledger."""
        if not running:
            return
        await asyncio.wait(running)
        for future, (worker, _) in running.items():
            if isinstance(future.exception(), self.ray.exceptions.RayActorError):
                await self._ledger.write_off.remote(self._owner_of.get(worker, ""))

    async def _store(self, entries: Entries) -> None:
        """Add entries to the run's memory (the actor, or the coordinator's copy and log)."""
        if entries and self._holder is not None:
            await self._holder.add.remote(entries)
        elif entries and self._copy is not None:
            for entry, vector in entries:
                self._copy.add(entry, vector)
            self._log.extend(entries)

    async def remember(self, results: ResultsFile) -> int:
        """Put back the memory entries ``results`` recorded after the memory's last
        save (a run killed between saves); how many."""
        if self._holder is not None:
            known: list[MemoryEntry] = await self._holder.entries.remote()
        elif self._copy is not None:
            known = self._copy.entries
        else:
            return 0
        if not (missing := missing_entries(results, known)):
            return 0
        vectors = await self._pool[0].embed.remote(missing)
        await self._store(list(zip(missing, vectors, strict=True)))
        return len(missing)

    def _pull(self, worker: Any) -> Entries:
        """The entries the run accepted since ``worker``'s last input (none but with replicas)."""
        start, self._synced[worker] = self._synced.get(worker, 0), len(self._log)
        return self._log[start:]

    async def _accept(self, raw: str, entries: Entries) -> Explanation:
        await self._store(entries)
        exp = Explanation.from_json(raw)
        self.stats.explained += 1
        self.stats.memory_hits += bool(exp.meta.memory_hit)
        return exp

    async def _replace(self, worker: Any, index: int, todo: deque[int]) -> list[Any]:
        """A worker died: release its calls in flight, give its input back, start another
        (and another, while replacements last, if that one dies while starting)."""
        self.stats.inputs_redone += 1
        todo.appendleft(index)
        await self._retire(worker)
        while self.max_replacements > 0:
            self.max_replacements -= 1
            fresh = self._new_worker()
            try:
                await self._attach(fresh)
            except self.ray.exceptions.RayActorError:  # killed, or its explainer failed, while starting
                await self._retire(fresh)
                continue
            self._pool.append(fresh)
            return [fresh]
        return []

    async def _retire(self, worker: Any) -> None:
        """Count ``worker`` lost, write off its calls in flight and forget it."""
        self.stats.workers_lost += 1
        await self._ledger.write_off.remote(self._owner_of.pop(worker))
        self._pid_of.pop(worker, None)
        if worker in self._pool:
            self._pool.remove(worker)
        self._synced.pop(worker, None)


def _on_this_node(ray: ModuleType) -> Any:
    """Schedule on the coordinator's machine: the journal and the memory are files here."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def _said(text: Any) -> str:
    """An input as its exact repeats share it: the text, or a row or mapping as sorted JSON."""
    return text if isinstance(text, str) else json.dumps(text, sort_keys=True, default=str)
