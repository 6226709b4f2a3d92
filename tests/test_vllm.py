"""vLLM as the backend sees it, against the fake server in vLLM's shapes (tests/fake_vllm.py)."""

import math
from decimal import Decimal

import pytest

from llm_anchors import AnchorsExplainer, InvalidInputError, LLMClassifier
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.backends.vllm_api import answer_spellings, read_label_logprobs
from llm_anchors.extend import Completion, CompletionParams, Price, PromptTooLongError, RequestRejectedError
from tests.fake_vllm import FakeVllm
from tests.fault_server import FaultServer

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]


def sentiment(prompt: str) -> str:
    return "positive" if "good" in prompt.split("Review: ")[-1].split() else "negative"


def classifier(url: str, **kwargs) -> LLMClassifier:
    backend = OpenAICompatibleBackend(url, "gemma-3-270m", endpoint="completions", max_request_size=8)
    return LLMClassifier(backend, PROMPT, LABELS, **kwargs)


async def test_a_vllm_server_is_asked_for_the_labels_tokens_and_read_by_id():
    # The label the model chose at -0.1; the other at -9.0, below any top 5 the server would list.
    def logprob(prompt: str, word: str) -> float:
        return -0.1 if word == " " + sentiment(prompt) else -9.0

    async with FakeVllm(answer=sentiment, logprob=logprob) as server:
        clf = classifier(server.base_url)
        try:
            batch = await clf.classify(["a good film", "a dull film"])
            result = await clf.backend.complete([clf.render("a good film")], clf.params)
        finally:
            await clf.aclose()
    assert batch.labels == ["positive", "negative"]
    body = server.bodies[-1]
    watched = {server.text_of(t) for t in body["logprob_token_ids"]}
    assert {" positive", " negative", "positive", "Negative"} <= watched
    assert body["return_tokens_as_token_ids"] is True and body["logprobs"] == 1
    assert result.items[0].alternatives[" positive"] == pytest.approx(-0.1)
    assert result.items[0].alternatives[" negative"] == pytest.approx(-9.0)  # exact, not the top k's


async def test_calls_sent_at_once_ask_for_the_labels_tokens_once():
    import asyncio

    async with FakeVllm(answer=sentiment) as server:
        clf = classifier(server.base_url)
        try:
            batches = await asyncio.gather(*(clf.classify([f"a good film {i}"]) for i in range(4)))
        finally:
            await clf.aclose()
    assert all(b.labels == ["positive"] for b in batches)
    assert server.tokenized and len(server.tokenized) == len(set(server.tokenized))  # each spelling once


async def test_a_server_that_is_not_vllm_is_never_sent_vllm_fields():
    async with FaultServer(answer=sentiment) as server:
        clf = classifier(server.base_url)
        try:
            assert (await clf.classify(["a good film"])).labels == ["positive"]
            assert await clf.backend.vllm() is None
        finally:
            await clf.aclose()
    assert all("logprob_token_ids" not in body for body in server.bodies)


def test_ids_that_spell_the_same_text_are_added_and_others_dropped():
    choice = {
        "text": " pos",
        "logprobs": {
            "tokens": ["token_id:7"],
            "top_logprobs": [{"token_id:7": -2.0, "token_id:5": -1.0, "token_id:6": -1.0, "token_id:9": -0.5}],
        },
    }
    read, chosen = read_label_logprobs(choice, {5: " negative", 6: " negative"})
    assert read == pytest.approx({" pos": -2.0, " negative": -1.0 + 0.6931471805599453}) and chosen == " pos"


def test_a_nan_beside_an_id_of_the_same_text_leaves_the_answer_no_probabilities():
    choice = {
        "text": " positive",
        "logprobs": {
            "tokens": ["token_id:4"],
            "top_logprobs": [
                {"token_id:4": -0.2, "token_id:5": float("nan"), "token_id:6": -1.0, "token_id:7": float("inf")}
            ],  # fmt: skip
        },
    }
    read, chosen = read_label_logprobs(choice, {5: " negative", 6: " negative", 7: " Negative"})
    assert chosen == " positive" and read[" positive"] == -0.2 and math.isnan(read[" negative"])
    assert read[" Negative"] == math.inf
    assert Completion(" positive", read, chosen=chosen).alternatives is None  # the reader refuses them whole


def test_answer_spellings_cover_space_and_capital():
    assert set(answer_spellings(["positive"])) == {" positive", "positive", " Positive", "Positive"}


async def test_a_prompt_over_the_context_is_refused_before_it_is_sent():
    async with FakeVllm(answer=sentiment, max_model_len=64) as server:
        clf = classifier(server.base_url)
        explainer = AnchorsExplainer(clf)
        try:
            with pytest.raises(PromptTooLongError, match="max_model_len") as caught:
                await explainer.explain(" ".join(["good"] * 80), seed=0)
        finally:
            await explainer.aclose()
    assert isinstance(caught.value, InvalidInputError) and not caught.value.retryable
    assert server.prompts == []  # nothing sent, nothing billed


async def test_the_servers_own_400s_are_typed_and_not_retried():
    async with FakeVllm(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gemma-3-270m", endpoint="completions")
        try:
            with pytest.raises(RequestRejectedError) as caught:
                await backend.complete(["Review: good\nSentiment:"], CompletionParams(top_logprobs=25))
        finally:
            await backend.aclose()
    assert caught.value.param == "logprobs" and caught.value.status == 400 and not caught.value.retryable
    assert "greater than max allowed: 20" in str(caught.value)


async def test_a_list_prompts_cached_tokens_never_make_the_bill_too_small():
    # Every prompt reuses 3 cached tokens; vLLM says the last prompt's 3 for the whole list.
    price = Price(input=Decimal("1"), output=Decimal("2"), cache_read=Decimal("0.1"), source="test")
    async with FakeVllm(answer=sentiment, cached=lambda prompt: 3) as server:
        clf = classifier(server.base_url, price=price)
        texts = [f"film {i} good" for i in range(8)]
        try:
            batch = await clf.classify(texts)
            counted = await clf.token_counter.count([clf.render(t) for t in texts])
        finally:
            await clf.aclose()
    prompt, out = counted.total, len(texts)
    truth = (Decimal(prompt - 3 * 8) * 1 + Decimal(3 * 8) * Decimal("0.1") + out * 2) / 1_000_000
    uncached = (Decimal(prompt) + out * 2) / 1_000_000
    assert batch.charge.prompt_tokens == prompt and batch.charge.cache_read_tokens == 3
    assert truth <= batch.charge.usd <= uncached


async def test_tokens_are_counted_by_the_servers_tokenizer_with_its_bos():
    async with FakeVllm(answer=sentiment) as server:
        clf = classifier(server.base_url)
        try:
            counted = await clf.token_counter.count(["one two three"])
        finally:
            await clf.aclose()
    assert counted.tokens == [4] and not counted.estimated


def test_vllm_not_set_up_is_a_clear_error(monkeypatch, tmp_path):
    from llm_anchors.backends.vllm import VllmServer, VllmServerError, find_python

    monkeypatch.setenv("LLM_ANCHORS_CACHE", str(tmp_path))
    monkeypatch.delenv("VLLM_PYTHON", raising=False)
    with pytest.raises(VllmServerError, match="python -m llm_anchors.backends.vllm setup"):
        VllmServer().start()
    monkeypatch.setenv("VLLM_PYTHON", str(tmp_path / "nope"))
    with pytest.raises(VllmServerError, match="VLLM_PYTHON"):
        find_python()


def test_the_cpu_builds_environment_and_command(tmp_path):
    from llm_anchors.backends.vllm import VllmServer

    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    (tmp_path / "venv" / "lib").mkdir()
    (tmp_path / "venv" / "lib" / "libiomp5.so").touch()
    server = VllmServer("some/model", python=python, port=1234, threads=2)
    server.prepare()
    env, command = server.environment(), server.command()
    assert server.cpu and env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and env["LD_PRELOAD"].endswith("libiomp5.so")
    assert env["HF_HUB_OFFLINE"] == "1"  # nothing is downloaded at run time
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "--enable-prompt-tokens-details" in command
    assert "--served-model-name" not in command  # the user's model keeps its own name


def test_serve_and_base_url_together_are_refused(capsys):
    from llm_anchors.cli import main

    assert main(["explain", "a film", "--serve", "vllm", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--serve" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [{"threads": 0}, {"max_model_len": -1}, {"kv_cache_gib": 1.5}])
def test_a_vllm_server_with_impossible_settings_is_refused_before_it_starts(bad):
    from llm_anchors import ConfigError
    from llm_anchors.backends.vllm import VllmServer

    with pytest.raises(ConfigError, match=next(iter(bad))):
        VllmServer(**bad)
