"""The real vLLM (CPU build, Gemma 3 270M converted from the packaged GGUF): the main job, a document,
infill, the cap and a server killed mid-run. Marked ``vllm`` by its fixture (tests/conftest.py)."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_anchors import AnchorsExplainer, LLMClassifier
from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.backends.vllm import SERVED_NAME, VllmServer
from llm_anchors.extend import PromptTooLongError
from llm_anchors.money.journal import read_journal
from tests.test_cli import cli, lines

POSITIVE = "an exhilarating and beautifully acted film"
NEGATIVE = "a tedious , clumsy and painfully unfunny comedy"
REVIEWS = [POSITIVE, NEGATIVE, "a gorgeous , witty and moving film"]


def vllm_classifier(url: str) -> LLMClassifier:
    backend = OpenAICompatibleBackend(url, SERVED_NAME, endpoint="completions", max_request_size=8)
    return LLMClassifier(backend, DEFAULT_PROMPT, DEFAULT_LABELS)


def server_args(url: str) -> list[str]:
    return ["--base-url", url, "--model", SERVED_NAME, "--free"]


async def test_vllm_is_recognised_and_its_labels_read_exactly(vllm_url):
    clf = vllm_classifier(vllm_url)
    try:
        vllm = await clf.backend.vllm()
        prompts = [clf.render(POSITIVE), clf.render(NEGATIVE)]
        answers = await clf.backend.complete(prompts, clf.params)
        labels = (await clf.classify([POSITIVE, NEGATIVE])).labels
        with pytest.raises(PromptTooLongError, match="4,096"):
            await clf.classify(["word " * 5000])
    finally:
        await clf.aclose()
    assert vllm is not None and vllm.version == "0.32.0" and vllm.max_model_len == 4096
    assert labels == ["positive", "negative"]
    for item, label in zip(answers.items, labels, strict=True):
        alternatives = item.alternatives or {}
        assert {" positive", " negative", "positive", "negative"} <= set(alternatives)  # every label's token
        assert 0.5 < sum(math.exp(v) for v in alternatives.values()) <= 1.001  # the labels' tokens, each once
        assert max(alternatives, key=alternatives.__getitem__) == " " + label


async def test_the_main_job_explain_on_vllm(vllm_url):
    code, out = await cli("explain", POSITIVE, *server_args(vllm_url), "--json", "--seed", "0", stdout=True)
    assert code == 0, out
    exp = json.loads(out)
    data, meta = exp["data"], exp["meta"]
    assert data["label"] == "positive" and data["anchor"] and set(data["anchor"]) <= set(POSITIVE.split())
    assert data["precision"] >= 0.9 and 0 < meta["queries"] <= meta["samples"]


async def test_serve_vllm_starts_explains_and_stops_it(vllm_url):
    """The README's first command with --serve vllm: vLLM started here, the same anchor as on llama-server."""
    code, out = await cli("explain", "a charming , funny and moving film", "--serve", "vllm", "--json", stdout=True)
    assert code == 0, out
    exp = json.loads(out)
    assert exp["data"]["label"] == "positive" and exp["data"]["anchor"]  # funny, here
    assert set(exp["data"]["anchor"]) <= {"charming", "funny", "moving"}
    assert exp["meta"]["classifier"].startswith(f"llm:openai:{SERVED_NAME}:completions")


async def test_estimate_run_and_report_on_vllm(vllm_url, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in REVIEWS))
    out = tmp_path / "out.jsonl"
    common = [str(source), "--out", str(out), *server_args(vllm_url), "--max-queries", "20000", "--seed", "0"]
    code, err = await cli("estimate", *common)
    assert code == 0, err
    code, err = await cli("run", *common)
    assert code == 0 and f"{len(REVIEWS)}/{len(REVIEWS)} inputs explained" in err, err
    records = sorted(lines(out), key=lambda r: r["index"])
    assert [r["explanation"]["data"]["label"] for r in records[:2]] == ["positive", "negative"]
    code, err = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    assert code == 0 and (tmp_path / "report.html").stat().st_size > 10_000, err


async def test_a_document_on_vllm_is_explained_coarse_to_fine(vllm_url):
    document = (
        "I saw it on a rainy Sunday with two friends. The acting is wonderful and the story is deeply moving. "
        "We had dinner afterwards at a small place nearby."
    )
    async with AnchorsExplainer(vllm_classifier(vllm_url), seed=0) as explainer:
        exp = await explainer.explain(document)
    assert exp.data.label == "positive" and exp.data.coarse is not None
    assert exp.meta.queries > 0 and exp.data.anchor


async def test_infill_fills_on_vllm_and_its_anchor_holds(vllm_url):
    clf = vllm_classifier(vllm_url)
    async with AnchorsExplainer(clf, seed=0, perturbation="infill") as explainer:
        exp = await explainer.explain(POSITIVE)
        fresh = await explainer.estimate_precision(POSITIVE, exp.data.positions, n=200, seed=99)
        sent = list(explainer.cache.labels(clf.identity))
    assert exp.meta.infill is not None and exp.meta.infill.settled.queries == 4  # one blank per content word
    assert exp.data.label == "positive" and exp.data.success and fresh >= 0.85  # (the empty anchor, here)
    original = set(POSITIVE.split()) | {"UNK"}
    assert any(set(t.split()) - original for t in sent)  # the model read the filler's words


async def test_the_cap_holds_on_vllm(vllm_url, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in REVIEWS))
    out = tmp_path / "out.jsonl"
    code, err = await cli("run", str(source), "--out", str(out), *server_args(vllm_url), "--max-queries", "60")
    assert code == 3, err  # EXIT_CAP
    journal = read_journal(f"{out}.budget.jsonl")
    assert journal.spent.queries <= 60 and journal.open.queries == 0, journal


def _kill_tree(pid: int) -> None:
    """SIGKILL a vLLM server and the engine process it started."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    for child in [pid, *map(int, children)]:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_vllm_killed_mid_run_loses_nothing_and_the_same_command_finishes(tmp_path, vllm_url):
    source = tmp_path / "in.jsonl"
    texts = [*REVIEWS, "funny , smart and beautifully made", "an ugly , tedious waste of time"]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    server = VllmServer()
    server.start()
    port = server.port
    try:
        command = [sys.executable, "-m", "llm_anchors.cli", "run", str(source), "--out", str(out),
                   *server_args(server.base_url), "--max-queries", "50000", "--max-attempts", "2"]  # fmt: skip
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600
        while not (out.exists() and out.read_text().count("\n") >= 2) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.pid is not None
        _kill_tree(server.pid)
        _, err = process.communicate(timeout=600)
        # EXIT_UNAVAILABLE: calls failed in a row stop the run once, instead of paying the wait once per input
        assert process.returncode == 6 and "stopped: the model's server failed" in err, err
        kept = [json.loads(line) for line in out.read_text().splitlines()[1:]]
        done = [r for r in kept if "explanation" in r]
        assert 1 <= len(done) < len(texts)
        server.stop()
        server = VllmServer(port=port)
        server.start()
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert finished.returncode == 0, finished.stderr
    finally:
        server.stop()
    records = lines(out)
    assert sorted(r["index"] for r in records if "explanation" in r) == list(range(len(texts)))
    again = {r["index"]: r for r in records}
    assert all(again[r["index"]] == r for r in done)  # nothing finished was redone


async def test_vllm_gives_each_label_a_probability_the_label_read_the_likeliest(vllm_url):
    clf = vllm_classifier(vllm_url)
    try:
        batch = await clf.classify(REVIEWS)
    finally:
        await clf.aclose()
    assert batch.probabilities is not None
    for label, probabilities in zip(batch.labels, batch.probabilities, strict=True):
        assert probabilities is not None and set(probabilities) == {"negative", "positive"}
        assert 0.5 < sum(probabilities.values()) <= 1.001  # the labels' tokens, with and without a space
        assert probabilities[label] == max(probabilities.values())
