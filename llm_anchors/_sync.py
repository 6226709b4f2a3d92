"""The sync API's event loop: one per object, in a background thread, kept until `close()`; and
`in_thread`, the search's computations off the event loop in threads nothing waits for.

`asyncio.run` per call would start a new loop each time and leave the
previous loop's connections (aiohttp sessions of the backend and of the
``/tokenize`` counter) open; one long-lived loop reuses them, and works
from code that already runs a loop (Jupyter) as well as from plain code.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ._exceptions import ConfigError

__all__ = ["SyncRunner", "close_when_dropped", "in_thread", "sync_twin"]

T = TypeVar("T")


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread, awaited, for a computation with no side effect outside its
    arguments (a search's step, drawing samples): cancelled, it is left to finish alone, and nothing waits
    for it, neither ``asyncio.run``'s shutdown nor the interpreter's exit (the threads are daemons), so a
    step of seconds on a long input never holds up Ctrl-C. `asyncio.to_thread` is for the rest (files)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def job() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(fn, *args), None)
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting task)
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, future, *outcome)

    _WORKERS.submit(job)
    return await future


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class _DaemonWorkers:
    """Daemon threads taking jobs from one queue, one more started whenever none is idle: an idle one
    waits for the next job (a search asks one a step), so there are at most as many as ran at once."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                threading.Thread(target=self._work, name="llm-anchors-compute", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()


class SyncRunner:
    """Runs coroutines to completion on one event loop living in a daemon thread."""

    def __init__(self, name: str = "llm-anchors-sync") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._loop is not None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runner's loop and return its result (or raise its exception)."""
        loop = self._start()
        if threading.current_thread() is self._thread:
            coro.close()
            raise ConfigError("a sync method was called from inside its own event loop: await the async one")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        """Stop the loop and its thread (a later `run` starts new ones)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):  # its worker threads (the search's steps) end with it
            asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def shutdown(self, cleanup: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``cleanup()`` on the loop, if it was started, then stop it: what `close` of the
        runner's owner does, done by a finalizer when the owner is dropped unclosed."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:  # collected on the loop's own thread: it cannot wait for itself
            loop.create_task(_then_stop(cleanup(), loop))
            return
        try:
            self.run(cleanup())
        except Exception:  # noqa: S110 (a finalizer: nothing to tell)
            pass
        self.close()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop


async def _then_stop(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> None:
    try:
        await coro
    finally:
        with contextlib.suppress(Exception):
            await loop.shutdown_default_executor()
        loop.stop()


def close_when_dropped(owner: object, runner: SyncRunner, cleanup: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """When ``owner`` is garbage collected (or the interpreter exits) without being closed,
    run ``cleanup`` on ``runner``'s loop and stop its thread (``cleanup`` must not hold ``owner``)."""
    weakref.finalize(owner, runner.shutdown, cleanup)


class HasSyncRunner(Protocol):
    _sync: SyncRunner


S = TypeVar("S", bound=HasSyncRunner)
P = ParamSpec("P")


def sync_twin(method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[S, P], T]:
    """The blocking twin of an async method: it runs the method (as overridden by the
    object's class) on the object's `SyncRunner`."""
    name = method.__name__

    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        coro: Coroutine[Any, Any, T] = getattr(self, name)(*args, **kwargs)
        return self._sync.run(coro)

    twin.__name__ = twin.__qualname__ = f"{name}_sync"
    twin.__doc__ = (
        f"`{name}` for code without an event loop (or inside Jupyter's). Every sync call of an "
        "object runs on one event loop of its own, in a background thread, so connections are "
        "reused; `close()` (or ``with ...:``) releases them."
    )
    return twin
