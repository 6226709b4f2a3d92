"""The cap against what a hosted provider can answer, each case reproduced by a loopback server that
returns OpenAI's documented ``usage`` and ``service_tier`` fields: the provider's bill for what it
answered (priced by the server's own record of what it processed) stays within the cap, and the same
command with enough cap finishes the run."""

import asyncio
import json
import math
import os
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from llm_anchors.money import Charge, price_for, read_journal
from tests.fault_server import FaultServer
from tests.test_cli import ROOT, SENTENCES, inputs, keyword_sentiment, lines, run_args

pytestmark = pytest.mark.slow


async def cli(*args: str) -> tuple[int, str, str]:
    """``llm-anchors ARGS`` in a subprocess: its exit code, standard output and standard error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_anchors.cli", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def bill(server: FaultServer, model: str) -> Decimal:
    """What the provider bills for what it answered: the tokens it really processed, at the tier it said."""
    price = price_for(model)
    total = Decimal(0)
    for answer in server.answered:
        rates = price.at(answer["tier"])
        assert rates is not None
        total += rates.cost(
            Charge(prompt_tokens=answer["prompt_tokens"], completion_tokens=answer["completion_tokens"])
        )
    return total


def spent(out: Path) -> Charge:
    return read_journal(f"{out}.budget.jsonl").spent


def gateway(url: str, tmp_path: Path, model: str, *more: str) -> list[str]:
    """``run`` through a loopback gateway (LiteLLM and the like) serving a hosted model by its name."""
    return [*run_args(url, inputs(tmp_path), tmp_path / "out.jsonl", "--model", model, "--endpoint", "chat"), *more]


@pytest.mark.parametrize("asked", [[], ["--service-tier", "flex"]])
async def test_a_server_that_serves_priority_is_billed_at_priority_and_stopped_within_the_cap(tmp_path, asked):
    cap = Decimal("0.003")
    async with FaultServer(answer=keyword_sentiment, tier="priority") as server:
        args = gateway(server.base_url, tmp_path, "gpt-5-chat-latest", *asked)
        code, _, err = await cli(*args, "--max-usd", str(cap))
        stopped_at = bill(server, "gpt-5")
        assert code == 3 and "the run's cap is reached" in err and "passed" not in err, err
        assert 0 < stopped_at <= spent(tmp_path / "out.jsonl").usd <= cap  # a call cut short counts at its worst
        standard = sum(price_for("gpt-5").cost(Charge(prompt_tokens=a["prompt_tokens"], completion_tokens=1))
                       for a in server.answered)  # fmt: skip
        assert stopped_at == 2 * standard  # billed at priority
        code, _, err = await cli(*args, "--max-usd", "1")
        assert code == 0, err
    assert bill(server, "gpt-5") <= 1 and len(lines(tmp_path / "out.jsonl")) == len(SENTENCES)


async def test_a_server_saying_it_served_auto_is_billed_at_the_dearest_tier_not_the_worst_case(tmp_path):
    async with FaultServer(answer=keyword_sentiment, tier="auto") as server:
        code, _, err = await cli(*gateway(server.base_url, tmp_path, "gpt-5-mini"), "--max-usd", "0.5")
        price = price_for("gpt-5-mini")
        usage = [Charge(prompt_tokens=a["prompt_tokens"], completion_tokens=a["completion_tokens"])
                 for a in server.answered]  # fmt: skip
    dearest = sum(price.dearest(u).cost(u) for u in usage)
    journal = spent(tmp_path / "out.jsonl")
    assert code == 0 and journal.usd == dearest > 0, err  # it was 52 times the bill: each at its worst case
    assert journal.disputed == 0
    record = lines(tmp_path / "out.jsonl")[0]["explanation"]["meta"]["cost"]
    assert record["dearest_tier"] > 0 and record["disputed"] == {}


async def test_a_reasoning_model_s_answers_are_bounded_reserved_in_full_and_billed_within_the_cap(tmp_path):
    cap = Decimal("0.01")
    async with FaultServer(answer=keyword_sentiment, reasoning_tokens=50) as server:
        args = gateway(server.base_url, tmp_path, "gpt-5", "--max-output-tokens", "64")
        code, _, err = await cli(*args, "--max-usd", str(cap))
        body = server.bodies[0]
        assert body["max_completion_tokens"] == 64 and body["reasoning_effort"] == "minimal"
        assert not {"max_tokens", "temperature", "logprobs"} & set(body)  # refused by OpenAI's reasoning models
        first, journal = bill(server, "gpt-5"), spent(tmp_path / "out.jsonl")
        assert code == 3 and 0 < first <= journal.usd <= cap, err
        answered = len(server.answered)
        assert journal.reasoning_tokens >= 50 * (answered - 8) and journal.completion_tokens >= 51 * answered
        code, _, err = await cli(*args, "--max-usd", "1")
        assert code == 0, err
    assert bill(server, "gpt-5") <= 1 and len(lines(tmp_path / "out.jsonl")) == len(SENTENCES)


async def test_a_small_cap_with_a_reasoning_model_stops_only_when_one_prompt_no_longer_fits(tmp_path):
    cap = Decimal("0.05")
    async with FaultServer(answer=keyword_sentiment, reasoning_tokens=50) as server:
        args = [*run_args(server.base_url, inputs(tmp_path), tmp_path / "out.jsonl", "--model", "gpt-5"), "--endpoint",
                "completions"]  # fmt: skip
        code, _, err = await cli(*args, "--max-usd", str(cap))
        sizes = [len(body["prompt"]) if isinstance(body["prompt"], list) else 1 for body in server.bodies]
    journal, price = spent(tmp_path / "out.jsonl"), price_for("gpt-5")
    one = price.worst_case(40 + 8, 256)  # one prompt (under 40 tokens, + the slack) at its output bound, priority
    assert code == 3 and journal.usd <= cap and sizes, err
    assert journal.usd > cap - 2 * one, err  # it stopped at $0.00786 of $0.05: 8 prompts reserved at once


async def test_answers_cut_by_the_bound_are_unparsed_and_said_once(tmp_path):
    async with FaultServer(answer=keyword_sentiment, reasoning_tokens=50) as server:
        code, _, err = await cli(*gateway(server.base_url, tmp_path, "gpt-5", "--max-output-tokens", "16"),
                                 "--max-usd", "0.02")  # fmt: skip
    assert code == 0 and bill(server, "gpt-5") <= Decimal("0.02")
    assert err.count("ended at the output bound (max_tokens=16)") == 1 and "--max-output-tokens" in err
    assert all(answer["completion_tokens"] == 16 for answer in server.answered)  # each cut, billed its bound
    # An input whose own answer is cut names no label: a failed line at one query, not an explanation of it.
    assert all("names none of the labels" in r["failed"] for r in lines(tmp_path / "out.jsonl"))
    assert len(server.answered) == len(lines(tmp_path / "out.jsonl"))


def _lying(server: FaultServer, lie: str):
    def usage(prompts: list[str]) -> dict:
        true = server.true_usage(len(prompts))
        if lie == "cached":  # ten times the prompt, from the cache
            return {"usage": {**true, "prompt_tokens_details": {"cached_tokens": 10 * true["prompt_tokens"]}}}
        if lie == "huge":
            return {"usage": {**true, "prompt_tokens": 10**9}}
        value = {"string": "74", "fraction": 74.5, "negative": -74, "nan": math.nan}[lie]
        return {"usage": {**true, "prompt_tokens": value}}

    return usage


async def test_a_server_billing_past_the_output_bound_is_recorded_at_its_bill_and_said_to_pass_the_cap(tmp_path):
    cap = Decimal("0.003")
    async with FaultServer(answer=keyword_sentiment, reasoning_tokens=50, honour_bound=False) as server:
        args = gateway(server.base_url, tmp_path, "gpt-5", "--max-output-tokens", "1")
        code, _, err = await cli(*args, "--max-usd", str(cap))
        billed, journal = bill(server, "gpt-5"), spent(tmp_path / "out.jsonl")
        assert all(a["completion_tokens"] == 51 for a in server.answered)  # 50 reasoning + 1, past the bound of 1
        assert code == 3 and billed <= journal.usd, err  # it was $0.0027 recorded against $0.0072 billed
        assert journal.usd > cap and f"passed the cap by ${journal.usd - cap:.6f}" in err, err
        assert journal.disputed == journal.queries > 0
        code, _, err = await cli(*args, "--max-usd", str(cap))  # resumed: refused, and said again
        assert code == 3 and "passed the cap by" in err and bill(server, "gpt-5") == billed, err


@pytest.mark.parametrize("lie", ["cached", "string", "fraction", "negative", "nan"])
async def test_usage_that_cannot_be_true_counts_at_the_worst_case_and_the_run_goes_on(tmp_path, lie):
    cap = Decimal("0.002")
    server = FaultServer(answer=keyword_sentiment)
    server.usage = _lying(server, lie)
    async with server:
        args = gateway(server.base_url, tmp_path, "gpt-4o-mini")
        code, _, err = await cli(*args, "--max-usd", str(cap))
        journal = spent(tmp_path / "out.jsonl")  # readable: no record its reader refuses
        assert code == 3 and bill(server, "gpt-4o-mini") <= journal.usd <= cap, err  # never below the truth
        assert journal.disputed == journal.queries > 0 and "could not be true" in err
        code, _, err = await cli(*args, "--max-usd", "0.5")  # the same command, more cap: it goes on
        assert code == 0, err
    record = lines(tmp_path / "out.jsonl")[0]["explanation"]["meta"]["cost"]
    assert sum(record["disputed"].values()) == record["settled"]["disputed"] > 0
    page = tmp_path / "report.html"
    assert (await cli("report", str(tmp_path / "out.jsonl"), "-o", str(page)))[0] == 0
    assert "reported usage that could not be true: counted at their worst case or their bill" in page.read_text()
    assert bill(server, "gpt-4o-mini") <= spent(tmp_path / "out.jsonl").usd <= Decimal("0.5")


async def test_the_pilot_spends_under_the_run_s_cap_and_refuses_what_the_run_refuses(tmp_path):
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        args = [inputs(tmp_path), "--out", str(out), "--base-url", server.base_url, "--anchors"]
        code, forecast, err = await cli("estimate", *args, "--max-queries", "400", "--json")
        assert code == 0 and json.loads(forecast)["pilot_queries"] > 0, err
        code, _, err = await cli("run", *args, "--max-queries", "400")
        assert code == 3 and server.prompts_served <= 400 and spent(out).queries <= 400, err
        code, _, err = await cli("estimate", *args, "--seed", "1", "--max-queries", "100000")
        assert code == 2 and "another configuration" in err and "seed" in err
        served = server.prompts_served
        code, _, err = await cli("estimate", *args[:2], str(tmp_path), *args[3:])
        assert code == 2 and "is a directory" in err and server.prompts_served == served


async def test_a_pilot_its_cap_stops_prints_the_forecast_it_can_marked_partial(tmp_path):
    texts = [f"{s} and {w} {k}" for s in SENTENCES for w in ("more", "again", "once") for k in range(3)]  # pilot: 21
    async with FaultServer(answer=keyword_sentiment) as server:
        args = [inputs(tmp_path, texts), "--out", str(tmp_path / "out.jsonl"), "--base-url", server.base_url]
        measure = [*args[:2], str(tmp_path / "measure.jsonl"), *args[3:]]  # a label cache of its own
        code, forecast, err = await cli("estimate", *measure, "--anchors", "--max-queries", "100000", "--json")
        whole = int(json.loads(forecast)["pilot_queries"])  # what the whole pilot costs
        assert code == 0 and whole > 0, err
        cap = str(whole // 2)
        code, forecast, err = await cli("estimate", *args, "--anchors", "--max-queries", cap, "--json")
    read = json.loads(forecast)
    assert code == 3 and read["partial"] and 0 < read["pilot"] < read["planned"] == 21, err
    assert int(read["queries_expected"]) > 0 and int(read["pilot_queries"]) <= int(cap)


async def test_a_429_storm_ends_inputs_or_stops_the_run_and_the_same_command_retries_them(tmp_path):
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment, fail_rate=0.5, kinds=["429"], retry_after="0") as server:
        args = run_args(server.base_url, inputs(tmp_path), out, "--max-attempts", "2", "--max-queries", "100000")
        code, _, err = await cli(*args)
        written = lines(out)
        faulted = [r for r in written if r.get("fault")]
        assert all("HTTP 429" in r["failed"] for r in faulted)
        if code == 4:  # the storm failed calls now and then: every input ended, some on its faults
            assert len(written) == len(SENTENCES) and faulted and "the same command retries them" in err, err
        else:  # 3 calls in a row failed: the run stopped once, what it finished kept
            assert code == 6 and "3 calls in a row" in err and "goes on once it answers" in err, err
        server.fail_rate = 0.0  # the storm is over
        code, _, err = await cli(*args)
        assert code == 0, err
    explained = [r for r in lines(out) if "explanation" in r]
    assert sorted(r["index"] for r in explained) == list(range(len(SENTENCES)))


@pytest.mark.parametrize("tier", ["banana", "PRIORITY", "scale"])
async def test_a_tier_the_model_lacks_is_refused_before_the_first_query(tmp_path, tier):
    async with FaultServer(answer=keyword_sentiment) as server:
        code, _, err = await cli(*gateway(server.base_url, tmp_path, "gpt-5", "--service-tier", tier))
        assert code == 2 and "auto, default, flex, priority" in err and server.prompts_served == 0, err
        code, _, err = await cli(*gateway(server.base_url, tmp_path, "gpt-4o-mini", "--service-tier", "flex"))
        assert code == 2 and "not a tier of 'gpt-4o-mini'" in err and server.prompts_served == 0


async def test_a_gateway_serving_a_tiered_model_takes_its_tiers_and_a_server_saying_default_is_standard(tmp_path):
    async with FaultServer(answer=keyword_sentiment, tier="default") as server:
        args = gateway(server.base_url, tmp_path, "gpt-5-chat-latest", "--max-usd", "1")
        code, _, err = await cli(*args)  # none asked, "default" said
        assert code == 0 and spent(tmp_path / "out.jsonl").usd == bill(server, "gpt-5") > 0, err
    async with FaultServer(answer=keyword_sentiment, tier="flex") as server:
        (tmp_path / "flex").mkdir()
        args = gateway(server.base_url, tmp_path / "flex", "gpt-5-chat-latest", "--service-tier", "flex")
        code, _, err = await cli(*args, "--max-usd", "1")
        assert (
            code == 0
            and server.tiers == {"flex"}
            and spent(tmp_path / "flex" / "out.jsonl").usd == bill(server, "gpt-5")
        )


async def test_a_memory_that_cannot_be_written_is_refused_before_anything_is_spent(tmp_path):
    async with FaultServer(answer=keyword_sentiment) as server:
        args = [a for a in run_args(server.base_url, inputs(tmp_path), tmp_path / "out.jsonl") if a != "--anchors"]
        code, _, err = await cli(*args, "--memory", "/proc/llm-anchors-memory")
        assert code == 2 and "cannot be written" in err and server.prompts_served == 0, err
