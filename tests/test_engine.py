import asyncio

import pytest

from llm_anchors import ClassifierError, ConfigError, FunctionClassifier, QueryCache
from llm_anchors.query import QueryEngine, QueryStats


class Recorder:
    def __init__(self, delay=0.0, fail_on=None):
        self.calls: list[list[str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = delay
        self.fail_on = fail_on

    async def __call__(self, texts):
        self.calls.append(list(texts))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if self.fail_on and any(self.fail_on in t for t in texts):
                raise RuntimeError("boom")
            return [t.upper() for t in texts]
        finally:
            self.in_flight -= 1


async def test_duplicates_in_a_batch_are_sent_once():
    rec = Recorder()
    engine = QueryEngine(FunctionClassifier(rec))
    stats = QueryStats()
    assert await engine.classify(["a", "b", "a", "a"], stats, cap=None) == ["A", "B", "A", "A"]
    assert sorted(t for call in rec.calls for t in call) == ["a", "b"]
    assert (stats.queries, stats.cache_hits) == (2, 2)


async def test_cache_across_calls_and_engines():
    rec = Recorder()
    cache = QueryCache()
    first = QueryEngine(FunctionClassifier(rec, name="r"), cache=cache)
    second = QueryEngine(FunctionClassifier(rec, name="r"), cache=cache)
    await first.classify(["a", "b"], QueryStats(), cap=None)
    stats = QueryStats()
    assert await second.classify(["b", "c"], stats, cap=None) == ["B", "C"]
    assert (stats.queries, stats.cache_hits) == (1, 1)
    # Another classifier identity never sees these labels.
    other = QueryEngine(FunctionClassifier(rec, name="other"), cache=cache)
    stats = QueryStats()
    await other.classify(["a"], stats, cap=None)
    assert stats.queries == 1


async def test_text_in_flight_is_awaited_not_resent():
    rec = Recorder(delay=0.05)
    engine = QueryEngine(FunctionClassifier(rec))
    s1, s2 = QueryStats(), QueryStats()
    r1, r2 = await asyncio.gather(engine.classify(["x", "y"], s1, cap=None), engine.classify(["y", "z"], s2, cap=None))
    assert (r1, r2) == (["X", "Y"], ["Y", "Z"])
    assert sum(len(c) for c in rec.calls) == 3
    assert s1.queries + s2.queries == 3 and s1.cache_hits + s2.cache_hits == 1


async def test_chunks_and_concurrency_bound():
    rec = Recorder(delay=0.02)
    engine = QueryEngine(FunctionClassifier(rec), max_concurrency=3, request_size=10)
    texts = [f"t{i}" for i in range(95)]
    assert await engine.classify(texts, QueryStats(), cap=None) == [t.upper() for t in texts]
    assert sum(len(c) for c in rec.calls) == 95 and max(len(c) for c in rec.calls) <= 10
    assert 1 <= rec.max_in_flight <= 3  # the limiter's; never past max_concurrency requests


async def test_failed_chunk_loses_nothing_else():
    rec = Recorder(fail_on="bad")
    engine = QueryEngine(FunctionClassifier(rec, name="flaky"), request_size=2)
    with pytest.raises(ClassifierError, match="flaky"):
        await engine.classify(["a", "b", "bad", "c", "d", "e"], QueryStats(), cap=None)
    # The chunks that succeeded are cached: a retry sends only the lost chunk.
    rec.fail_on = None
    stats = QueryStats()
    assert await engine.classify(["a", "b", "bad", "c", "d", "e"], stats, cap=None) == ["A", "B", "BAD", "C", "D", "E"]
    assert stats.queries == 2 and stats.cache_hits == 4


async def test_waiter_on_failed_text_gets_the_error():
    rec = Recorder(delay=0.02, fail_on="bad")
    engine = QueryEngine(FunctionClassifier(rec))
    results = await asyncio.gather(
        engine.classify(["bad"], QueryStats(), cap=None),
        engine.classify(["bad"], QueryStats(), cap=None),
        return_exceptions=True,
    )
    assert all(isinstance(r, ClassifierError) for r in results)
    assert len(rec.calls) == 1


def test_engine_works_across_event_loops():
    engine = QueryEngine(FunctionClassifier(Recorder(delay=0.001)))
    assert asyncio.run(engine.classify(["a"], QueryStats(), cap=None)) == ["A"]
    assert asyncio.run(engine.classify(["b"], QueryStats(), cap=None)) == ["B"]


async def test_disabled_cache_sends_every_text():
    rec = Recorder()
    engine = QueryEngine(FunctionClassifier(rec), cache=QueryCache(enabled=False), request_size=3)
    stats = QueryStats()
    assert await engine.classify(["a", "a", "b", "a"], stats, cap=None) == ["A", "A", "B", "A"]
    assert await engine.classify(["a"], stats, cap=None) == ["A"]
    assert sum(len(c) for c in rec.calls) == 5
    assert stats.queries == 5 and stats.cache_hits == 0


def test_disabled_cache_cannot_be_persisted(tmp_path):
    from llm_anchors import ConfigError

    with pytest.raises(ConfigError):
        QueryCache(tmp_path / "x.db", enabled=False)


async def test_a_bounded_cache_keeps_the_most_recent_labels():
    rec = Recorder()
    cache = QueryCache(max_entries=3)
    engine = QueryEngine(FunctionClassifier(rec, name="r"), cache=cache)
    # A batch larger than the cache still gets every label right.
    assert await engine.classify(["a", "b", "c", "d", "e", "a"], QueryStats(), cap=None) == [
        "A",
        "B",
        "C",
        "D",
        "E",
        "A",
    ]
    r = engine.classifier.identity
    assert len(cache) == 3 and cache.get(r, "e") == (True, "E") and cache.get(r, "a") == (False, None)
    cache.get(r, "c")  # used: now the most recent
    cache.put(r, "f", "F")
    assert [cache.get(r, t)[0] for t in "cdef"] == [True, False, True, True]


def test_a_bounded_persisted_cache_reads_dropped_labels_back(tmp_path):
    cache = QueryCache(tmp_path / "c.sqlite", max_entries=2)
    cache.put_many("r", [("a", 1), ("b", 2), ("c", 3)])
    assert len(cache) == 2 and cache.get("r", "a") == (True, 1)  # from disk
    cache.close()
    reopened = QueryCache(tmp_path / "c.sqlite", max_entries=2)
    assert len(reopened) == 2 and reopened.get("r", "b") == (True, 2)
    with pytest.raises(ConfigError):
        QueryCache(max_entries=0)


class Gate:
    """A model whose calls hold their texts until ``open`` is set: ``started`` is set by the first call.
    Tests order what happens by these events and by `until`, never by sleeping."""

    def __init__(self):
        self.open = asyncio.Event()
        self.started = asyncio.Event()
        self.calls: list[list[str]] = []

    async def __call__(self, texts):
        self.calls.append(list(texts))
        self.started.set()
        await self.open.wait()
        return [t.upper() for t in texts]


async def until(condition) -> None:
    """Let the other tasks run until ``condition()`` holds (scheduling only: no clock)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_a_cancelled_explanation_does_not_poison_the_texts_it_was_sending():
    gate = Gate()
    engine = QueryEngine(FunctionClassifier(gate), max_concurrency=1)
    first = asyncio.ensure_future(engine.classify(["a", "b", "c"], QueryStats(), cap=None))
    await gate.started.wait()  # a, b and c are in flight
    waiting_stats = QueryStats()
    waiting = asyncio.ensure_future(engine.classify(["b", "d"], waiting_stats, cap=None))
    await until(lambda: waiting_stats.cache_hits == 1 and "d" in engine._inflight)  # awaits "b", queues "d"
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    gate.open.set()
    # The waiter asks again for what the cancelled call never got, and nothing stays in flight.
    assert await asyncio.wait_for(waiting, 5) == ["B", "D"]
    assert engine._inflight == {} and ["b"] in gate.calls[1:]
    stats = QueryStats()
    assert await asyncio.wait_for(engine.classify(["a", "b", "c"], stats, cap=None), 5) == ["A", "B", "C"]


async def test_cancelled_while_queued_for_the_semaphore_leaves_nothing_in_flight():
    gate = Gate()
    engine = QueryEngine(FunctionClassifier(gate), max_concurrency=1, request_size=1)
    queued = asyncio.ensure_future(engine.classify(["a", "b", "c", "d"], QueryStats(), cap=None))
    await gate.started.wait()  # "a" is being asked; b, c and d wait for the semaphore
    assert gate.calls == [["a"]] and set(engine._inflight) == {"a", "b", "c", "d"}
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert engine._inflight == {}
    gate.open.set()
    assert await asyncio.wait_for(engine.classify(["c", "d"], QueryStats(), cap=None), 5) == ["C", "D"]


async def test_waiting_for_an_answer_does_not_cancel_it_for_its_sender():
    gate = Gate()
    engine = QueryEngine(FunctionClassifier(gate))
    sender = asyncio.ensure_future(engine.classify(["a"], QueryStats(), cap=None))
    await gate.started.wait()
    waiter_stats = QueryStats()
    waiter = asyncio.ensure_future(engine.classify(["a"], waiter_stats, cap=None))
    await until(lambda: waiter_stats.cache_hits == 1)  # the waiter awaits the sender's answer
    waiter.cancel()  # and gives up
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.open.set()
    assert await asyncio.wait_for(sender, 5) == ["A"] and len(gate.calls) == 1


async def test_a_cache_that_cannot_write_keeps_the_labels_and_warns(tmp_path):
    import sqlite3

    from llm_anchors import CacheWriteWarning

    path = tmp_path / "q.db"
    cache = QueryCache(path)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        engine = QueryEngine(FunctionClassifier(Recorder(), name="r"), cache=cache)
        with pytest.warns(CacheWriteWarning, match="kept in memory only"):
            labels = await asyncio.wait_for(engine.classify(["a", "b"], QueryStats(), cap=None), 30)
        assert labels == ["A", "B"] and cache.get("function:r", "a") == (True, "A")
        stats = QueryStats()
        assert await asyncio.wait_for(engine.classify(["a", "c"], stats, cap=None), 30) == [
            "A",
            "C",
        ]  # no second warning
        assert (stats.queries, stats.cache_hits) == (1, 1)
    finally:
        locker.execute("ROLLBACK")
        locker.close()


async def test_labels_that_are_not_json_stay_in_memory(tmp_path):
    from llm_anchors import CacheWriteWarning

    cache = QueryCache(tmp_path / "q.db")
    engine = QueryEngine(FunctionClassifier(lambda texts: [frozenset([t]) for t in texts], name="sets"), cache=cache)
    with pytest.warns(CacheWriteWarning):
        labels = await asyncio.wait_for(engine.classify(["a"], QueryStats(), cap=None), 10)
    assert labels == [frozenset(["a"])]


class OldStyleClassifier:
    """A classifier written before 0.2: Batch(usage=, usd=), quote -> (Charge, estimated)."""

    identity = "old-style"

    async def classify(self, texts):
        from llm_anchors.extend import Batch, Charge

        return Batch([t.upper() for t in texts], usage=Charge(prompt_tokens=10 * len(texts)), usd="0.001")

    async def quote(self, texts):
        from decimal import Decimal

        from llm_anchors.extend import Charge

        return Charge(len(texts), 20 * len(texts), 0, Decimal("0.002")), True


def test_labels_read_back_from_a_persisted_cache_keep_their_type(tmp_path):
    labels = [("neg", 1), ("pos", (2, "x")), 3, "word", None, 1.5, True]
    cache = QueryCache(tmp_path / "c.sqlite")
    cache.put_many("m", [(f"t{i}", label) for i, label in enumerate(labels)])
    cache.close()
    again = QueryCache(tmp_path / "c.sqlite")
    assert [again.get("m", f"t{i}")[1] for i in range(len(labels))] == labels
    assert type(again.get("m", "t0")[1]) is tuple  # a tuple label is not a list: it stays hashable and equal
    again.close()


async def test_the_limit_grows_while_answers_are_steady_and_halves_on_overload():
    from llm_anchors import RateLimitError

    calls = {"n": 0}

    async def answer(texts):
        calls["n"] += 1
        await asyncio.sleep(0.005)
        if 30 <= calls["n"] < 33:  # a short 429 storm
            raise RateLimitError("slow down", classifier="s", retry_after=0.0)
        return [t.upper() for t in texts]

    from llm_anchors import RetryPolicy

    retry = RetryPolicy(max_attempts=10, initial_wait=0.001, max_wait=0.002, jitter=0.0)
    engine = QueryEngine(FunctionClassifier(answer, name="s"), max_concurrency=8, request_size=4, retry=retry)
    limiter = engine.limiter
    assert (limiter.limit, limiter.maximum) == (8, 32)
    await engine.classify([f"a{i}" for i in range(80)], QueryStats(), cap=None)
    grown = limiter.highest
    assert grown > 8  # steady answers: it grew
    await engine.classify([f"b{i}" for i in range(200)], QueryStats(), cap=None)
    limits = [limit for _, limit, _ in limiter.trace]
    assert any(after == before / 2 for before, after in zip(limits, limits[1:], strict=False))  # halved at once
    assert all(limit <= 32 for _, limit, _ in limiter.trace)  # never past the ceiling


def test_a_call_carries_at_most_half_the_limit():
    from llm_anchors.query.limiter import Limiter

    limiter = Limiter(64, initial=10)
    assert limiter.size(8) == 5 and limiter.size(3) == 3
    limiter.observe(4, 1.0, "overload")
    assert limiter.limit == 5 and limiter.size(8) == 2
    for _ in range(5):
        limiter.observe(1, 1.0, "overload")  # cut once a round trip: not again at once
    assert limiter.limit >= 1 and limiter.size(8) >= 1


class Forest:
    """A model with sklearn's predict / predict_proba / classes_: "A" when the text holds "a"."""

    classes_ = ["A", "B"]

    def predict(self, texts):
        return ["A" if "a" in t else "B" for t in texts]

    def predict_proba(self, texts):
        return [[0.8, 0.2] if "a" in t else [0.3, 0.7] for t in texts]


async def test_answers_hold_the_probabilities_sent_cached_and_uncached(tmp_path):
    forest = Forest()
    cache = QueryCache(tmp_path / "c.sqlite")
    engine = QueryEngine(FunctionClassifier(forest.predict, predict_proba=forest.predict_proba, name="f"), cache=cache)
    labels, probabilities = await engine.answers(["a", "b", "a"], QueryStats(), cap=None)
    assert labels == ["A", "B", "A"]
    assert probabilities == [{"A": 0.8, "B": 0.2}, {"A": 0.3, "B": 0.7}, {"A": 0.8, "B": 0.2}]
    stats = QueryStats()
    assert (await engine.answers(["b"], stats, cap=None))[1] == [{"A": 0.3, "B": 0.7}] and stats.cache_hits == 1
    cache.close()
    again = QueryCache(tmp_path / "c.sqlite")  # persisted: a later run chooses as this one did
    assert again.answer("function:f", "a") == ("A", {"A": 0.8, "B": 0.2})
    again.close()
    off = QueryEngine(
        FunctionClassifier(forest.predict, predict_proba=forest.predict_proba), cache=QueryCache(enabled=False)
    )
    assert (await off.answers(["a"], QueryStats(), cap=None))[1] == [{"A": 0.8, "B": 0.2}]
    plain = QueryEngine(FunctionClassifier(forest.predict))
    assert await plain.answers(["a"], QueryStats(), cap=None) == (["A"], [None])


def test_a_cache_written_before_probabilities_is_read_and_extended(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE labels (classifier TEXT, text TEXT, label TEXT, PRIMARY KEY (classifier, text))")
    db.execute("INSERT INTO labels VALUES ('m', 't', '\"pos\"')")
    db.commit()
    db.close()
    cache = QueryCache(path)
    assert cache.get("m", "t") == (True, "pos") and cache.answer("m", "t") == ("pos", None)
    cache.put_many("m", [("u", ("a", 1))], [{("a", 1): 0.6, "b": 0.4}])
    cache.close()
    again = QueryCache(path)
    assert again.answer("m", "u") == (("a", 1), {("a", 1): 0.6, "b": 0.4})
    again.close()
