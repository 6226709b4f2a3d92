"""A dataset as a resumable, budgeted run: the results file, the journaled budget, inputs, kills."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from llm_anchors import (
    AnchorsExplainer,
    Budget,
    BudgetExceeded,
    ConfigError,
    FunctionClassifier,
    SearchParams,
    TextSampler,
)
from llm_anchors.extend import Charge
from llm_anchors.money import read_journal
from llm_anchors.run import ResultsFile, explain_resumable, input_hash, read_results, run_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("run_stream_script.py")


def keywords(texts):
    return ["pos" if "good" in t else "neg" for t in texts]


# -- the results file ------------------------------------------------------------


def test_a_last_line_cut_short_is_dropped_and_a_damaged_middle_line_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    results = ResultsFile(path)
    results.append({"index": 0, "input_sha256": "a"})
    results.append({"index": 1, "input_sha256": "b"})
    results.close()
    with open(path, "a") as handle:
        handle.write('{"index": 2, "inp')  # killed while writing
    with pytest.warns(UserWarning, match="cut short"):
        again = ResultsFile(path)
    assert sorted(again.records) == [0, 1]
    again.append({"index": 2, "input_sha256": "c"})
    again.close()
    assert [json.loads(line)["index"] for line in path.read_text().splitlines()] == [0, 1, 2]
    path.write_text('{"index": 0}\nnot json\n{"index": 2}\n')
    with pytest.raises(ConfigError, match="r.jsonl:2"):
        ResultsFile(path)


async def test_results_of_other_inputs_are_refused_not_overwritten(tmp_path):
    results = ResultsFile(tmp_path / "r.jsonl")
    results.append({"index": 0, "input_sha256": input_hash("another text")})
    async with AnchorsExplainer(FunctionClassifier(keywords, name="kw"), seed=0) as explainer:
        with pytest.raises(ConfigError, match="not this input"):
            await explain_resumable(explainer, ["a good film"], results)
    results.close()


async def test_a_resumed_run_hashes_each_recorded_input_once(tmp_path, monkeypatch):
    import llm_anchors.run.results as results_module

    texts = [f"a good film number {i}" for i in range(8)]
    clf = FunctionClassifier(keywords, name="kw")
    with ResultsFile(tmp_path / "r.jsonl") as results:
        async with AnchorsExplainer(clf, seed=0) as explainer:
            await explain_resumable(explainer, texts[:5], results)
    hashed: list[str] = []
    monkeypatch.setattr(results_module, "input_hash", lambda text: hashed.append(text) or input_hash(text))
    with ResultsFile(tmp_path / "r.jsonl") as results:
        assert results.todo(texts) == [5, 6, 7] and not results.failed
        async with AnchorsExplainer(clf, seed=0) as explainer:
            await explain_resumable(explainer, texts, results)
    assert sorted(hashed) == sorted(texts[:5])  # the 5 recorded, once each: it was 7 times over


async def test_a_cap_reached_at_an_input_s_first_query_stops_the_run_too(tmp_path):
    texts = [f"a good film number {i}" for i in range(3)]
    clf = FunctionClassifier(keywords, name="kw")
    async with AnchorsExplainer(clf, seed=0) as alone:
        first = (await alone.explain(texts[0])).meta.queries  # what the first costs: the cap
    with ResultsFile(tmp_path / "r.jsonl") as results, results.open_budget(max_queries=first) as budget:
        async with AnchorsExplainer(clf, seed=0, budget=budget, on_budget="return") as e:
            report = await explain_resumable(e, texts, results)
    assert (report.stopped, report.done, budget.settled.queries) == ("budget", 1, first)


async def test_a_run_skips_what_is_done_and_stops_at_its_cap(tmp_path):
    texts = [f"a good film number {i}" for i in range(6)]  # 30 queries for the first, 16 for each other
    clf = FunctionClassifier(keywords, name="kw")
    with ResultsFile(tmp_path / "r.jsonl") as results, results.open_budget(max_queries=70) as budget:
        async with AnchorsExplainer(clf, seed=0, budget=budget, on_budget="return") as explainer:
            report = await explain_resumable(explainer, texts, results)
        assert report.stopped == "budget" and 0 < report.done < len(texts)
        assert budget.settled.queries <= 70 and all(not e.meta.budget_exhausted for _, e in results.explanations())
    done = report.done
    with ResultsFile(tmp_path / "r.jsonl") as results, results.open_budget(max_queries=100_000) as more:
        assert more.settled == budget.settled  # what the first session spent, read back from the journal
        async with AnchorsExplainer(clf, seed=0, budget=more, on_budget="return") as explainer:
            rest = await explain_resumable(explainer, texts, results)
        assert (rest.done_before, rest.done_now, rest.stopped) == (done, len(texts) - done, "")
        assert [i for i, _ in results.explanations()] == list(range(len(texts)))


async def test_a_cap_per_input_ends_each_explanation_and_the_run_goes_on(tmp_path):
    texts = [f"a good film number {i}" for i in range(3)]  # 30 queries for the first, 16 for each other
    clf = FunctionClassifier(keywords, name="kw")
    with ResultsFile(tmp_path / "r.jsonl") as results, results.open_budget(max_queries=1000) as run:
        async with AnchorsExplainer(clf, seed=0, budget=run, on_budget="return") as e:
            report = await explain_resumable(
                e, texts, results, budget_per_input=lambda: Budget(max_queries=10, parent=run)
            )
            found = [exp for _, exp in results.explanations()]
    assert (report.stopped, report.done) == ("", 3)  # each input's cap ends its explanation, not the run
    assert all(exp.meta.budget_exhausted and exp.meta.queries <= 10 for exp in found)
    assert run.settled.queries == sum(exp.meta.queries for exp in found) and run.reserved == Charge()


async def test_a_run_s_spend_is_journaled_beside_its_results_or_it_does_not_start(tmp_path):
    clf = FunctionClassifier(keywords, name="kw")
    with ResultsFile(tmp_path / "r.jsonl") as results:
        async with AnchorsExplainer(clf, seed=0) as explainer:  # no cap: journaled all the same
            await explain_resumable(explainer, ["a good film"], results)
            assert explainer.budget is None  # the explainer is left as it was given
            with pytest.raises(ConfigError, match="budget_per_input needs the run's budget"):
                await explain_resumable(explainer, ["a good film", "a bad film"], results,
                                        budget_per_input=lambda: Budget(max_queries=10))  # fmt: skip
        assert read_journal(results.journal).spent.queries == results.explanations()[0][1].meta.queries > 0
        elsewhere = Budget(max_queries=100)
        async with AnchorsExplainer(clf, seed=0, budget=elsewhere) as explainer:
            with pytest.raises(ConfigError, match="journaled beside its results"):
                await explain_resumable(explainer, ["a good film", "a bad film"], results)
    assert elsewhere.settled == Charge()


def test_one_writer_at_a_time(tmp_path):
    with ResultsFile(tmp_path / "r.jsonl"):
        with pytest.raises(ConfigError, match=f"another run is writing .*r.jsonl \\(process {os.getpid()}\\)"):
            ResultsFile(tmp_path / "r.jsonl")
    with ResultsFile(tmp_path / "r.jsonl"):  # released when the first closed
        pass


def test_a_results_file_keeps_its_run_s_configuration_and_refuses_another(tmp_path):
    config = {"explainer": "AnchorsExplainer", "seed": 0, "sampler": {"p_hide": 0.5}, "classifier": {"labels": "a,b"}}
    with ResultsFile(tmp_path / "r.jsonl") as results:
        results.check_config(config)
        results.append({"index": 0, "input_sha256": "x", "failed": "empty"})
    with ResultsFile(tmp_path / "r.jsonl") as results:
        assert results.config == config and results.failed == {0: "empty"}
        results.check_config(dict(config))
        changed = {**config, "seed": 1, "sampler": {"p_hide": 0.3}, "classifier": {"labels": "a,c"}}
        with pytest.raises(ConfigError) as refused:
            results.check_config(changed)
    message = str(refused.value)
    assert "seed: 0 → 1" in message and "sampler.p_hide: 0.5 → 0.3" in message and "classifier.labels" in message


async def test_run_config_holds_what_shapes_an_explanation_and_not_what_a_resume_may_change():
    clf = FunctionClassifier(keywords, name="kw")
    a = run_config(
        AnchorsExplainer(
            clf, seed=0, budget=Budget(max_queries=10), max_concurrency=2, sampler=TextSampler(max_words=10)
        )
    )
    b = run_config(
        AnchorsExplainer(
            clf, seed=0, budget=Budget(max_queries=99), max_concurrency=8, sampler=TextSampler(max_words=99)
        )
    )
    assert a == b and a["seed"] == 0 and a["classifier"] == {"function": "kw"} and a["explainer"] == "AnchorsExplainer"
    assert run_config(AnchorsExplainer(clf, seed=0, search=SearchParams(threshold=0.9))) != a
    assert run_config(AnchorsExplainer(clf, seed=0), model={"base_url": ["u"]})["model"] == {"base_url": ["u"]}


async def test_a_run_records_inputs_it_cannot_explain_and_goes_on(tmp_path):
    texts = ["a good film", "", "!!!", "a bad film", " ".join(["word"] * 40)]
    async with AnchorsExplainer(
        FunctionClassifier(keywords, name="kw"), seed=0, sampler=TextSampler(max_words=30)
    ) as explainer:
        with ResultsFile(tmp_path / "r.jsonl") as results:
            report = await explain_resumable(explainer, texts, results)
            assert sorted(results.failed) == [1, 2, 4] and [i for i, _ in results.explanations()] == [0, 3]
    assert (report.done, report.failed, report.stopped) == (5, 3, "")
    assert "2/5 inputs explained" in report.summary() and "3 could not be explained" in report.summary()
    async with AnchorsExplainer(
        FunctionClassifier(keywords, name="kw"), seed=0, sampler=TextSampler(max_words=50)
    ) as explainer:
        with ResultsFile(tmp_path / "r.jsonl") as results:
            again = await explain_resumable(explainer, texts, results)  # a higher max_words: input 4 now
            assert sorted(results.failed) == [1, 2] and [i for i, _ in results.explanations()] == [0, 3, 4]
    assert (again.done_now, again.failed) == (1, 2)


async def test_a_journal_missing_or_cut_beside_results_is_refused(tmp_path):
    clf = FunctionClassifier(keywords, name="kw")
    texts = [f"a good film number {i}" for i in range(4)]
    with ResultsFile(tmp_path / "r.jsonl") as results:
        budget = results.open_budget(max_queries=100_000)
        async with AnchorsExplainer(clf, seed=0, budget=budget) as explainer:
            await explain_resumable(explainer, texts, results)
        budget.close()
    journal = tmp_path / "r.jsonl.budget.jsonl"
    whole = journal.read_bytes()
    journal.write_bytes(b"".join(whole.splitlines(keepends=True)[:-4]))
    with ResultsFile(tmp_path / "r.jsonl") as results, pytest.raises(ConfigError, match="was cut"):
        results.open_budget()
    journal.unlink()
    with ResultsFile(tmp_path / "r.jsonl") as results, pytest.raises(ConfigError, match="is missing"):
        results.open_budget()
    journal.write_bytes(whole)
    with ResultsFile(tmp_path / "r.jsonl") as results, results.open_budget() as budget:
        assert budget.settled.queries == sum(exp.meta.queries for _, exp in results.explanations())


@pytest.mark.parametrize(
    "line,why",
    [
        (b"{}", "not one reserve"), (b"[1]", "not one reserve"), (b"\xff\xfe binary", "codec"),
        (b'{"r": 2, "q": -453, "p": 0, "c": 0, "usd": "0"}', "q must be"),
        (b'{"r": 2, "q": 1, "p": 0, "c": 0, "usd": "-5"}', "usd must be"),
        (b'{"r": 2, "q": 1, "p": 0, "c": 0, "usd": "NaN"}', "usd must be"),
        (b'{"s": 7, "q": 1, "p": 0, "c": 0, "usd": "0"}', "not open"), (b'{"r": 1, "q": 1, "p": 0, "c": 0, "usd": "0"}',
        "not after"), (b'{"r": 2, "s": 1}', "not one reserve"),
    ],
)  # fmt: skip
def test_a_damaged_journal_line_is_an_error_naming_the_file_and_line(tmp_path, line, why):
    journal = tmp_path / "b.jsonl"
    journal.write_bytes(b'{"r": 1, "q": 3, "p": 0, "c": 0, "usd": "0"}\n' + line + b"\n")
    with pytest.raises(ConfigError, match=f"b.jsonl:2 is not a budget journal record .*{why}") as caught:
        Budget(max_queries=100, journal=journal)
    assert "put back the line" in str(caught.value) and "a new --out" in str(caught.value)  # how to go on


@pytest.mark.parametrize(
    "bill",
    [Charge(queries=1, prompt_tokens=10, completion_tokens=1, usd=Decimal("-0.02"), cache_read_tokens=100),
     Charge(queries=1, prompt_tokens=10**9, completion_tokens=1, usd=Decimal("1250")),
     Charge(queries=-3, prompt_tokens=-1, usd=Decimal("NaN"))],
)  # fmt: skip
async def test_a_bill_that_cannot_be_true_is_journaled_at_its_larger_parts_and_read_back(tmp_path, bill):
    journal = tmp_path / "b.jsonl"
    worst = Charge(queries=1, prompt_tokens=20, completion_tokens=1, usd=Decimal("0.0001"))
    with Budget(max_usd="0.001", journal=journal) as budget:
        budget.settle(await budget.reserve(worst), bill)
    state = read_journal(journal)  # its own reader takes every record it wrote
    billed_past = bill.prompt_tokens > worst.prompt_tokens  # a bill of more than was sent: recorded as billed
    counted = replace(worst, prompt_tokens=bill.prompt_tokens, usd=bill.usd) if billed_past else worst
    assert state.settled == replace(counted, disputed=1) and state.open == Charge()
    with Budget(max_usd="0.001", journal=journal) as again:  # read back; the run goes on under the same cap
        assert again.settled.usd == counted.usd and bool(again.passed) == billed_past


# -- the budget: a journal across restarts, a cap per explanation --------------------


async def test_a_journal_counts_what_earlier_processes_spent_and_held(tmp_path):
    journal = tmp_path / "b.jsonl"
    first = Budget(max_queries=100, journal=journal)
    done = await first.reserve(Charge(queries=30))
    first.settle(done, Charge(queries=20))
    await first.reserve(Charge(queries=40))  # in flight when the process dies: counted at its worst case
    refused = await first.reserve(Charge(queries=10))
    first.release(refused)
    first.close()
    with open(journal, "a") as handle:
        handle.write('{"r": 9, "q"')  # cut short
    second = Budget(max_queries=100, journal=journal)
    assert second.settled.queries == 60
    with pytest.raises(BudgetExceeded):
        await second.reserve(Charge(queries=41))
    second.settle(await second.reserve(Charge(queries=40)), Charge(queries=40))
    second.close()
    with Budget(max_queries=1000, journal=journal) as third:
        assert third.settled.queries == 100


async def test_a_child_budget_holds_its_own_cap_and_its_parents():
    run = Budget(max_usd="1.00")
    one = Budget(max_usd="0.30", parent=run)
    held = await one.reserve(Charge(usd=Decimal("0.25")))
    with pytest.raises(BudgetExceeded):
        await one.reserve(Charge(usd=Decimal("0.10")))  # its own cap
    one.settle(held, Charge(usd=Decimal("0.20")))
    assert run.settled.usd == Decimal("0.20") and run.reserved.usd == 0
    other = Budget(max_usd="0.90", parent=run)
    with pytest.raises(BudgetExceeded):
        await other.reserve(Charge(usd=Decimal("0.85")))  # the parent's cap
    assert other.reserved.usd == 0 and run.reserved.usd == 0
    other.release(await other.reserve(Charge(usd=Decimal("0.5"))))
    assert run.reserved.usd == 0


# -- killed at random points --------------------------------------------------------


def _run(out: Path, cap: int, kill_after: float | None = None) -> int | None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(SCRIPT), str(out), str(cap)], env=env, stderr=subprocess.DEVNULL)
    if kill_after is None:
        return process.wait(timeout=300)
    time.sleep(kill_after)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    return None


def _results(out: Path) -> dict[int, dict]:
    return {index: r["explanation"]["data"] for index, r in read_results(out).items()}


def _spent(out: Path) -> int:
    return read_journal(f"{out}.budget.jsonl").spent.queries


@pytest.mark.slow
def test_killed_at_random_points_and_resumed_a_run_ends_as_one_never_past_its_cap(tmp_path):
    assert _run(tmp_path / "whole.jsonl", 100_000) == 0
    whole = _results(tmp_path / "whole.jsonl")
    cap = _spent(tmp_path / "whole.jsonl") * 2 // 3
    for seed in range(5):
        out = tmp_path / f"killed-{seed}.jsonl"
        rng = random.Random(seed)
        for _ in range(3):
            _run(out, cap, kill_after=rng.uniform(2.0, 8.0))
            assert _spent(out) <= cap
        assert _run(out, cap) == 3  # the cap stops it, however often it was killed
        assert _spent(out) <= cap and len(_results(out)) < len(whole)
        assert _run(out, 100_000) == 0  # a higher cap carries on
        assert _results(out) == whole, seed


def test_off_a_terminal_progress_is_a_line_every_few_percent_with_a_real_rate():
    import io

    from llm_anchors.explain import ProgressBar

    exp = AnchorsExplainer(FunctionClassifier(keywords, name="kw"), seed=0).explain_sync("a good film")
    stream = io.StringIO()
    with ProgressBar(40, done=20, stream=stream, every=0.25) as progress:
        for i in range(20):
            time.sleep(0.01)
            progress.update(20 + i, exp)
    lines = stream.getvalue().splitlines()
    assert [line.split(" inputs")[0] for line in lines] == ["30/40", "40/40"]
    rate = float(lines[0].split(" · ")[-1].split(" inputs/s")[0])
    assert 0 < rate <= 100  # ten inputs, at least 10 ms apart
    assert "memory hits" not in lines[-1] and f"{20 * exp.meta.queries:,} queries" in lines[-1]
    assert f"projected ~{20 * exp.meta.queries:,} queries" in lines[0] and "projected" not in lines[-1]


def test_given_the_run_s_ledger_progress_shows_what_the_whole_run_spent():
    import io

    from llm_anchors.explain import ProgressBar

    exp = AnchorsExplainer(FunctionClassifier(keywords, name="kw"), seed=0).explain_sync("a good film")
    ledger = Charge(queries=1234, usd=Decimal("0.5"))  # earlier sessions and cut-short work included
    stream = io.StringIO()
    with ProgressBar(2, stream=stream, every=0.5, spent=lambda: ledger) as progress:
        progress.update(0, exp)
    assert "$0.5 · 1,234 queries in all" in stream.getvalue()
    assert f"projected ~{1234 + exp.meta.queries:,} queries" in stream.getvalue()  # the run's, plus one more input


def test_the_run_summary_says_how_much_the_provider_s_cache_served_and_saved():
    from llm_anchors.run import RunReport

    spent = Charge(queries=10, prompt_tokens=1000, completion_tokens=10, usd=Decimal("0.0002"), cache_read_tokens=800)
    line = RunReport(10, 0, done_now=10, saved_by_caching=Decimal("0.00009"), spent=spent).summary()
    assert "80% of the prompt tokens cached, which saved $0.000090 now" in line
    assert "cached" not in RunReport(10, 0, done_now=10, spent=replace(spent, cache_read_tokens=0)).summary()


def test_the_summary_says_passed_when_the_cap_was_passed_and_reached_when_it_was_reached():
    from llm_anchors.run import RunReport

    reached = RunReport(10, 2, done_now=3, stopped="budget", spent=Charge(queries=5, usd=Decimal("1")))
    passed = RunReport(10, 2, done_now=3, stopped="budget", passed="settled spend passed the cap: $1.2 > max_usd $1")
    assert "the run's cap is reached" in reached.summary() and "passed" not in reached.summary()
    assert "passed the cap (settled spend passed the cap: $1.2" in passed.summary()
    faults = RunReport(10, 0, done_now=10, failed=1, failed_now=1, faulted=2, spent=Charge(queries=9, disputed=3))
    said = faults.summary()
    assert said.startswith("7/10 inputs explained (7 now, 0 before); 1 could not be explained")
    assert "2 failed on the model's errors" in said
    assert "3 calls reported usage that could not be true" in said
