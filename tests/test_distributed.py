"""One run over Ray workers: the explanations of one process, one cap, one memory, lost workers."""

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from decimal import Decimal
from functools import partial

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'llm-anchors[ray]'")

from llm_anchors import (  # noqa: E402
    AnchorsExplainer,
    BudgetExceeded,
    ClassifierError,
    ConfigError,
    FunctionClassifier,
    MAnchorsExplainer,
    RetryPolicy,
    SearchParams,
)
from llm_anchors.distributed import RayPool, explain_resumable_on_ray  # noqa: E402
from llm_anchors.extend import Charge  # noqa: E402
from llm_anchors.run import ResultsFile, read_results  # noqa: E402
from tests import test_budget  # noqa: E402
from tests.fault_server import FaultServer  # noqa: E402
from tests.test_budget import SENTENCES, priced, sentiment  # noqa: E402

for _module in (sys.modules[__name__], test_budget):  # the workers need not import the tests
    ray.cloudpickle.register_pickle_by_value(_module)

POSITIVE = {"good", "great", "fine", "love"}
TEXTS = [
    f"a {w} film with {v} acting and a {u} plot"
    for w in ("good", "bad", "dull", "great")
    for v in ("fine", "poor", "wooden")
    for u in ("love", "thin")
]


pytestmark = pytest.mark.slow


def keywords(texts, delay=0.0):
    time.sleep(delay)
    return ["pos" if set(t.split()) & POSITIVE else "neg" for t in texts]


def anchors(delay=0.0):
    return AnchorsExplainer(
        FunctionClassifier(partial(keywords, delay=delay), name="kw"), seed=0, search=SearchParams(batch_size=25)
    )


def hosted(url):
    """A priced LLM behind a faulty server, retried fast."""
    retry = RetryPolicy(max_attempts=8, initial_wait=0.001, max_wait=0.005, jitter=0.002)
    return AnchorsExplainer(priced(url), on_budget="return", retry=retry, max_concurrency=4)


def manchors():
    return MAnchorsExplainer(FunctionClassifier(keywords, name="kw"), seed=0)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


async def one_process(make, texts):
    async with make() as explainer:
        return [e async for e in explainer.explain_stream(texts)]


async def test_two_workers_give_the_explanations_of_one_process_and_one_ledger_counts_them(local_ray):
    async with RayPool(anchors, workers=2) as pool:
        spread = [e async for e in pool.explain_stream(TEXTS)]
        report = await asyncio.to_thread(pool.report)
    alone = await one_process(anchors, TEXTS)
    assert [e.data for e in spread] == [e.data for e in alone]  # same inputs, same seeds: same anchors
    assert pool.stats.explained == len(TEXTS) and pool.stats.workers_lost == 0
    assert report.settled.queries == sum(e.meta.queries for e in spread) and report.reserved == Charge()


async def test_a_worker_killed_mid_stream_loses_no_input_and_reports_none_twice(local_ray):
    make = partial(anchors, delay=0.02)  # slow enough to be killed inside an input
    async with RayPool(make, workers=2, max_queries=100_000) as pool:
        pids = await asyncio.to_thread(pool.worker_pids)
        spread = []
        async for exp in pool.explain_stream(TEXTS):
            spread.append(exp)
            if len(spread) == 3:
                os.kill(pids[0], signal.SIGKILL)
        report = await asyncio.to_thread(pool.report)
    alone = await one_process(anchors, TEXTS)
    assert [e.data for e in spread] == [e.data for e in alone]
    assert (pool.stats.workers_lost, pool.stats.inputs_redone, pool.stats.explained) == (1, 1, len(TEXTS))
    assert report.reserved == Charge()  # the dead worker's calls in flight are released
    assert report.settled.queries >= sum(e.meta.queries for e in spread)  # what it settled before dying stays


def dies_once(marker, delay=0.0):
    """`anchors`, made in a process that exits at once the first time ``marker`` exists."""
    if os.path.exists(marker):
        os.remove(marker)
        os._exit(1)
    return anchors(delay)


async def test_a_replacement_that_dies_while_starting_is_replaced_in_turn(local_ray, tmp_path):
    marker = tmp_path / "die"
    async with RayPool(partial(dies_once, str(marker), delay=0.02), workers=2) as pool:
        pids = await asyncio.to_thread(pool.worker_pids)
        spread = []
        async for exp in pool.explain_stream(TEXTS):
            spread.append(exp)
            if len(spread) == 3:
                marker.touch()  # the next worker started exits in its constructor
                os.kill(pids[0], signal.SIGKILL)
    alone = await one_process(anchors, TEXTS)
    assert not marker.exists()  # a replacement did start, and died
    assert [e.data for e in spread] == [e.data for e in alone]
    assert (pool.stats.workers_lost, pool.stats.inputs_redone, pool.stats.explained) == (2, 1, len(TEXTS))


def breaking(texts, delay=0.05):
    """Slow keywords that fail on any text saying "boom"."""
    if any("boom" in t.split() for t in texts):
        raise ValueError("boom")
    return keywords(texts, delay)


async def test_a_failed_input_ends_the_stream_only_once_the_inputs_in_flight_have_settled(local_ray):
    make = lambda: AnchorsExplainer(FunctionClassifier(breaking, name="kw"), seed=0, search=SearchParams(batch_size=25))  # noqa: E731
    async with RayPool(make, workers=2, max_queries=100_000) as pool:
        seen = []
        with pytest.raises(ClassifierError, match="boom"):  # the worker's error, as itself
            async for exp in pool.explain_stream([TEXTS[0], "boom goes the film"]):
                seen.append(exp)
        report = await asyncio.to_thread(pool.report)
    (alone,) = await one_process(make, [TEXTS[0]])
    assert seen == []  # the input explained beside the failure is dropped, not yielded
    assert report.reserved == Charge()  # its calls ended before the error reached the caller
    assert report.settled.queries == alone.meta.queries + 1  # its whole spend, and the failed call's


async def test_workers_sharing_a_cap_with_injected_faults_never_pass_it(local_ray):
    """50 seeded runs: three workers, one ledger, a server that fails, hangs and answers late."""
    async with FaultServer(answer=sentiment, fail_rate=0.1, latency=(0.0, 0.004), hang_s=0.7) as server:
        bound = 0
        async with RayPool(partial(hosted, server.base_url), workers=3) as pool:
            for seed in range(50):
                rng = random.Random(seed)
                server.rng = random.Random(seed)
                caps = {
                    "max_usd": Decimal(rng.randint(1, 15)) / Decimal(10**6),
                    "max_queries": rng.randint(5, 60),
                    "max_tokens": rng.randint(100, 1000),
                }
                await pool.set_budget(**caps)
                texts = [rng.choice(SENTENCES) for _ in range(4)]
                with contextlib.suppress(BudgetExceeded):  # refused an input's first query
                    [e async for e in pool.explain_stream(texts, seed=seed)]
                report = await asyncio.to_thread(pool.report)
                bound += report.refused > 0
                spent = report.settled
                assert spent.usd <= caps["max_usd"] and spent.queries <= caps["max_queries"], seed
                assert spent.tokens <= caps["max_tokens"], seed
                assert report.reserved == Charge() and report.over_reservation == 0, seed
    assert bound >= 25  # the caps really bound, in half the runs at least


async def test_each_input_keeps_its_own_cap_within_the_runs(local_ray):
    async with FaultServer(answer=sentiment, fail_rate=0.0) as server:
        cap = Decimal("0.000004")
        async with RayPool(partial(hosted, server.base_url), workers=2, max_usd=1, max_usd_per_input=cap) as pool:
            found = [e async for e in pool.explain_stream(SENTENCES[:4])]
            report = await asyncio.to_thread(pool.report)
    assert all(e.meta.cost.settled.usd <= cap for e in found)
    assert any(e.meta.budget_exhausted for e in found)  # the per-input cap bound
    assert report.settled.usd == sum(e.meta.cost.settled.usd for e in found) and report.reserved == Charge()


@pytest.mark.parametrize("memory", ["actor", "replicas"])
async def test_one_memory_across_workers_and_one_worker_is_one_process(local_ray, tmp_path, memory):
    async with RayPool(manchors, workers=1, memory=memory) as pool:
        single = [e async for e in pool.explain_stream(TEXTS)]
    alone = await one_process(manchors, TEXTS)
    assert [(e.data, e.meta.memory_hit) for e in single] == [(e.data, e.meta.memory_hit) for e in alone]

    async with RayPool(manchors, workers=2, memory_dir=tmp_path / "memory", memory=memory) as pool:
        spread, accepted = [], []
        async for exp in pool.explain_stream(TEXTS):
            spread.append(exp)
            assert all(entry.query == exp.data.query for entry in pool.last_stored)  # this input's own entry
            accepted += pool.last_stored
        stored = await asyncio.to_thread(pool.memory_size)
    hits = sum(bool(e.meta.memory_hit) for e in spread)
    assert hits >= sum(bool(e.meta.memory_hit) for e in alone) - 2  # each worker sees what the other learnt
    assert stored == len(accepted) and 0 < stored <= len(TEXTS)  # one entry per explanation at most
    reloaded = manchors()
    reloaded.load(tmp_path / "memory")
    assert sorted(e.query for e in reloaded.store.entries) == sorted(e.query for e in accepted)  # saved whole


async def test_a_resumed_run_puts_back_the_memory_entries_recorded_after_the_last_save(local_ray, tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        async with RayPool(manchors, workers=1) as pool:  # no memory_dir: killed before it was ever saved
            await explain_resumable_on_ray(pool, TEXTS[:6], results)
    with ResultsFile(path) as results:
        recorded = sum(len(r["memory_entries"]) for r in results.records.values())
        assert recorded > 0
        async with RayPool(manchors, workers=1, memory="replicas", memory_dir=tmp_path / "memory") as pool:
            report = await explain_resumable_on_ray(pool, TEXTS[:8], results)
            stored = await asyncio.to_thread(pool.memory_size)
        assert report.done_now == 2
        assert stored == sum(len(r["memory_entries"]) for r in results.records.values())  # none lost


async def test_workers_killed_under_a_query_cap_never_make_the_server_answer_more_than_it(local_ray):
    """Workers SIGKILLed with calls in flight: the server, not the ledger, counts what was answered."""
    cap = 600
    texts = [f"{t} , good and great" for t in TEXTS]
    async with FaultServer(answer=sentiment, latency=(0.1, 0.3)) as server:
        async with RayPool(partial(hosted, server.base_url), workers=2, max_queries=cap, max_replacements=20) as pool:
            stream = asyncio.ensure_future(collect(pool.explain_stream(texts, seed=0)))
            rng, killed = random.Random(0), 0
            for served in (100, 200, 300):  # a kill each time the server has answered this many: not a timing
                while not stream.done() and server.prompts_served < served:
                    await asyncio.sleep(0.01)
                killed += await kill_one(pool, stream, rng)
            with contextlib.suppress(BudgetExceeded):
                await stream
            report = await asyncio.to_thread(pool.report)
        await asyncio.wait_for(server.idle(), 30)  # what the dead workers had sent is answered
        served = server.prompts_served
    assert killed == 3 and report.refused > 0  # workers died before the cap bound, and it bound
    assert served <= report.settled.queries <= cap, (served, report)


async def kill_one(pool, stream, rng):
    """SIGKILL one live worker (retried while a replacement is still starting); 1 if one was killed."""
    while not stream.done():
        with contextlib.suppress(Exception):
            os.kill(rng.choice(await asyncio.to_thread(pool.worker_pids)), signal.SIGKILL)
            return 1
        await asyncio.sleep(0.05)
    return 0


async def collect(stream):
    return [e async for e in stream]


async def test_a_worker_s_error_reaches_the_coordinator_as_itself(local_ray):
    from llm_anchors import BackendError

    async with FaultServer(answer=sentiment, fail_rate=1.0, kinds=["echo-key"]) as server:
        async with RayPool(partial(hosted, server.base_url), workers=1) as pool:
            with pytest.raises(BackendError) as raised:
                await collect(pool.explain_stream(SENTENCES[:1]))
    assert raised.value.status == 401 and "401" in str(raised.value) and not raised.value.retryable
    assert "Traceback" not in str(raised.value) and len(str(raised.value).splitlines()) == 1  # no remote stack


async def test_a_failed_input_is_yielded_in_its_place_and_the_stream_goes_on(local_ray):
    make = lambda: AnchorsExplainer(FunctionClassifier(breaking, name="kw"), seed=0, search=SearchParams(batch_size=25))  # noqa: E731
    async with RayPool(make, workers=2, max_queries=100_000) as pool:
        got = await collect(pool.explain_stream([TEXTS[0], "boom goes the film", TEXTS[1]], errors="yield"))
    assert [type(g).__name__ for g in got] == ["Explanation", "ClassifierError", "Explanation"]
    assert "boom" in str(got[1]) and "Traceback" not in str(got[1])


async def test_the_ledger_writes_off_a_dead_worker_s_calls_at_their_worst_case():
    from llm_anchors.distributed.ledger import Ledger

    ledger = Ledger({"max_queries": 10}, None)
    rid, refused, _ = await ledger.reserve(Charge(queries=6), "worker-0", "t1")
    assert refused is None and ledger.write_off("worker-0") == 1
    assert ledger.report().settled.queries == 6 and ledger.report().reserved == Charge()
    _, refused, _ = await ledger.reserve(Charge(queries=5), "worker-1", "t2")
    assert isinstance(refused, BudgetExceeded)  # the dead worker's call may have been answered: it counts
    _, refused, _ = await ledger.reserve(Charge(queries=1), "worker-0", "t3")
    assert isinstance(refused, BudgetExceeded)  # nothing more from a worker declared dead
    ledger.settle(rid, Charge(queries=2))  # its bill arrives after all
    assert ledger.report().settled.queries == 2


def test_a_killed_coordinator_leaves_no_ray_process_behind(tmp_path):
    import subprocess
    from pathlib import Path

    script = Path(__file__).with_name("ray_coordinator_script.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    coordinator = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        (raylet,) = coordinator.stdout.readline().split()
        left = ray_processes(raylet)
        assert len(left) >= 2  # its agents and its worker, at least
    finally:
        coordinator.kill()
        coordinator.communicate()
    deadline = time.monotonic() + 20  # Ray's own agents wait 60 s for the head they report to
    while (left := ray_processes(raylet)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left


def ray_processes(raylet: str) -> list[int]:
    """The processes Ray started under ``raylet`` (they carry its pid in their environment)."""
    mark = f"RAY_RAYLET_PID={raylet}".encode()
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if mark in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            pass
    return found


def test_without_ray_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'llm-anchors\[ray\]'"):
        RayPool(anchors)


async def test_exact_repeats_on_ray_are_answered_at_no_query_even_across_a_resume(local_ray, tmp_path):
    texts = [TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[2], TEXTS[1], TEXTS[0]]
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        async with RayPool(manchors, workers=2) as pool:
            await explain_resumable_on_ray(pool, texts[:4], results)
    with ResultsFile(path) as results:
        async with RayPool(manchors, workers=2) as pool:  # resumed: the file's explanations answer repeats
            await explain_resumable_on_ray(pool, texts, results)
    records = read_results(path)
    paid = [records[i]["explanation"]["meta"]["queries"] for i in range(len(texts))]
    assert [i for i, q in enumerate(paid) if q] == [0, 1, 3]  # each distinct text once, whichever worker
    assert all(records[i]["explanation"]["meta"]["memory"]["repeat"] for i in (2, 4, 5))
    assert records[5]["explanation"]["data"] == records[0]["explanation"]["data"]
