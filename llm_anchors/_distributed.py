"""One explanation run spread over Ray workers, with one budget and one memory.

Each worker is a Ray actor running an ordinary explainer, made by the
caller's ``make_explainer``, with its own event loop and connections to the
model servers. Its budget is a view of one ledger actor: every call reserves
its worst case there before it is sent and settles after, exactly as in one
process, so the cap holds for the whole run. A MAnchors worker looks up its
replica of the run's memory (or one memory actor); the entry an explanation
stores is added to the run's memory by the coordinator when it accepts that
explanation, and reaches every replica with that worker's next input, so
each input sees what every worker learnt before it started, and a worker
that dies leaves nothing half added. The coordinator hands each worker one
input at a time and yields explanations in input order. A worker that dies
mid-input is replaced; its input is explained again elsewhere, its settled
spend stays counted and the reservations of its calls in flight are released.

With one worker a run gives exactly the explanations of one process.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from ._budget import Budget, BudgetReport, Charge, Reservation
from ._exceptions import BudgetExceeded, ConfigError
from ._explainer import AnchorsExplainer
from ._explanation import Explanation
from ._manchors import MAnchorsExplainer
from ._memory import MemoryEntry, RuleMemory
from ._resumable import ResultsFile, RunReport, missing_entries, record_stream

__all__ = ["RayRun", "RunStats", "SharedBudget", "SharedMemory", "explain_distributed", "explain_resumable_on_ray"]

RAY_MISSING = "explaining on Ray needs ray: pip install 'llm-anchors[ray]'"


def import_ray() -> ModuleType:
    """Ray, or a `ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


# -- the budget: one ledger actor, a view in each worker -------------------------------------


class Ledger:
    """The run's `Budget`, inside a Ray actor; reservations are recorded with the worker that made them."""

    def __init__(self, caps: dict[str, Any], journal: str | None) -> None:
        self.budget = Budget(**caps, journal=journal)
        self.owners: dict[int, tuple[str, Reservation, str]] = {}  # id: (worker, reservation, token)
        self.released: set[int] = set()
        self.by_token: dict[str, int] = {}
        self.received: dict[str, int] = {}  # settlements and releases each sender's view has sent

    def reserve(self, charge: Charge, owner: str, token: str) -> tuple[int, str, str]:
        """(reservation id, "") or (0, why it was refused); with the cap passed so far.
        ``token`` names the request, so that a caller cancelled before the answer can release it."""
        try:
            reservation = self.budget.reserve(charge)
        except BudgetExceeded as exc:
            return 0, str(exc), self.budget.passed
        self.owners[reservation.id] = (owner, reservation, token)
        self.by_token[token] = reservation.id
        return reservation.id, "", self.budget.passed

    def release_token(self, token: str, sender: str) -> None:
        """Release what ``reserve`` granted a caller that stopped waiting for the answer."""
        self._count(sender)
        if (rid := self.by_token.get(token)) is not None:
            self.release(rid, "")

    def settle(self, rid: int, actual: Charge, sender: str) -> None:
        self._count(sender)
        if rid in self.released:  # its worker was declared dead before this arrived: the call was billed
            self.released.discard(rid)
            self.budget.settle(self.budget._hold(actual, None), actual)  # counted even past the cap
            return
        _, reservation, token = self.owners.pop(rid)
        del self.by_token[token]
        self.budget.settle(reservation, actual)

    def release(self, rid: int, sender: str) -> None:
        self._count(sender)
        if (held := self.owners.pop(rid, None)) is not None:
            del self.by_token[held[2]]
            self.budget.release(held[1])

    def release_owner(self, owner: str) -> int:
        """Release the reservations of a dead worker's calls in flight; how many."""
        lost = [rid for rid, (who, _, _) in self.owners.items() if who == owner]
        for rid in lost:
            self.release(rid, "")
            self.released.add(rid)
        return len(lost)

    def report(self) -> BudgetReport:
        return self.budget.report()

    def _count(self, sender: str) -> None:
        if sender:
            self.received[sender] = self.received.get(sender, 0) + 1

    def received_from(self, sender: str) -> int:
        """How many of a sender's settlements and releases the ledger has applied."""
        return self.received.get(sender, 0)

    def close(self) -> None:
        self.budget.close()


class SharedBudget(Budget):
    """A worker's (or the coordinator's) view of the run's ledger actor.

    `areserve` asks the ledger before a call is sent (the engine awaits it);
    `settle` and `release` are sent without waiting (and counted, applied in
    whatever order they arrive in; `flush` waits until the ledger applied them);
    `settled`, `report` ask the ledger.
    """

    def __init__(self, ledger: Any, owner: str) -> None:
        super().__init__()
        self.ledger, self.owner = ledger, owner
        self._seen_passed = ""
        self._requests = 0
        self._sent = 0  # settlements and releases sent, without waiting
        self._sender = f"{owner}/{id(self)}"

    def __repr__(self) -> str:
        return f"SharedBudget(owner={self.owner!r})"

    async def areserve(self, charge: Charge) -> Reservation:
        token = self._token()
        try:
            rid, refused, self._seen_passed = await self.ledger.reserve.remote(charge, self.owner, token)
        except asyncio.CancelledError:  # the ledger may grant it all the same: let it release it then
            self._sent += 1
            self.ledger.release_token.remote(token, self._sender)
            raise
        return self._reservation(rid, refused, charge)

    def reserve(self, charge: Charge) -> Reservation:
        answer = import_ray().get(self.ledger.reserve.remote(charge, self.owner, self._token()))
        rid, refused, self._seen_passed = answer
        return self._reservation(rid, refused, charge)

    def _token(self) -> str:
        self._requests += 1
        return f"{self.owner}/{id(self)}/{self._requests}"

    def _reservation(self, rid: int, refused: str, charge: Charge) -> Reservation:
        if refused:
            raise BudgetExceeded(refused)
        return Reservation(rid, charge)

    def settle(self, reservation: Reservation, actual: Charge) -> None:
        self._sent += 1
        self.ledger.settle.remote(reservation.id, actual, self._sender)

    def release(self, reservation: Reservation) -> None:
        self._sent += 1
        self.ledger.release.remote(reservation.id, self._sender)

    def flush(self, timeout: float = 60.0) -> None:
        """Return once the ledger has applied every settlement and release sent so far."""
        ray, deadline = import_ray(), time.monotonic() + timeout
        while ray.get(self.ledger.received_from.remote(self._sender)) < self._sent:
            if time.monotonic() > deadline:
                raise ConfigError(f"the run's ledger did not apply {self.owner}'s settlements in {timeout:.0f}s")
            time.sleep(0.002)

    @property
    def passed(self) -> str:
        return self._seen_passed

    @property
    def settled(self) -> Charge:
        return self.report().settled

    @property
    def reserved(self) -> Charge:
        return self.report().reserved

    def report(self) -> BudgetReport:
        report: BudgetReport = import_ray().get(self.ledger.report.remote())
        return report


# -- the memory: one actor and a view of it in each worker, or a replica in each ---------------


def memory_at(dim: int, embedder_id: str, scope: str, directory: str | None) -> RuleMemory:
    """The memory saved in ``directory``, or an empty one."""
    if directory is not None and (Path(directory) / "CURRENT").exists():
        return RuleMemory.load(directory, embedder_id=embedder_id, dim=dim, scope=scope)
    return RuleMemory(dim, embedder_id, scope)


class MemoryHolder:
    """The run's `RuleMemory`, inside a Ray actor (loaded from ``directory`` if saved there)."""

    def __init__(self, dim: int, embedder_id: str, scope: str, directory: str | None) -> None:
        self.memory = memory_at(dim, embedder_id, scope, directory)

    def neighbours(self, vector: np.ndarray, label: Any, k: int) -> list[tuple[MemoryEntry, float]]:
        return self.memory.neighbours(vector, label=label, k=k)

    def anchored(self, keys: set[str], label: Any) -> list[tuple[tuple[str, ...], int]]:
        return self.memory.anchored(keys, label=label)

    def add(self, entries: list[tuple[MemoryEntry, np.ndarray]]) -> int:
        for entry, vector in entries:
            self.memory.add(entry, vector)
        return len(self.memory)

    def size(self) -> int:
        return len(self.memory)

    def entries(self) -> list[MemoryEntry]:
        return self.memory.entries

    def save(self, directory: str) -> None:
        self.memory.save(directory)


Entries = list[tuple[MemoryEntry, np.ndarray]]


class _Deferred(RuleMemory):
    """Additions wait for the coordinator (`take_added`), which adds them for the
    whole run when it accepts the explanation that stored them."""

    _added: Entries

    def add(self, entry: MemoryEntry, vector: np.ndarray) -> None:
        self._added.append((entry, np.asarray(vector, dtype=np.float32)))

    def take_added(self) -> Entries:
        added, self._added = self._added, []
        return added

    def apply(self, entries: Entries) -> None:
        """Add entries the run accepted (a replica's pull); nothing for a view of the actor."""


class SharedMemory(_Deferred):
    """A worker's view of the memory actor: lookups go there."""

    def __init__(self, holder: Any, dim: int, embedder_id: str, scope: str) -> None:  # no local index
        self.holder, self.dim, self.embedder_id, self.scope = holder, dim, embedder_id, scope
        self.entries = []
        self._added = []

    def __len__(self) -> int:
        size: int = import_ray().get(self.holder.size.remote())
        return size

    def neighbours(self, vector: np.ndarray, *, label: Any, k: int) -> list[tuple[MemoryEntry, float]]:
        found: list[tuple[MemoryEntry, float]] = import_ray().get(self.holder.neighbours.remote(vector, label, k))
        return found

    def anchored(self, keys: set[str], *, label: Any) -> list[tuple[tuple[str, ...], int]]:
        found: list[tuple[tuple[str, ...], int]] = import_ray().get(self.holder.anchored.remote(keys, label))
        return found

    def save(self, directory: str | os.PathLike[str]) -> Path:
        import_ray().get(self.holder.save.remote(str(directory)))
        return Path(directory)


class ReplicaMemory(_Deferred):
    """A worker's own copy of the run's memory: lookups are local; the entries the
    run accepted since this worker's last input come with its next input (`apply`)."""

    def __init__(self, dim: int, embedder_id: str, scope: str) -> None:
        super().__init__(dim, embedder_id, scope)
        self._added = []

    def apply(self, entries: Entries) -> None:
        for entry, vector in entries:
            RuleMemory.add(self, entry, vector)


# -- a worker ----------------------------------------------------------------------------------


class Worker:
    """One explainer in a Ray actor: explains one input at a time, on its own event loop."""

    def __init__(self, make_explainer: Callable[[], AnchorsExplainer], owner: str) -> None:
        self.explainer = make_explainer()
        self.owner = owner
        self.view: _Deferred | None = None
        self.max_usd_per_input: Decimal | None = None

    def memory_identity(self) -> tuple[int, str, str] | None:
        """A MAnchors explainer's memory (dims, embedder, model); None for plain Anchors."""
        e = self.explainer
        if not isinstance(e, MAnchorsExplainer):
            return None
        return e.features.dim, e.features.identity, e.classifier.identity

    def attach_budget(self, ledger: Any, max_usd_per_input: Decimal | None = None) -> None:
        """Take the run's ledger as the budget (each input capped at ``max_usd_per_input`` too)."""
        self.explainer.engine.budget = SharedBudget(ledger, self.owner)
        self.max_usd_per_input = max_usd_per_input

    def attach_memory(self, holder: Any) -> None:
        """Use the memory actor ``holder``, or, given None, a replica of the run's memory."""
        identity = self.memory_identity()
        if identity is not None and isinstance(self.explainer, MAnchorsExplainer):
            self.view = SharedMemory(holder, *identity) if holder is not None else ReplicaMemory(*identity)
            self.explainer._memory = self.view

    def pid(self) -> int:
        return os.getpid()

    def embed(self, entries: list[MemoryEntry]) -> np.ndarray:
        """The sentence vectors of entries' inputs (to put back entries a results file recorded)."""
        assert isinstance(self.explainer, MAnchorsExplainer)
        return self.explainer.entry_vectors(entries)

    def cpu_s(self) -> float:
        """CPU seconds this worker's process used so far (all its threads)."""
        return time.process_time()

    def explain(self, text: Any, seed: int | None, accepted: Entries) -> tuple[str, Entries]:
        """The explanation (JSON) and the memory entries it would store, once the
        entries the run ``accepted`` since this worker's last input are in its replica."""
        if self.view is not None:
            self.view.apply(accepted)
        per_input = None
        if self.max_usd_per_input is not None:
            per_input = Budget(max_usd=self.max_usd_per_input, parent=self.explainer.engine.budget)
        try:
            exp = self.explainer.explain_sync(text, seed=seed, budget=per_input)
        finally:  # its settlements (sent without waiting) are in the ledger before the answer is
            if isinstance(budget := self.explainer.engine.budget, SharedBudget):
                budget.flush()
        return exp.to_json(), self.view.take_added() if self.view is not None else []


# -- the coordinator -------------------------------------------------------------------------------


@dataclass
class RunStats:
    """What a distributed run did: explanations accepted, memory hits, workers lost, inputs redone."""

    explained: int = 0
    memory_hits: int = 0
    workers_lost: int = 0
    inputs_redone: int = 0


class RayRun:
    """A pool of Ray workers sharing one budget and one memory.

    >>> async with RayRun(make_explainer, workers=4, max_queries=100_000) as run:
    ...     async for exp in run.explain_stream(texts):
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
    workers on the text RF (benchmarks/README.md).
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
        Budget(max_usd, max_tokens, max_queries)  # bad caps fail here, not in an actor
        self.max_usd_per_input = Budget(max_usd=max_usd_per_input).max_usd
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
        self.stats = RunStats()
        self.budget: SharedBudget | None = None
        self._started_ray = False
        self._ledger: Any = None
        self._holder: Any = None
        self._pool: list[Any] = []
        self._count = 0
        self._owner_of: dict[Any, str] = {}
        self._copy: RuleMemory | None = None  # with replicas: the run's memory, saved from here
        self._log: Entries = []  # with replicas: every entry, in the order accepted
        self._synced: dict[Any, int] = {}  # with replicas: how much of the log each worker has
        self.last_stored: list[MemoryEntry] = []  # the memory entries of the explanation last yielded

    async def __aenter__(self) -> RayRun:
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
        here = _on_this_node(ray)
        self._new_ledger()
        self._pool = [self._new_worker() for _ in range(self.workers)]
        identity: tuple[int, str, str] | None = ray.get(self._pool[0].memory_identity.remote())  # others load meanwhile
        if identity is not None and self.memory == "actor":
            holder = ray.remote(MemoryHolder).options(num_cpus=0, scheduling_strategy=here)
            self._holder = holder.remote(*identity, self.memory_dir)
        elif identity is not None:
            self._copy = memory_at(*identity, self.memory_dir)
            self._log = list(zip(self._copy.entries, self._copy.vectors, strict=True))
        ray.get([call for w in self._pool for call in self._attach(w)])  # all up before any input

    def _attach(self, worker: Any) -> list[Any]:
        """Give ``worker`` the run's ledger and memory."""
        return [
            worker.attach_budget.remote(self._ledger, self.max_usd_per_input),
            worker.attach_memory.remote(self._holder),
        ]

    def _new_ledger(self) -> None:
        ledger = self.ray.remote(Ledger).options(num_cpus=0, scheduling_strategy=_on_this_node(self.ray))
        self._ledger = ledger.remote(self.caps, self.journal)
        self.budget = SharedBudget(self._ledger, "coordinator")

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
        Budget(max_usd, max_tokens, max_queries)
        old = self._ledger
        self.caps = {"max_usd": max_usd, "max_tokens": max_tokens, "max_queries": max_queries}
        self.journal = str(journal) if journal is not None else None
        self._new_ledger()
        await asyncio.gather(*(w.attach_budget.remote(self._ledger, self.max_usd_per_input) for w in self._pool))
        await old.close.remote()
        self.ray.kill(old)

    def _new_worker(self) -> Any:
        name = f"worker-{self._count}"
        self._count += 1
        worker = self.ray.remote(Worker).options(num_cpus=0).remote(self.make_explainer, name)
        self._owner_of[worker] = name
        return worker

    def close(self) -> None:
        """Save the memory (if ``memory_dir``), close the journal, stop the actors (and Ray, if started here)."""
        ray = self.ray
        try:
            self._save()
            if self._ledger is not None:
                ray.get(self._ledger.close.remote())
        finally:
            for actor in [*self._pool, self._ledger, self._holder]:
                if actor is not None:
                    ray.kill(actor)
            self._pool = []
            if self._started_ray:
                ray.shutdown()

    def report(self) -> BudgetReport:
        """The run's ledger: settled, reserved, calls, refusals."""
        if self.budget is None:
            raise ConfigError("the run has not started: use `async with RayRun(...)`")
        return self.budget.report()

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (to watch them, or to kill one in a test)."""
        return [int(pid) for pid in self.ray.get([w.pid.remote() for w in self._pool])]

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

    async def explain_stream(self, texts: Iterable[Any], *, seed: int | None = None) -> AsyncIterator[Explanation]:
        """Explain ``texts`` over the workers, yielding explanations in input order.

        A worker that dies (its process killed, its machine lost) is replaced
        and its input given to the next free worker; an input is never
        yielded twice. Ending early (an input's error, or ``aclose()`` after
        a ``break``, as ``contextlib.aclosing`` does) waits for the inputs in
        flight to end on their workers and drops them, so their spend is in
        the ledger when it returns; cancelling (Ctrl-C) does not wait:
        closing the run stops the workers.
        """
        items = list(texts)
        todo: deque[int] = deque(range(len(items)))
        done: dict[int, tuple[Explanation, list[MemoryEntry]]] = {}
        running: dict[asyncio.Future[Any], tuple[Any, int]] = {}
        idle = list(self._pool)
        following = 0
        try:
            while following < len(items):
                while idle and todo:
                    worker, index = idle.pop(0), todo.popleft()
                    call = worker.explain.remote(items[index], seed, self._pull(worker))
                    future = asyncio.wrap_future(call.future())
                    running[future] = (worker, index)
                if not running:
                    raise ConfigError("every Ray worker died: see the Ray logs (ray status, /tmp/ray/session_latest)")
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for future in finished:
                    worker, index = running.pop(future)
                    try:
                        raw, entries = future.result()
                    except self.ray.exceptions.RayActorError:
                        idle.extend(await self._replace(worker, index, todo))
                        continue
                    done[index] = await self._accept(raw, entries), [entry for entry, _ in entries]
                    idle.append(worker)
                while following in done:
                    exp, self.last_stored = done.pop(following)
                    yield exp
                    following += 1
        except asyncio.CancelledError:  # torn down (Ctrl-C): closing the run stops the workers
            running.clear()
            raise
        finally:
            await self._drain(running)

    async def _drain(self, running: dict[asyncio.Future[Any], tuple[Any, int]]) -> None:
        """Wait for the inputs still on workers when the stream is left early (an error,
        a cap, a ``break``) and drop them, so that their spend is in the ledger."""
        if not running:
            return
        await asyncio.wait(running)
        for future, (worker, _) in running.items():
            if isinstance(future.exception(), self.ray.exceptions.RayActorError):
                await self._ledger.release_owner.remote(self._owner_of.get(worker, ""))

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
        """A worker died: release its calls in flight, give its input back, start another."""
        self.stats.workers_lost += 1
        self.stats.inputs_redone += 1
        todo.appendleft(index)
        await self._ledger.release_owner.remote(self._owner_of.pop(worker))
        self._pool.remove(worker)
        self._synced.pop(worker, None)
        if self.max_replacements <= 0:
            return []
        self.max_replacements -= 1
        fresh = self._new_worker()
        await asyncio.gather(*self._attach(fresh))
        self._pool.append(fresh)
        return [fresh]


def _on_this_node(ray: ModuleType) -> Any:
    """Schedule on the coordinator's machine: the journal and the memory are files here."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


async def explain_resumable_on_ray(
    run: RayRun,
    texts: Sequence[Any],
    results: ResultsFile,
    *,
    save_every: int = 10,
    on_result: Callable[[int, Explanation, RunReport], None] | None = None,
) -> RunReport:
    """`explain_resumable` over a started `RayRun`: the inputs ``results`` lacks, recorded
    as they finish; the run's ledger caps it, its memory is saved every ``save_every`` inputs."""
    todo = results.todo(texts)
    report = RunReport(len(texts), len(results.records))
    await run.remember(results)
    stream = run.explain_stream(texts[i] for i in todo)
    await record_stream(
        stream, texts, todo, results, report, run_budget=run.budget, new_entries=lambda: run.last_stored,
        save=run.save_memory, save_every=save_every, on_result=on_result,
    )  # fmt: skip
    return report


async def explain_distributed(
    texts: Iterable[Any], make_explainer: Callable[[], AnchorsExplainer], *, workers: int = 2, **options: Any
) -> AsyncIterator[Explanation]:
    """Explain ``texts`` on ``workers`` Ray workers, yielding explanations in input
    order; ``options`` are `RayRun`'s (caps, journal, memory_dir, address)."""
    async with RayRun(make_explainer, workers=workers, **options) as run:
        async for exp in run.explain_stream(texts):
            yield exp
