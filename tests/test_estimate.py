"""The forecast: a seeded pilot of at most a quarter of the inputs, extrapolated with a range."""

import json

import numpy as np
import pytest

from llm_anchors import AnchorsExplainer, Budget, FunctionClassifier, MAnchorsExplainer
from llm_anchors.run import estimate
from llm_anchors.run.estimate import forecast_rest, pilot_indices
from tests.test_cli import SENTENCES, cli, inputs, keyword_sentiment, lines, run_args


@pytest.mark.parametrize("n,size", [(1, 1), (5, 1), (8, 1), (10, 2), (20, 4), (40, 8), (100, 20), (1000, 50)])
def test_a_pilot_is_a_seeded_sample_of_a_fifth_of_the_inputs_of_equal_length(n, size):
    chosen = pilot_indices([7] * n, seed=3)
    assert len(chosen) == size and chosen == sorted(set(chosen)) and chosen == pilot_indices([7] * n, seed=3)
    assert n < 8 or pilot_indices([7] * n, seed=4) != chosen


@pytest.mark.parametrize("seed", range(20))
def test_a_pilot_never_holds_more_than_a_fifth_of_the_words_nor_an_input_of_none(seed):
    words = [40, 3, 0, 5, 60, 2, 0, 9, 11, 4, 8, 100, 6, 7, 3, 5, 0, 12, 10, 9]
    chosen = pilot_indices(words, seed)
    assert 1 <= len(chosen) <= 4 and sum(words[i] for i in chosen) <= 0.2 * sum(words)
    assert all(words[i] > 0 for i in chosen)


def test_a_file_too_short_for_a_fifth_pilots_its_shortest_input_and_one_of_no_words_nothing():
    assert pilot_indices([30, 4, 50], seed=0) == [1]
    assert pilot_indices([0, 0], seed=0) == []


def test_the_forecast_scales_by_words_and_its_range_widens_with_the_spread():
    assert forecast_rest([10, 20], [100, 200], [300]) == (3000.0, 300.0, 30000.0)  # one cost per word: ×/÷ 10
    expected, low, high = forecast_rest([10, 20, 10], [80, 200, 120], [100, 100, 100])
    assert expected == pytest.approx(300 * 400 / 40) and low < expected < high
    wider = forecast_rest([10, 20, 10], [20, 400, 120], [100, 100, 100])
    assert wider[2] - wider[1] > high - low
    assert forecast_rest([10, 20, 10], [80, 200, 120], [100, 100, 100], seed=1) != (expected, low, high)
    assert forecast_rest([10], [0], [100]) == forecast_rest([], [], [100]) == (0.0, 0.0, 0.0)  # nothing paid


def test_the_range_holds_a_heavy_tailed_total_most_of_the_time():
    rng = np.random.default_rng(0)
    held = 0
    for trial in range(100):
        words = rng.integers(5, 40, 40)
        costs = words * np.exp(rng.normal(2.0, 1.0, 40))  # log-normal per word: the model's own family
        expected, low, high = forecast_rest(list(words[:8]), list(costs[:8]), list(words[8:]), seed=trial)
        held += low <= costs[8:].sum() <= high
    assert held >= 88  # nominally 95 of 100


async def test_estimate_explains_its_pilot_and_forecasts_the_rest():
    texts = [f"a good and great film number {i}" for i in range(10)] + [f"a dull film {i}" for i in range(10)]
    labels = FunctionClassifier(lambda t: [int("good" in x and "great" in x) for x in t], name="gg")
    async with AnchorsExplainer(labels, seed=0) as explainer:
        forecast = await estimate(explainer, texts, seed=1)
    assert forecast.inputs == 20 and forecast.pilot == 4 and forecast.pilot_queries > 0
    assert forecast.queries_low <= forecast.queries_expected <= forecast.queries_high
    assert "pilot of 4 inputs" in forecast.summary() and set(forecast.to_dict()) >= {"queries_low", "usd_high"}
    assert "with plain Anchors (the beam search)" in forecast.summary()
    async with MAnchorsExplainer(labels, seed=0, memory=None) as guided:
        assert (await estimate(guided, texts, seed=1)).explainer == "MAnchors' guided search, no memory"


@pytest.mark.parametrize("on_budget", ["raise", "return"])
async def test_a_cap_that_ends_the_pilot_early_marks_the_forecast_partial(on_budget):
    texts = [f"a good and great film number {i}" for i in range(10)] + [f"a dull film {i}" for i in range(10)]
    labels = FunctionClassifier(lambda t: [int("good" in x and "great" in x) for x in t], name="gg")
    async with AnchorsExplainer(labels, seed=0) as explainer:
        whole = (await estimate(explainer, texts, seed=1)).pilot_queries
    stopped_before_any = False
    for cap in range(10, whole + 30, 7):  # wherever it falls: in a search, or at the next input's label
        async with AnchorsExplainer(labels, seed=0, budget=Budget(max_queries=cap), on_budget=on_budget) as explainer:
            forecast = await estimate(explainer, texts, seed=1)
        assert forecast.pilot_queries <= cap and forecast.planned == 4
        assert forecast.partial == (cap < whole) and (forecast.pilot < 4 or not forecast.partial), cap
        if not forecast.pilot:  # no input explained: no forecast, never "0 queries, $0 expected"
            said = forecast.to_dict()
            assert all(said[k] is None for k in ("queries_expected", "queries_high", "usd_expected", "usd_high"))
            assert "no forecast" in forecast.summary()
            stopped_before_any = True
    assert stopped_before_any


def test_a_pilot_of_three_scattered_costs_gives_a_finite_range():
    with np.errstate(over="raise"):  # a wide posterior once overflowed exp
        expected, low, high = forecast_rest([10, 12, 11], [100, 5000, 20], [10] * 20)
    assert 0 < low <= expected <= high < float("inf")


async def printed(*args: str) -> tuple[int, str]:
    """``llm-anchors ARGS`` in a subprocess: its exit code and what it printed."""
    import asyncio
    import os
    import sys

    from tests.test_cli import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_anchors.cli", *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_the_command_prints_json_and_the_run_does_not_pay_twice_for_the_pilot(tmp_path):
    from tests.fault_server import FaultServer

    source = inputs(tmp_path)
    async with FaultServer(answer=keyword_sentiment) as server:
        args = run_args(server.base_url, source, tmp_path / "out.jsonl", "--max-queries", "100000")
        code, out = await printed("estimate", *args[1:], "--json")
        assert code == 0
        forecast = json.loads(out)
        assert forecast["explainer"] == "plain Anchors (the beam search)"  # run_args ask for --anchors
        assert forecast["pilot_queries"] == server.prompts_served > 0 and 1 <= forecast["pilot"] <= len(SENTENCES) // 5
        assert forecast["queries_low"] <= forecast["queries_expected"] <= forecast["queries_high"]
        assert {"usd_low", "usd_high", "usd_expected", "pilot_usd"} <= set(forecast)
        pilot = server.prompts_served
        assert (await cli(*args))[0] == 0
        warm = server.prompts_served - pilot
        cold_out = run_args(server.base_url, source, tmp_path / "cold.jsonl", "--max-queries", "100000")
        before = server.prompts_served
        assert (await cli(*cold_out))[0] == 0
        cold = server.prompts_served - before
    assert warm < cold  # the pilot's labels were the run's: not paid twice
    assert len(lines(tmp_path / "out.jsonl")) == len(lines(tmp_path / "cold.jsonl"))
