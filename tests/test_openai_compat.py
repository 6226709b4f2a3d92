import time

import pytest

from adapters.openai_compat import OpenAICompatibleBackend, parse_response, parse_retry_after
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
from llm_anchors.extend import CompletionParams
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
    assert out.items[0].top_logprobs == {" positive": -0.1, " negative": -2.4}
    assert out.usage.prompt_tokens == 12
    assert out.usage_prompts is None  # llama-server's usage covers the first prompt only


def test_legacy_shape():
    out = parse_response(LEGACY, 2, "t")
    assert out.items[1].top_logprobs == {" negative": -0.3, " positive": -1.5}
    assert out.usage_prompts == 2


def test_chat_shape():
    out = parse_response(CHAT, 1, "t")
    assert out.items[0].text == "positive"
    assert out.items[0].top_logprobs == {"positive": -0.01, "negative": -4.6}
    assert out.usage_prompts == 1


def test_no_logprobs():
    out = parse_response({"choices": [{"text": " positive"}]}, 1, "t")
    assert out.items[0].top_logprobs is None


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
        {"client": "requests"},
        {"timeout": 0},
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


@pytest.mark.parametrize("client", ["aiohttp", "openai"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_classify_through_http(client, endpoint):
    async with FaultServer(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "fake", client=client, endpoint=endpoint)
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
        backend = OpenAICompatibleBackend(server.base_url, "fake", timeout=0.3)
        with pytest.raises(error) as info:
            await backend.complete(["Review: x"], CompletionParams())
        await backend.aclose()
    assert info.value.retryable is (kind != "400")
    if kind == "429":
        assert info.value.retry_after == 0.05


def explainer_for(url, timeout=0.3, **kw):
    backend = OpenAICompatibleBackend(url, "fake", timeout=timeout, max_request_size=8)
    return AnchorsExplainer(LLMClassifier(backend, PROMPT, LABELS), seed=3, request_size=20, retry=FAST_RETRY, **kw)


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


@pytest.mark.parametrize("client", ["aiohttp", "openai"])
async def test_a_server_that_echoes_the_key_does_not_leak_it(client):
    async with FaultServer(fail_rate=1.0, kinds=["echo-key"], answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "m", api_key=KEY, client=client)
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
    if client == "aiohttp":  # it quotes the body; the openai client keeps only "Error code: 401"
        assert "<redacted>" in str(raised.value)


def test_a_key_in_the_url_is_not_shown():
    backend = OpenAICompatibleBackend("http://alice:hunter2-key@example.com:8000/v1", "m")
    assert "hunter2" not in repr(backend) and "example.com:8000" in repr(backend)


def test_redact_catches_credentials_in_any_shape():
    from adapters.openai_compat import redact

    for leaky in (
        "Incorrect API key provided: Bearer sk-abc123def456",
        "headers: {'Authorization': 'xyz-token-1'}",
        'api_key="tok_123456"',
        "see http://user:pw@host/v1",
        "raw sk-proj-AbCdEf123456",
    ):
        clean = redact(leaky)
        assert "abc123" not in clean and "xyz-token-1" not in clean and "tok_123456" not in clean
        assert "pw@" not in clean and "AbCdEf" not in clean and "<redacted>" in clean
    assert redact("no secret here, HTTP 500") == "no secret here, HTTP 500"
    assert redact("the key is k3y!", "k3y!") == "the key is <redacted>"


@pytest.mark.parametrize("client", ["aiohttp", "openai"])
@pytest.mark.parametrize("kind", ["truncated", "html"])
async def test_a_garbled_answer_is_a_bad_response_with_either_client(client, kind):
    async with FaultServer(fail_rate=1.0, kinds=[kind], answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "m", client=client)
        try:
            with pytest.raises(BadResponseError):
                await backend.complete(["p"], CompletionParams())
        finally:
            await backend.aclose()
