import time

import pytest

from llm_anchors import (
    AnchorsExplainer,
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    ConfigError,
    LLMClassifier,
    RateLimitError,
    RetryPolicy,
)
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.backends.openai_wire import parse_response, parse_retry_after
from llm_anchors.extend import FREE, Charge, CompletionParams, PromptCacheWarning
from tests.fault_server import FaultServer

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
SENTENCE = "this is a good and great movie with a fine plot"
FAST_RETRY = RetryPolicy(max_attempts=12, initial_wait=0.01, max_wait=0.05, jitter=0.01)


def sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


# -- the three response shapes ---------------------------------------------

LLAMA_SERVER = {
    "choices": [
        {
            "index": 1,
            "text": " negative",
            "logprobs": {
                "content": [
                    {
                        "token": " negative",
                        "logprob": -0.2,
                        "top_logprobs": [
                            {"token": " negative", "logprob": -0.2},
                            {"token": " positive", "logprob": -1.7},
                        ],
                    }
                ]
            },
        },
        {
            "index": 0,
            "text": " positive",
            "logprobs": {
                "content": [
                    {
                        "token": " positive",
                        "logprob": -0.1,
                        "top_logprobs": [
                            {"token": " positive", "logprob": -0.1},
                            {"token": " negative", "logprob": -2.4},
                        ],
                    }
                ]
            },
        },
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 1},
}
LEGACY = {
    "choices": [
        {
            "index": 0,
            "text": " positive",
            "logprobs": {
                "tokens": [" positive"],
                "token_logprobs": [-0.1],
                "top_logprobs": [{" positive": -0.1, " negative": -2.4}],
            },
        },
        {
            "index": 1,
            "text": " negative",
            "logprobs": {
                "tokens": [" negative"],
                "token_logprobs": [-0.3],
                "top_logprobs": [{" negative": -0.3, " positive": -1.5}],
            },
        },
    ],
    "usage": {"prompt_tokens": 24, "completion_tokens": 2},
}
CHAT = {
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "positive"},
            "logprobs": {
                "content": [
                    {
                        "token": "positive",
                        "logprob": -0.01,
                        "top_logprobs": [
                            {"token": "positive", "logprob": -0.01},
                            {"token": "negative", "logprob": -4.6},
                        ],
                    }
                ]
            },
        }
    ],
    "usage": {"prompt_tokens": 15, "completion_tokens": 1},
}


def test_llama_server_shape_sorted_by_index():
    out = parse_response(LLAMA_SERVER, 2, "t")
    assert [c.text for c in out.items] == [" positive", " negative"]
    assert out.items[0].alternatives == {" positive": -0.1, " negative": -2.4}
    assert out.usage.prompt_tokens == 12
    assert out.usage_prompts is None  # llama-server's usage covers the first prompt only


def test_legacy_shape():
    out = parse_response(LEGACY, 2, "t")
    assert out.items[1].alternatives == {" negative": -0.3, " positive": -1.5}
    assert out.usage_prompts == 2


def test_chat_shape():
    out = parse_response(CHAT, 1, "t")
    assert out.items[0].text == "positive"
    assert out.items[0].alternatives == {"positive": -0.01, "negative": -4.6}
    assert out.usage_prompts == 1


def test_no_logprobs():
    out = parse_response({"choices": [{"text": " positive"}]}, 1, "t")
    assert out.items[0].alternatives is None


@pytest.mark.parametrize("raw", [{}, {"choices": []}, {"choices": [{"nothing": 1}]}, {"choices": [{"index": 0}]}])
def test_unreadable_answers(raw):
    with pytest.raises(BadResponseError):
        parse_response(raw, 1, "t")


def test_retry_after_forms():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


# -- configuration ------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "127.0.0.1:8080"},
        {"base_url": []},
        {"model": ""},
        {"endpoint": "embeddings"},
        {"timeout": 0},
        {"timeout": float("nan")},
    ],
)
def test_bad_configuration(kwargs):
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(ConfigError):
        OpenAICompatibleBackend(**args)


def test_endpoint_auto_and_key_never_shown(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    hosted = OpenAICompatibleBackend("https://api.openai.com/v1", "gpt-4o-mini")
    local = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", "gemma")
    assert hosted.endpoint == "chat" and local.endpoint == "completions"
    for backend in (hosted, local):
        assert "sk-secret" not in repr(backend) + backend.identity + str(vars(backend))


# -- against a real HTTP server on loopback -----------------------------------


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_classify_through_http(endpoint):
    async with FaultServer(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "fake", endpoint=endpoint)
        clf = LLMClassifier(backend, PROMPT, LABELS)
        texts = ["good and great", "bad", "great", "a good , great day"] * 5
        batch = await clf.classify(texts)
        await clf.aclose()
    assert batch.labels == [sentiment(clf.render(t)) for t in texts]


async def test_list_prompts_are_split_per_request_and_spread_over_replicas():
    async with FaultServer(answer=sentiment) as a, FaultServer(answer=sentiment) as b:
        backend = OpenAICompatibleBackend([a.base_url, b.base_url], "fake", max_request_size=4)
        result = await backend.complete([f"Review: w{i}" for i in range(32)], CompletionParams())
        await backend.aclose()
    assert len(result.items) == 32
    assert a.counts["ok"] == b.counts["ok"] == 4
    assert a.prompts_served == b.prompts_served == 16


@pytest.mark.parametrize(
    "kind,error",
    [
        ("429", RateLimitError),
        ("500", BackendError),
        ("400", BackendError),
        ("timeout", BackendTimeoutError),
        ("drop", BackendTimeoutError),
    ],
)
async def test_each_fault_maps_to_a_typed_error(kind, error):
    async with FaultServer(answer=sentiment, fail_rate=1.0, kinds=[kind], hang_s=2.0) as server:
        backend = OpenAICompatibleBackend(server.base_url, "fake", timeout=0.3, local=False)  # as a remote one
        with pytest.raises(error) as info:
            await backend.complete(["Review: x"], CompletionParams())
        await backend.aclose()
    assert info.value.retryable is (kind != "400")
    if kind == "429":
        assert info.value.retry_after == 0.05


def explainer_for(url, timeout=0.3, **kw):
    """An explainer of a model behind ``url`` taken for a remote server's (a request past its timeout is sent
    again: on this machine it would be waited for)."""
    backend = OpenAICompatibleBackend(url, "fake", timeout=timeout, max_request_size=8, local=False)
    clf = LLMClassifier(backend, PROMPT, LABELS, price=FREE)
    return AnchorsExplainer(clf, seed=3, request_size=20, retry=FAST_RETRY, **kw)


@pytest.mark.slow
async def test_faults_are_retried_and_results_equal_the_fault_free_run():
    async with FaultServer(answer=sentiment) as clean, explainer_for(clean.base_url) as explainer:
        reference = await explainer.explain(SENTENCE)
    async with (
        # A client timeout well above the server's latency, so only injected hangs time out.
        FaultServer(answer=sentiment, fail_rate=0.25, seed=1, latency=(0, 0.01), hang_s=2.0) as flaky,
        explainer_for(flaky.base_url, timeout=1.2, max_concurrency=16) as explainer,
    ):
        exp = await explainer.explain(SENTENCE)
    assert set(flaky.counts) >= {"429", "500", "503", "timeout", "drop"}
    # One engine call is one HTTP request: every injected fault costs exactly one retry. On a
    # loaded machine a slow answer (even an error status) may also time out on the client first:
    # a retry all the same, counted as a timeout.
    failures = exp.meta.cost.failures
    injected = sum(v for k, v in flaky.counts.items() if k != "ok")
    for status in ("429", "500", "503"):
        assert 0 < failures.get(f"HTTP {status}", 0) <= flaky.counts[status]
    assert failures.get("timeout", 0) >= flaky.counts["timeout"] + flaky.counts["drop"]
    assert sum(failures.values()) >= injected
    assert exp.meta.cost.retries == sum(failures.values())
    assert exp.data == reference.data
    assert exp.meta.samples == reference.meta.samples and exp.meta.queries == reference.meta.queries


async def test_client_errors_are_not_retried():
    async with (
        FaultServer(answer=sentiment, fail_rate=1.0, kinds=["400"]) as server,
        explainer_for(server.base_url) as explainer,
    ):
        with pytest.raises(BackendError, match="HTTP 400"):
            await explainer.explain(SENTENCE)
    assert server.counts["400"] == 1


async def test_retry_after_is_honoured():
    async with (
        FaultServer(answer=sentiment, fail_rate=1.0, kinds=["429"], retry_after="0.3") as server,
        explainer_for(server.base_url) as explainer,
    ):
        explainer.engine.retry = RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.001, jitter=0.0)
        started = time.perf_counter()
        with pytest.raises(RateLimitError):
            await explainer.explain(SENTENCE)
    assert time.perf_counter() - started >= 0.6  # two waits of Retry-After, not of the 1 ms backoff
    assert server.counts["429"] == 3


async def test_api_key_is_sent_but_never_serialised(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-very-secret")
    async with FaultServer(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "fake", api_key_env="MY_KEY")
        async with AnchorsExplainer(LLMClassifier(backend, PROMPT, LABELS), seed=0) as explainer:
            exp = await explainer.explain("good and great")
    assert "sk-very-secret" not in exp.to_json() + str(exp) + repr(exp.meta.settings)


# -- no key in any message, no foreign exception ------------------------------

KEY = "sk-live-0123456789abcdefSECRET"


async def test_a_server_that_echoes_the_key_does_not_leak_it():
    async with FaultServer(fail_rate=1.0, kinds=["echo-key"], answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "m", api_key=KEY)
        try:
            with pytest.raises(BackendError) as raised:
                await backend.complete(["p"], CompletionParams())
        finally:
            await backend.aclose()
    import pickle
    import traceback

    shown = "".join(traceback.format_exception(raised.value))
    assert "401" in str(raised.value) and KEY not in shown and "SECRET" not in shown
    assert b"SECRET" not in pickle.dumps(raised.value)  # nor in what a Ray worker sends its coordinator
    assert "<redacted>" in str(raised.value)  # the body is quoted, the key in it redacted


def test_a_key_in_the_url_is_not_shown():
    backend = OpenAICompatibleBackend("http://alice:hunter2-key@example.com:8000/v1", "m")
    assert "hunter2" not in repr(backend) and "example.com:8000" in repr(backend)


@pytest.mark.parametrize("kind", ["truncated", "html"])
async def test_a_garbled_answer_is_a_bad_response(kind):
    async with FaultServer(fail_rate=1.0, kinds=[kind], answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "m")
        try:
            with pytest.raises(BadResponseError):
                await backend.complete(["p"], CompletionParams())
        finally:
            await backend.aclose()


# -- usage as the provider bills it ----------------------------------------------------------

USAGE_SHAPES = {
    # OpenAI chat/completions (and vLLM with --enable-prompt-tokens-details, llama.cpp, Gemini's
    # OpenAI-compatible endpoint): cached tokens are among prompt_tokens, reasoning among completion_tokens.
    "openai": (
        {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
         "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0}},
        {"prompt_tokens": 2006, "completion_tokens": 300, "cache_read_tokens": 1920, "reasoning_tokens": 256},
    ),
    "llama.cpp": (
        {"completion_tokens": 1, "prompt_tokens": 22, "total_tokens": 23,
         "prompt_tokens_details": {"cached_tokens": 21}},
        {"prompt_tokens": 22, "completion_tokens": 1, "cache_read_tokens": 21},
    ),
    "openrouter (cache writes)": (
        {"prompt_tokens": 3000, "completion_tokens": 5,
         "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 2900}},
        {"prompt_tokens": 3000, "completion_tokens": 5, "cache_write_tokens": 2900},
    ),
    # Anthropic: cache reads and writes are not among input_tokens.
    "anthropic": (
        {"input_tokens": 50, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1900, "output_tokens": 3},
        {"prompt_tokens": 2050, "completion_tokens": 3, "cache_read_tokens": 1900, "cache_write_tokens": 100},
    ),
    # Gemini's own shape: cached content is among promptTokenCount; thoughts are not among candidates.
    "gemini": (
        {"promptTokenCount": 2000, "cachedContentTokenCount": 1500, "candidatesTokenCount": 3,
         "thoughtsTokenCount": 7, "totalTokenCount": 2010},
        {"prompt_tokens": 2000, "completion_tokens": 10, "cache_read_tokens": 1500, "reasoning_tokens": 7},
    ),
    "no usage details": ({"prompt_tokens": 12, "completion_tokens": 1}, {"prompt_tokens": 12, "completion_tokens": 1}),
}  # fmt: skip


@pytest.mark.parametrize("shape", list(USAGE_SHAPES))
def test_each_provider_s_usage_is_read_as_it_bills_it(shape):
    from llm_anchors.backends.openai_wire import billed_usage

    raw, expected = USAGE_SHAPES[shape]
    assert billed_usage(raw) == Charge(**expected)


@pytest.mark.parametrize("bad", [{"prompt_tokens": -1}, {"prompt_tokens": "12"}, {"prompt_tokens": 1.5},
                                 {"prompt_tokens": float("nan")}, {"prompt_tokens": float("inf")},
                                 {"prompt_tokens_details": {"cached_tokens": True}}])  # fmt: skip
def test_a_usage_that_is_not_token_counts_is_not_read_but_the_answers_are(bad):
    read = parse_response({"choices": [{"index": 0, "text": " positive"}], "usage": bad}, 1, "who")
    assert read.usage_error.startswith("unreadable usage") and read.items[0].text == " positive"
    assert read.usage_prompts is None


async def test_a_server_reporting_cached_tokens_is_billed_exactly_at_the_cached_rate(tmp_path):
    """A fake OpenAI server reporting, in OpenAI's shape, a prompt's static prefix as cached."""
    import json

    from llm_anchors import AnchorsExplainer, Budget, LLMClassifier
    from llm_anchors.cli import render
    from llm_anchors.money import price_for
    from llm_anchors.run import ResultsFile, write_report

    rubric = "Judge the review by the rubric: " + " ".join(f"rule{i}" for i in range(600)) + "\nReview: {text}\nLabel:"
    prefix = len(rubric.split("{text}")[0].split())

    def usage(prompts):  # a word a token, the rubric read from the cache
        tokens = sum(len(p.split()) for p in prompts)
        return {"usage": {"prompt_tokens": tokens, "completion_tokens": len(prompts), "total_tokens": tokens + 1,
                          "prompt_tokens_details": {"cached_tokens": prefix * len(prompts)}}}  # fmt: skip

    price = price_for("gpt-4o-mini")
    async with FaultServer(answer=sentiment, usage=usage) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="chat")
        budget = Budget(max_usd=1)
        clf = LLMClassifier(backend, rubric, ["negative", "positive"], price=price)
        async with AnchorsExplainer(clf, seed=0, budget=budget) as explainer:
            exp = await explainer.explain("a good and great film")
    settled, calls = exp.meta.cost.settled, server.prompts_served
    assert settled.cache_read_tokens == prefix * calls and settled.completion_tokens == calls
    fresh = settled.prompt_tokens - settled.cache_read_tokens
    assert settled.usd == (fresh * price.input + prefix * calls * price.cache_read + calls * price.output) / 10**6
    assert settled.usd == budget.settled.usd and price.cache_read < price.input  # exact, at the cached rate
    assert exp.meta.cost.reserved.usd >= price.uncached(settled) > settled.usd  # reserved: the uncached worst case
    assert exp.meta.settings.price == price  # the price, dated, is in the explanation
    saved = price.uncached(settled) - settled.usd
    assert exp.saved_by_caching == saved > 0
    shown = render(exp)
    assert f"{settled.cache_read_tokens:,} cached" in shown and f"caching saved ${saved}" in shown
    with ResultsFile(tmp_path / "r.jsonl") as results:
        results.check_config({"explainer": "AnchorsExplainer"})
        results.append({"index": 0, "input_sha256": "h", "explanation": json.loads(exp.to_json())})
    page = write_report(tmp_path / "r.jsonl", tmp_path / "report.html").read_text()
    assert f"{settled.cache_read_tokens:,} cached" in page and "caching saved $" in page


async def test_a_service_tier_is_asked_for_and_priced_at():
    from llm_anchors import AnchorsExplainer, Budget, LLMClassifier
    from llm_anchors.money import Charge, price_for

    async with FaultServer(answer=sentiment) as server:  # a server that does not say which tier it served
        backend = OpenAICompatibleBackend(server.base_url, "openai/gpt-5-mini", service_tier="flex", endpoint="chat")
        clf = LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"])
        async with AnchorsExplainer(clf, seed=0, budget=Budget(max_usd=1)) as explainer:
            with pytest.warns(PromptCacheWarning):  # a short prompt: said once
                exp = await explainer.explain("a good and great film")
    price = price_for("gpt-5-mini")
    flex, priority = price.at("flex"), price.at("priority")
    assert server.tiers == {"flex"} and clf.price == price and flex.input < price.input < priority.input
    settled, reserved = exp.meta.cost.settled, exp.meta.cost.reserved
    billed = Charge(prompt_tokens=settled.prompt_tokens, completion_tokens=settled.completion_tokens)
    assert settled.usd == flex.cost(billed)  # not said: billed at the tier asked
    assert reserved.usd == priority.worst_case(reserved.prompt_tokens, reserved.completion_tokens)  # the dearest


async def test_a_server_that_serves_another_tier_than_asked_is_billed_at_it_within_the_cap():
    from llm_anchors import AnchorsExplainer, Budget, LLMClassifier
    from llm_anchors.money import Charge, price_for

    def standard_tier(prompts):  # a server that ignores the flex asked, and says so in OpenAI's field
        tokens = sum(len(p.split()) for p in prompts)
        usage = {"prompt_tokens": tokens, "completion_tokens": len(prompts), "total_tokens": tokens + len(prompts)}
        return {"service_tier": "default", "usage": usage}

    async with FaultServer(answer=sentiment, usage=standard_tier) as server:
        backend = OpenAICompatibleBackend(server.base_url, "openai/gpt-5-mini", service_tier="flex")
        clf = LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"])
        budget = Budget(max_usd=1)
        async with AnchorsExplainer(clf, seed=0, budget=budget) as explainer:
            with pytest.warns(PromptCacheWarning):
                exp = await explainer.explain("a good and great film")
    standard, settled = price_for("gpt-5-mini"), exp.meta.cost.settled
    assert settled.usd == standard.cost(
        Charge(prompt_tokens=settled.prompt_tokens, completion_tokens=settled.completion_tokens)
    )
    assert settled.usd > standard.at("flex").cost(settled)  # billed as served
    assert budget.report().passed == "" and exp.meta.cost.reserved.usd >= settled.usd and not settled.disputed


def test_a_call_split_over_tiers_is_billed_at_the_dearest_tier_said():
    from llm_anchors.backends.openai_wire import _served_tier

    assert _served_tier([None, None]) is None and _served_tier(["flex", None, "flex"]) == "flex"
    assert (
        _served_tier(["flex", "default"]) == "default" and _served_tier(["flex", "priority", "default"]) == "priority"
    )
