import os

import pytest

from llm_anchors import AnchorsExplainer, LLMClassifier, RetryPolicy
from llm_anchors.backends.llamacpp import (
    DEFAULT_LABELS,
    LlamaServer,
    LlamaServerError,
    embedded_classifier,
    find_binary,
    find_model,
)
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.cli import main as cli_main
from llm_anchors.extend import CompletionParams
from tests.fault_server import FaultServer

pytestmark = pytest.mark.llm  # starts llama-server itself, or uses the running one


POSITIVE = "an exhilarating and beautifully acted film"
NEGATIVE = "a tedious , clumsy and painfully unfunny comedy"


def test_missing_binary_and_model_are_clear_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMA_SERVER_BIN", str(tmp_path / "nope"))
    with pytest.raises(LlamaServerError, match="LLAMA_SERVER_BIN"):
        find_binary()
    monkeypatch.setenv("LLM_ANCHORS_MODEL", str(tmp_path / "none.gguf"))
    with pytest.raises(LlamaServerError, match="LLM_ANCHORS_MODEL"):
        find_model()


def test_server_that_dies_at_start_reports_its_log(tmp_path):
    bad_model = tmp_path / "broken.gguf"
    bad_model.write_bytes(b"not a gguf file")
    server = LlamaServer(bad_model, startup_timeout=30)
    with pytest.raises(LlamaServerError, match="exited"):
        server.start()
    assert server.log_path is not None and server.log_path.exists()


def test_the_prompt_cache_is_bounded_and_the_servers_memory_readable():
    from llm_anchors.backends.llamacpp import LlamaServer

    server = LlamaServer(port=1, binary="/x", model="/y")
    assert server.command()[-2:] == ["--cache-ram", "256"]
    assert "--cache-ram" not in LlamaServer(port=1, binary="/x", model="/y", cache_ram_mib=None).command()
    assert server.rss_mb() != server.rss_mb()  # NaN: not running
    with LlamaServer() as running:
        assert 50 < running.rss_mb() < 4000


def test_start_health_and_clean_stop():
    with LlamaServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        process = server._process
        assert process is not None and process.poll() is None
    assert process.poll() is not None


async def test_real_model_labels_reviews(llama_url):
    clf = embedded_classifier(llama_url)
    batch = await clf.classify([POSITIVE, NEGATIVE, "a masterpiece", "a waste of time"])
    await clf.aclose()
    assert batch.labels == ["positive", "negative", "positive", "negative"]
    assert batch.charge.prompt_tokens > 0


async def test_the_real_model_gives_each_label_a_probability_the_label_read_the_likeliest(llama_url):
    clf = embedded_classifier(llama_url)
    batch = await clf.classify([POSITIVE, NEGATIVE, "a masterpiece", "a waste of time"])
    await clf.aclose()
    assert batch.probabilities is not None
    for label, probabilities in zip(batch.labels, batch.probabilities, strict=True):
        assert probabilities is not None and set(probabilities) == {"negative", "positive"}
        assert 0.0 <= sum(probabilities.values()) <= 1.0 + 1e-6
        assert probabilities[label] == max(probabilities.values()) and probabilities[label] > 0.5


@pytest.mark.parametrize(("text", "label"), [(POSITIVE, "positive"), (NEGATIVE, "negative")])
async def test_real_explanation_holds_on_fresh_samples(llama_url, text, label):
    async with AnchorsExplainer(embedded_classifier(llama_url), seed=0) as explainer:
        exp = await explainer.explain(text)
        assert exp.data.label == label and exp.data.success
        assert set(exp.data.anchor) <= set(text.split())
        # The 270M model calls almost every masked negative review negative, so the 100-sample
        # root may certify the empty anchor there; the positive review needs a word.
        assert exp.data.anchor or label == "negative"
        fresh = await explainer.estimate_precision(text, exp.data.positions, n=1000, seed=99)
    assert fresh >= 0.9
    assert exp.meta.queries > 0 and exp.meta.cost.settled.prompt_tokens > 0
    print(exp, f"fresh precision {fresh:.3f}")


async def test_the_backend_reads_llama_server_s_alternatives(llama_url):
    backend = OpenAICompatibleBackend(llama_url, "gemma", max_request_size=4)
    result = await backend.complete(["Review: great\nSentiment:"] * 3, CompletionParams())
    await backend.aclose()
    assert len(result.items) == 3 and all(item.alternatives for item in result.items)


async def test_faults_in_front_of_the_real_server_are_survived(llama_url):
    # The exact equality of a retried run is tested against a deterministic server in
    # test_openai_compat.py; a real LLM's log-probabilities move slightly with batch company,
    # so here the retried run must agree with the fault-free one label for label on what both saw.
    text = "a clever , funny and touching story"
    async with AnchorsExplainer(embedded_classifier(llama_url), seed=1) as clean:
        reference = await clean.explain(text)
    policy = RetryPolicy(max_attempts=10, initial_wait=0.01, max_wait=0.05, jitter=0.01)
    # Hangs past the client's timeout are tested against the fast fake server: a real 2-core
    # server's own latency varies too much for a short timeout to tell a hang from a slow batch.
    faults = ["429", "500", "503", "drop"]
    async with FaultServer(upstream=llama_url, fail_rate=0.2, seed=3, kinds=faults) as proxy:
        backend = OpenAICompatibleBackend(proxy.base_url, "gemma", timeout=60.0, max_request_size=8)
        clf = LLMClassifier(backend, embedded_classifier(llama_url).prompt, DEFAULT_LABELS)
        async with AnchorsExplainer(clf, seed=1, retry=policy) as explainer:
            exp = await explainer.explain(text)
    faults = sum(v for k, v in proxy.counts.items() if k != "ok")
    assert faults > 0 and exp.meta.cost.retries == faults
    assert exp.data.success and reference.data.success
    seen = explainer.cache.labels(clf.identity)
    ref = clean.cache.labels(clean.classifier.identity)
    common = seen.keys() & ref.keys()
    assert len(common) > 20
    # Near-tie masked texts flip with batch company: 59 of 61 agreed in one full-suite run, so
    # 0.97 sat inside the server's own noise. Labels misassigned by a retry would agree ~half the time.
    assert sum(seen[t] == ref[t] for t in common) / len(common) >= 0.9


def test_cli_explains_against_a_running_server(llama_url, capsys):
    assert cli_main(["explain", POSITIVE, "--base-url", llama_url, "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "[" in out and "precision" in out and "queries" in out
    assert cli_main(["explain", "", "--base-url", llama_url]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_json(llama_url, capsys):
    from llm_anchors import Explanation

    assert cli_main(["explain", POSITIVE, "--base-url", llama_url, "--json"]) == 0
    exp = Explanation.from_json(capsys.readouterr().out)
    assert exp.data.label == "positive" and exp.data.success and exp.meta.queries > 0


def test_cli_embedded_default(capsys):
    # No --base-url: the CLI starts its own llama-server and stops it afterwards.
    assert cli_main(["explain", "a masterpiece", "--seed", "0"]) == 0
    assert "label       positive" in capsys.readouterr().out


async def test_counted_prompt_tokens_match_the_servers_usage(llama_url):
    from llm_anchors.backends.token_counters import ServerTokenCounter
    from llm_anchors.datasets import load_rt_polarity

    texts, _ = load_rt_polarity()
    clf = embedded_classifier(llama_url)
    prompts = [clf.render(t) for t in texts[:10] + texts[-10:]]
    counter = ServerTokenCounter(llama_url)
    counted = await counter.count(prompts)
    await counter.aclose()
    reported = []
    for prompt in prompts:  # one prompt per request: the server's usage covers it
        result = await clf.backend.complete([prompt], CompletionParams())
        reported.append(result.usage.prompt_tokens)
    await clf.aclose()
    for c, r in zip(counted.tokens, reported, strict=True):
        assert abs(c - r) <= 0.01 * r
    assert not counted.estimated


def test_cli_budget_flags(llama_url, capsys, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"priced-model": {"input": "1.0", "output": "2.0", "as_of": "test"}}')
    # 12 queries: fewer than MAnchors' guided search needs on this sentence (30-odd)
    code = cli_main(
        ["explain", NEGATIVE, "--base-url", llama_url, "--model", "priced-model",
         "--price-file", str(prices), "--max-queries", "12", "--json"]
    )  # fmt: skip
    assert code == 0
    from llm_anchors import Explanation

    exp = Explanation.from_json(capsys.readouterr().out)
    assert exp.meta.budget_exhausted and exp.meta.queries <= 12
    assert exp.meta.cost.settled.usd > 0


def test_server_dies_with_a_killed_parent(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    script = (
        "from llm_anchors.backends.llamacpp import LlamaServer; import time, sys\n"
        "s = LlamaServer(); s.start(); print(s._process.pid, flush=True); time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
    parent.wait()
    parent.stdout.close()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("llama-server outlived its parent")


async def test_infill_fills_blanks_with_the_real_model_and_its_anchor_holds(llama_url):
    clf = embedded_classifier(llama_url)
    async with AnchorsExplainer(clf, seed=0, perturbation="infill") as explainer:
        exp = await explainer.explain(POSITIVE)
        fresh = await explainer.estimate_precision(POSITIVE, exp.data.positions, n=200, seed=99)
        sent = list(explainer.cache.labels(clf.identity))
    content = ["exhilarating", "beautifully", "acted", "film"]  # "an", "and": stop words, masked
    assert exp.meta.infill is not None and exp.meta.infill.settled.queries == len(content)  # one blank a word
    assert exp.data.label == "positive" and exp.data.success and fresh >= 0.85
    original = set(POSITIVE.split()) | {"UNK"}
    assert any(set(t.split()) - original for t in sent)  # the model read the filler's words, not only masks
    assert "filler model" in exp.claim


async def test_a_second_opinion_under_infill_is_asked_of_the_real_model_after_its_search(llama_url):
    from llm_anchors.explain import SecondOpinion

    clf = embedded_classifier(llama_url)
    async with AnchorsExplainer(clf, seed=0, second_opinion=SecondOpinion("infill", samples=60)) as explainer:
        exp = await explainer.explain(POSITIVE)
    o = exp.data.second_opinion
    assert o is not None and o.perturbation == "infill" and o.samples == 60 and 0.0 <= o.precision <= 1.0
    assert "filler model" in o.perturbed_as and exp.meta.stages["second opinion"].samples == 60
    assert exp.meta.infill is not None and exp.meta.infill.settled.queries == 4  # one blank per content word
    assert exp.meta.queries == sum(stage.queries for stage in exp.meta.stages.values()) + 1  # + the label
