"""The sync API's event loop: one per object, in a background thread, kept until `close()`.

`asyncio.run` per call would start a new loop each time and leave the
previous loop's connections (aiohttp sessions of the backend and of the
``/tokenize`` counter) open; one long-lived loop reuses them, and works
from code that already runs a loop (Jupyter) as well as from plain code.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ._exceptions import ConfigError

__all__ = ["SyncRunner"]

T = TypeVar("T")


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
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop
