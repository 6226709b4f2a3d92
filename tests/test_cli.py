import pytest

from llm_anchors import AnchorsExplainer, ConfigError, Explanation, FunctionClassifier
from llm_anchors.cli import main, render
from tests.conftest import needs_all


@pytest.fixture(scope="module")
def exp():
    e = AnchorsExplainer(FunctionClassifier(needs_all("good", "great")), seed=0)
    return e.explain_sync("a good and great film, really")


def test_render_marks_the_anchor(exp):
    plain = render(exp)
    assert plain.splitlines()[0] == "a [good] and [great] film, really"
    assert "precision" in plain and "coverage" in plain and "cost        $0" in plain
    colored = render(exp, color=True)
    assert "\033[1;7mgood\033[22;27m" in colored


def test_usage_errors_exit_with_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["explain", "x", "--endpoint", "nope"])


def test_unreachable_server_is_a_clear_error(capsys):
    args = ["--max-queries", "5", "--max-attempts", "1", "--timeout", "5"]
    code = main(["explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", *args])
    assert code == 6  # the server did not answer: the same command goes on once it does
    err = capsys.readouterr().err
    assert err.startswith("error:") and "127.0.0.1:9" in err


def test_a_missing_prompt_file_is_a_clear_error(capsys, tmp_path):
    code = main(["explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", "--prompt", f"@{tmp_path}/none.txt"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --prompt @") and "none.txt" in err and "Traceback" not in err


REVIEWS = [
    "a gorgeous, witty and moving film",
    "dull, lifeless and far too long",
    "the cast is wonderful and the story is touching",
    "a boring mess with no reason to exist",
    "funny, smart and beautifully made",
    "an ugly, tedious waste of time",
]


def test_run_on_the_real_llm_is_stopped_by_sigterm_and_carries_on(llama_url, tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps({"text": r}) + "\n" for r in REVIEWS))
    out = tmp_path / "results.jsonl"
    command = [
        sys.executable,
        "-m",
        "llm_anchors.cli",
        "run",
        str(tmp_path / "reviews.jsonl"),
        "--out",
        str(out),
        "--base-url",
        llama_url,
        "--max-queries",
        "20000",
        "--seed",
        "0",
    ]  # fmt: skip (the memory on: the default)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out.exists() and out.read_text().count("\n") >= 2) and time.monotonic() < deadline:  # config, 1
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    kept = out.read_text().splitlines()[1:]  # after the run's configuration
    assert 1 <= len(kept) < len(REVIEWS) and (tmp_path / "results.jsonl.memory" / "CURRENT").exists()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"{len(REVIEWS)}/{len(REVIEWS)} inputs explained" in done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert sorted(r["index"] for r in lines) == list(range(len(REVIEWS)))
    assert lines[: len(kept)] == [json.loads(line) for line in kept]  # nothing finished was redone
    labels = {r["index"]: r["explanation"]["data"]["label"] for r in lines}
    assert labels[0] == "positive" and labels[1] == "negative"


def test_run_with_nothing_left_to_do_starts_no_server(tmp_path, capsys):
    import json

    from llm_anchors import cli as commands
    from llm_anchors.run import ResultsFile, input_hash, run_config

    (tmp_path / "in.txt").write_text("a good film\n")
    args = [
        "run",
        str(tmp_path / "in.txt"),
        "--out",
        str(tmp_path / "out.jsonl"),
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]
    options = commands.parser().parse_args(args)  # the configuration this command records
    kind, settings = commands._explainer(options)
    with kind(commands.Model(options).classifier(options.base_url, "default"), **settings) as explainer:
        config = run_config(explainer, model={"base_url": options.base_url, "served": None})
    with ResultsFile(tmp_path / "out.jsonl") as results:
        results.check_journal().touch()
        results.check_config(config)
        results.append({"index": 0, "input_sha256": input_hash("a good film"), "explanation": {}})
    assert main(args) == 0
    assert "all 1 inputs are done already (1 explained, 0 failed)" in capsys.readouterr().err
    assert (tmp_path / "out.jsonl.budget.jsonl").read_text() == ""  # nothing was reserved: no server was asked
    (tmp_path / "in.txt").write_text("another film\n")
    assert main(args) == 2 and "not this input" in capsys.readouterr().err
    assert json.loads((tmp_path / "out.jsonl").read_text().splitlines()[1])["index"] == 0  # kept


@pytest.mark.slow
async def test_a_memory_the_last_run_could_not_save_is_saved_by_the_same_command(tmp_path):
    import shutil

    from llm_anchors.memory.store import saved_entries
    from tests.fault_server import FaultServer

    out, memory = tmp_path / "out.jsonl", tmp_path / "out.jsonl.memory"
    async with FaultServer(answer=keyword_sentiment) as server:
        args = [*(a for a in run_args(server.base_url, inputs(tmp_path, SENTENCES[:4]), out) if a != "--anchors")]
        assert (await cli(*args, "--max-queries", "100000"))[0] == 0
        entries = saved_entries(memory)
        assert entries > 0
        shutil.rmtree(memory)  # as if its last save had failed
        served = server.prompts_served
        code, err = await cli(*args, "--max-queries", "100000")
        assert code == 0 and "done already" not in err and saved_entries(memory) == entries, err
        assert server.prompts_served == served  # nothing explained again


def test_run_on_ray_workers_explains_every_input_once_against_the_real_llm(llama_url, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'llm-anchors[ray]'")
    (tmp_path / "reviews.txt").write_text("".join(r + "\n" for r in REVIEWS[:3]))
    out = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "llm_anchors.cli", "run", str(tmp_path / "reviews.txt"), "--out", str(out),
               "--base-url", llama_url, "--anchors", "--ray", "--workers", "2", "--max-queries", "20000"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]]  # after the run's configuration
    assert sorted(r["index"] for r in lines) == [0, 1, 2]
    # One ledger counted every worker's billed calls (a timed-out call resent is billed twice).
    spent = sum(Explanation.from_json(json.dumps(r["explanation"])).meta.cost.settled.queries for r in lines)
    assert f"{spent:,} queries in all" in done.stderr
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "all 3 inputs are done already" in again.stderr


# -- a run keeps its promises: one writer, a cap that prices what it caps, one configuration -----

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
PROMPT = "Review: {text}\nSentiment:"
SENTENCES = [f"a good and great film number {i}" for i in range(6)] + [f"a dull film number {i}" for i in range(6)]


def keyword_sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


async def cli(
    *args: str, fsize: int | None = None, stdout: bool = False, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """``llm-anchors ARGS`` in a subprocess, awaited (the test's fake server keeps answering meanwhile):
    its exit code and its stderr (with ``stdout``: its stdout); ``env``: its environment (default: this
    process's)."""
    import asyncio
    import os
    import resource
    import signal
    import sys

    def limit() -> None:  # a disk that fills up: every write past fsize bytes of a file fails
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**(env if env is not None else os.environ), "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_anchors.cli", *args, env=env,
        stdout=asyncio.subprocess.PIPE if stdout else asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, preexec_fn=limit if fsize is not None else None,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, (out if stdout else err).decode()


def inputs(tmp_path, texts=SENTENCES, name="in.jsonl"):
    import json

    path = tmp_path / name
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return str(path)


def lines(path) -> list[dict]:
    from llm_anchors.run import read_results

    return list(read_results(path).values())


def report_rows(page: str) -> list[dict]:
    from tests.test_report import data

    return data(page)


def run_args(url: str, source: str, out, *more: str) -> list[str]:
    return ["run", source, "--out", str(out), "--base-url", url, "--prompt", PROMPT, "--anchors", *more]


async def test_two_runs_on_one_out_at_once_never_pass_the_cap_nor_write_an_input_twice(tmp_path):
    import asyncio

    from tests.fault_server import FaultServer

    cap = 300
    async with FaultServer(answer=keyword_sentiment, latency=(0.01, 0.02)) as server:
        args = run_args(server.base_url, inputs(tmp_path), tmp_path / "out.jsonl", "--max-queries", str(cap))
        (a, a_err), (b, b_err) = await asyncio.gather(cli(*args), cli(*args))
        served = server.prompts_served
    indices = [r["index"] for r in lines(tmp_path / "out.jsonl")]
    assert served <= cap, (served, a_err, b_err)
    assert len(indices) == len(set(indices))
    assert 2 in (a, b) and "another run is writing" in a_err + b_err  # the second one stops at once


@pytest.mark.parametrize("model", ["llama-3.1-8b-instruct", "my-local-finetune"])
async def test_a_dollar_cap_refuses_a_model_it_cannot_price_before_any_query(tmp_path, model):
    from tests.fault_server import FaultServer

    async with FaultServer(answer=keyword_sentiment) as server:
        args = run_args(server.base_url, inputs(tmp_path), tmp_path / "out.jsonl", "--model", model)
        code, err = await cli(*args, "--max-usd", "0.0001")
        assert server.prompts_served == 0
        assert code == 2 and "no price" in err and "--price-file" in err and "--free" in err
        assert (await cli(*args, "--max-usd", "0.0001", "--free"))[0] == 0  # declared free: the cap never binds


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "gpt-4o-2024-08-06", "claude-3-5-haiku-latest"])
async def test_a_model_behind_a_loopback_proxy_is_priced_as_its_family_and_its_dollar_cap_binds(tmp_path, model):
    from decimal import Decimal

    from llm_anchors.money import read_journal
    from tests.fault_server import FaultServer

    async with FaultServer(answer=keyword_sentiment) as server:
        out = tmp_path / "out.jsonl"
        code, err = await cli(
            *run_args(server.base_url, inputs(tmp_path), out, "--model", model, "--max-usd", "0.0001")
        )
    spent = read_journal(f"{out}.budget.jsonl").spent
    assert code == 3 and "cap is reached" in err
    assert Decimal(0) < spent.usd <= Decimal("0.0001") and spent.queries < 600


async def test_a_journal_deleted_or_cut_beside_the_results_is_refused_not_read_as_nothing_spent(tmp_path):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    journal = tmp_path / "out.jsonl.budget.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        args = run_args(server.base_url, inputs(tmp_path), out)
        assert (await cli(*args, "--max-queries", "400"))[0] == 3
        served, whole = server.prompts_served, journal.read_bytes()
        journal.unlink()
        code, err = await cli(*args, "--max-queries", "400")
        assert code == 2 and "missing" in err and "Traceback" not in err
        journal.write_bytes(b"".join(whole.splitlines(keepends=True)[:3]))  # cut at a line's end
        code, err = await cli(*args, "--max-queries", "400")
        assert code == 2 and "was cut" in err
        assert server.prompts_served == served  # refused before any query
        journal.write_bytes(whole)
        assert (await cli(*args, "--max-queries", "100000"))[0] == 0  # the whole journal back: it carries on


@pytest.mark.parametrize(
    "change,named",
    [
        (["--seed", "1"], "seed: 0 → 1"),
        (["--threshold", "0.9"], "threshold"),
        (["--prompt", "Text: {text}\nReview: label:"], "classifier.prompt"),
        (["--labels", "negative,positive,neutral"], "classifier.labels"),
        (["--model", "another-model"], "classifier.llm"),
        (["--max-words", "300", "--seed", "2"], "seed"),
        (["--p-hide", "uniform"], "sampler.p_hide: 'auto' → 'uniform'"),
        (["--unit", "sentence"], "sampler.unit"),
    ],
)
async def test_a_resume_with_another_configuration_is_refused_naming_what_differs(tmp_path, change, named):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        base = run_args(server.base_url, inputs(tmp_path), out)
        assert (await cli(*base, "--max-queries", "100"))[0] == 3
        before, served = out.read_bytes(), server.prompts_served
        other = base[: base.index("--prompt")] + base[base.index("--prompt") + 2 :] if "--prompt" in change else base
        code, err = await cli(*other, *change, "--max-queries", "100000")
        assert code == 2 and "another configuration" in err and named in err, err
        assert out.read_bytes() == before and server.prompts_served == served
        assert (await cli(*base, "--max-queries", "100000"))[0] == 0  # caps and --max-words may change


async def test_a_resume_against_another_server_or_explainer_is_refused(tmp_path):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment, served=["model-a"]) as first:
        base = run_args(first.base_url, inputs(tmp_path), out)
        assert (await cli(*base, "--max-queries", "100"))[0] == 3
        port = int(first.base_url.rsplit(":", 1)[1].split("/")[0])
        code, err = await cli(*[a for a in base if a != "--anchors"], "--max-queries", "100000")
        assert code == 2 and "explainer: 'AnchorsExplainer' → 'MAnchorsExplainer'" in err
    async with FaultServer(answer=keyword_sentiment, served=["model-b"], port=port) as second:  # same address
        code, err = await cli(*base, "--max-queries", "100000")
        assert code == 2 and "classifier.model.served" not in err and "model.served" in err and "model-b" in err
        assert second.prompts_served == 0
    async with FaultServer(answer=keyword_sentiment, served=["model-a"]) as elsewhere:
        code, err = await cli(*run_args(elsewhere.base_url, inputs(tmp_path), out), "--max-queries", "100000")
        assert code == 2 and "model.base_url" in err


@pytest.mark.slow
async def test_inputs_that_cannot_be_explained_are_failed_lines_and_the_run_goes_on(tmp_path):
    import json

    from tests.fault_server import FaultServer

    long = " ".join(f"word{i}" for i in range(300)) + " good great"
    texts = ["a good and great film", "", "!!! ... ???", long, "\ud800 a lone surrogate", "a dull film"]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))  # \ud800 escaped: valid JSON
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        args = run_args(server.base_url, str(source), out, "--max-queries", "100000", "--max-words", "256")
        code, err = await cli(*args)
        assert code == 0 and "2/6 inputs explained" in err and "4 could not be explained" in err, err
        failed = {r["index"]: r["failed"] for r in lines(out) if "failed" in r}
        assert sorted(failed) == [1, 2, 3, 4]
        assert "empty" in failed[1] and "no words" in failed[2] and "--max-words" in failed[3]
        assert "Unicode" in failed[4]
        assert not any("word1 " in p or "surrogate" in p for p in server.prompts)  # never sent, never paid
        served = server.prompts_served
        code, err = await cli(*args)  # again: nothing left, no server asked
        assert code == 0 and "all 6 inputs are done already (2 explained, 4 failed)" in err
        code, err = await cli(*args, "--max-words", "400")  # the long input is explainable now
        assert code == 0 and "3/6 inputs explained" in err and server.prompts_served > served
    indices = [r["index"] for r in lines(out)]
    assert sorted(set(indices)) == list(range(6)) and "explanation" in lines(out)[[*indices].index(3)]


@pytest.mark.parametrize("option", [["--timeout", "nan"], ["--timeout", "inf"], ["--timeout", "0"],
                                    ["--max-usd", "nan"], ["--max-queries", "-1"], ["--threshold", "1.5"],
                                    ["--workers", "0"], ["--max-words", "0"], ["--seed", "-3"],
                                    ["--p-hide", "1"], ["--p-hide", "0"], ["--p-hide", "beta"]])  # fmt: skip
def test_impossible_numbers_are_refused_before_anything_starts(tmp_path, option, capsys):
    try:  # a number of no kind is a usage error; one its owner bounds (τ, p_hide), refused by it
        code = main(run_args("http://127.0.0.1:9/v1", inputs(tmp_path), tmp_path / "out.jsonl", *option))
    except SystemExit as exited:
        code = exited.code
    assert code == 2 and "must be" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("content", ['{"default": {"input": "nan", "output": 1}}', "[]", "{"])
def test_a_bad_price_file_is_refused_before_anything_starts(tmp_path, content, capsys):
    (tmp_path / "prices.json").write_text(content)
    args = run_args("http://127.0.0.1:9/v1", inputs(tmp_path), tmp_path / "out.jsonl")
    assert main([*args, "--price-file", str(tmp_path / "prices.json"), "--max-usd", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "prices.json" in err and "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_memory_that_is_a_file_and_an_out_that_is_a_directory_are_refused_before_anything_starts(tmp_path, capsys):
    (tmp_path / "memory").write_text("not a directory")
    args = run_args("http://127.0.0.1:9/v1", inputs(tmp_path), tmp_path / "out.jsonl")
    args.remove("--anchors")
    assert main([*args, "--memory", str(tmp_path / "memory")]) == 2
    assert "is a file" in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()
    (tmp_path / "dir").mkdir()
    assert main(run_args("http://127.0.0.1:9/v1", inputs(tmp_path), tmp_path / "dir")) == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.slow
async def test_a_full_disk_stops_the_run_cleanly_and_the_same_command_finishes_it(tmp_path):
    import warnings

    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    texts = [f"{s} and more" for s in SENTENCES] * 4  # ~2 KB a line: the results outgrow the disk
    async with FaultServer(answer=keyword_sentiment) as server:
        args = run_args(server.base_url, inputs(tmp_path, texts), out, "--max-queries", "100000")
        code, err = await cli(*args, fsize=40_000)  # room for SQLite's 32 KB index, not for every result
        assert code == 5 and "cannot write" in err and "stopped after spending" in err and "Traceback" not in err
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its last line is likely cut short: the next run drops it
            done = len(lines(out))
        assert 0 < done < len(texts)
        code, err = await cli(*args)
        assert code == 0, err
    indices = [r["index"] for r in lines(out)]
    assert sorted(indices) == list(range(len(texts)))


def test_version(capsys):
    from llm_anchors import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"llm-anchors {__version__}"


def test_run_and_estimate_certify_strictly_unless_told_and_explain_keeps_anchors_criterion():
    from llm_anchors.cli import _settings
    from llm_anchors.cli.options import parser as _parser

    def certify(*argv: str) -> str:
        return _settings(_parser().parse_args(list(argv)))["search"].certify

    assert certify("run", "in.jsonl") == certify("estimate", "in.jsonl") == "strict"
    assert certify("run", "in.jsonl", "--certify", "default") == "default"
    assert certify("explain", "a film") == "default" and certify("explain", "a film", "--certify", "strict") == "strict"


def test_the_perturbation_options_make_the_sampler_the_explanations_name():
    from llm_anchors.cli import _settings
    from llm_anchors.cli.options import parser as _parser

    def sampler(*argv: str):
        return _settings(_parser().parse_args(["explain", "a film", *argv]))["sampler"]

    default = sampler()
    assert (default.unit, default.p_hide, default.max_words) == ("auto", "auto", 20_000)
    assert default.describe(default.features("a film")).endswith("probability 0.5, independently")  # Anchors' own
    chosen = sampler("--unit", "sentence", "--p-hide", "uniform", "--max-words", "5000")
    assert (chosen.unit, chosen.p_hide, chosen.max_words) == ("sentence", "uniform", 5000)
    assert "each sentence" in chosen.distribution and "U(0, 1)" in chosen.distribution
    assert sampler("--p-hide", "0.25").p_hide == 0.25


async def test_a_run_keeps_the_pinned_parts_of_its_json_lines_in_every_prompt(tmp_path):
    import json

    from tests.fault_server import FaultServer

    source = tmp_path / "in.jsonl"
    records = [
        {"text": "good great | a film I saw on a good day", "pinned": ["good great |"]},
        {"text": "a good and great film"},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        code, err = await cli(*run_args(server.base_url, str(source), out, "--max-queries", "100000"))
        assert code == 0, err
        pinned_prompts = [p for p in server.prompts if "I saw" in p or "UNK saw" in p or "I UNK" in p]
        assert pinned_prompts and all("good great |" in p for p in pinned_prompts)
    first, second = (r["explanation"]["data"] for r in sorted(lines(out), key=lambda r: r["index"]))
    assert first["anchor"] == [] and "great" not in first["features"]  # the pinned words hold the label alone
    assert first["query"] == records[0]["text"]
    assert second["anchor"] == ["good", "great"]


def test_a_pinned_field_that_is_not_a_list_is_refused_with_its_line(tmp_path):
    from llm_anchors.run.inputs import read_inputs

    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "a b"}\n{"text": "a b", "pinned": "a"}\n')
    with pytest.raises(ConfigError, match=r"in.jsonl:2: pinned must be a list"):
        read_inputs(str(source))
