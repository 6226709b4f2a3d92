import pytest

from llm_anchors import AnchorsExplainer, Explanation, FunctionClassifier
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
    assert "\033[1;7mgood\033[0m" in colored


def test_usage_errors_exit_with_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["explain"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["explain", "x", "--endpoint", "nope"])


def test_unreachable_server_is_a_clear_error(capsys):
    args = ["--max-queries", "5", "--max-attempts", "1", "--timeout", "5"]
    code = main(["explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", *args])
    assert code == 2
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


@pytest.mark.integration
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
    command = [sys.executable, "-m", "llm_anchors.cli", "run", str(tmp_path / "reviews.jsonl"), "--out", str(out),
               "--base-url", llama_url, "--max-queries", "20000", "--seed", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out.exists() and out.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    kept = out.read_text().splitlines()
    assert 1 <= len(kept) < len(REVIEWS) and (tmp_path / "results.jsonl.memory" / "CURRENT").exists()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"{len(REVIEWS)}/{len(REVIEWS)} inputs explained" in done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in lines) == list(range(len(REVIEWS)))
    assert lines[: len(kept)] == [json.loads(line) for line in kept]  # nothing finished was redone
    labels = {r["index"]: r["explanation"]["data"]["label"] for r in lines}
    assert labels[0] == "positive" and labels[1] == "negative"


def test_run_with_nothing_left_to_do_starts_no_server(tmp_path, capsys):
    import json

    from llm_anchors.core import ResultsFile, input_hash

    (tmp_path / "in.txt").write_text("a good film\n")
    with ResultsFile(tmp_path / "out.jsonl") as results:
        results.check_journal().touch()
        results.check_config({"explainer": "MAnchorsExplainer"})
        results.append({"index": 0, "input_sha256": input_hash("a good film"), "explanation": {}})
    args = [
        "run",
        str(tmp_path / "in.txt"),
        "--out",
        str(tmp_path / "out.jsonl"),
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]
    assert main(args) == 0
    assert "all 1 inputs are done already (1 explained, 0 failed)" in capsys.readouterr().err
    assert (tmp_path / "out.jsonl.budget.jsonl").read_text() == ""  # nothing was reserved: no server was asked
    (tmp_path / "in.txt").write_text("another film\n")
    assert main(args) == 2 and "not this input" in capsys.readouterr().err
    assert json.loads((tmp_path / "out.jsonl").read_text().splitlines()[1])["index"] == 0  # kept


@pytest.mark.integration
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
               "--base-url", llama_url, "--no-memory", "--ray", "--workers", "2", "--max-queries", "20000"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in lines) == [0, 1, 2]
    # One ledger counted every worker's billed calls (a timed-out call resent is billed twice).
    spent = sum(Explanation.from_json(json.dumps(r["explanation"])).meta.cost.settled.queries for r in lines)
    assert f"{spent:,} queries in all" in done.stderr
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "all 3 inputs are done already" in again.stderr
