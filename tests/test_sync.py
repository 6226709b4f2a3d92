import asyncio
import gc
import threading
import warnings
from contextlib import contextmanager

import pytest

from llm_anchors import AnchorsExplainer, ConfigError, LLMClassifier
from llm_anchors._sync import SyncRunner
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from tests.fault_server import FaultServer


def test_one_loop_for_every_call_until_close():
    runner = SyncRunner()

    async def loop_id():
        return id(asyncio.get_running_loop())

    async def fail():
        raise ZeroDivisionError

    first, second = runner.run(loop_id()), runner.run(loop_id())
    assert first == second and runner.started
    with pytest.raises(ZeroDivisionError):
        runner.run(fail())
    runner.close()
    assert not runner.started
    assert runner.run(loop_id()) and runner.started  # a new loop after close
    runner.close()


async def test_sync_calls_work_from_inside_a_running_loop():
    runner = SyncRunner()
    try:
        assert runner.run(asyncio.sleep(0, "ok")) == "ok"
    finally:
        runner.close()


def test_calling_the_sync_api_from_its_own_loop_is_an_error():
    runner = SyncRunner()

    async def nested():
        inner = asyncio.sleep(0)
        with pytest.raises(ConfigError, match="inside its own event loop"):
            runner.run(inner)
        return True

    assert runner.run(nested())
    runner.close()


@contextmanager
def server_in_thread(**kwargs):
    """A FaultServer on its own loop in a thread (the sync API under test owns another loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = FaultServer(**kwargs)
    url = asyncio.run_coroutine_threadsafe(server.start(), loop).result()
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_explain_sync_reuses_its_connections_and_close_releases_them():
    def answer(prompt):
        words = prompt.split("Review: ")[-1].split()
        return "positive" if "good" in words else "negative"

    with server_in_thread(answer=answer) as url:
        backend = OpenAICompatibleBackend(url, "m")
        explainer = AnchorsExplainer(LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"]))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with explainer:
                a = explainer.explain_sync("a good film", seed=0)
                session = backend._transport._session
                b = explainer.explain_sync("a good plot", seed=0)
                assert backend._transport._session is session  # one loop, one session
            assert session.closed and a.data.anchor == b.data.anchor == ("good",)
            del explainer, backend, session
            gc.collect()
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_an_explainer_dropped_without_close_leaves_no_thread_nor_session():
    def answer(prompt):
        return "positive" if "good" in prompt.split("Review: ")[-1].split() else "negative"

    with server_in_thread(answer=answer) as url:
        backend = OpenAICompatibleBackend(url, "m")
        explainer = AnchorsExplainer(LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"]))
        before = set(threading.enumerate())
        explainer.explain_sync("a good film", seed=0)
        session = backend._transport._session
        started = set(threading.enumerate()) - before  # its event loop's thread, and the loop's worker threads
        assert started
        del explainer  # never closed
        gc.collect()
        assert session.closed and backend._transport is None
        # Its loop's thread is gone; the search's steps ran on shared daemon threads (`in_thread`), which
        # wait for the next explainer's and never hold up the interpreter's exit.
        assert not any(t.is_alive() for t in started if t.name != "llm-anchors-compute")
        assert all(t.daemon for t in started if t.is_alive())


def test_a_computation_cancelled_in_its_thread_holds_up_neither_the_loop_s_end_nor_ctrl_c():
    from llm_anchors._sync import in_thread

    release, started = threading.Event(), threading.Event()

    def long_step():
        started.set()
        release.wait()  # a search step that ends when the timer below says
        return "done"

    timer = threading.Timer(10.0, release.set)
    timer.start()

    async def main():
        task = asyncio.ensure_future(in_thread(long_step))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()  # what Ctrl-C does to the explanation awaiting it
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())  # with asyncio.to_thread, this waits for the step: the loop's executor is joined
    assert not release.is_set()  # it returned while the step still ran
    timer.cancel()
    release.set()


async def test_in_thread_gives_the_result_and_the_error_of_its_function():
    from llm_anchors._sync import in_thread

    assert await in_thread(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        await in_thread(lambda: 1 / 0)


@pytest.mark.parametrize("name", ["AnchorsExplainer", "MAnchorsExplainer", "TabularExplainer", "ImageExplainer"])
def test_every_public_coroutine_method_of_an_explainer_has_a_sync_twin(name):
    """The README's rule: each async method has a ``_sync`` twin; an async iterator (``explain_stream``) has none."""
    import inspect

    import llm_anchors

    kind = getattr(llm_anchors, name)
    coroutines = [m for m, f in inspect.getmembers(kind, inspect.iscoroutinefunction) if not m.startswith("_")]
    assert "explain" in coroutines and "estimate_coverage" in coroutines
    missing = [
        m for m in coroutines if m not in ("aclose", "__aenter__", "__aexit__") and not hasattr(kind, f"{m}_sync")
    ]
    assert missing == []
    assert inspect.isasyncgenfunction(kind.explain_stream) or not inspect.iscoroutinefunction(kind.explain_stream)
