"""The user's own openai client as the backend: the real openai package against the loopback fake server."""

from decimal import Decimal

import openai
import pytest

from llm_anchors import AnchorsExplainer, Budget, ConfigError, LLMClassifier, RetryPolicy
from llm_anchors.backends.openai_client import OpenAIClientBackend
from llm_anchors.extend import PromptTooLongError, RequestRejectedError
from llm_anchors.money import price_for
from tests.fault_server import FaultServer

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
SENTENCE = "this is a good and great movie with a fine plot"
pytestmark = pytest.mark.filterwarnings("ignore:the prompt cannot be cached")  # a 10-token prompt, on purpose
FAST_RETRY = RetryPolicy(max_attempts=12, initial_wait=0.01, max_wait=0.05, jitter=0.01)


def sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


def openai_usage(prompts: list[str]) -> dict:
    """OpenAI's documented usage shape: one token a word, 2 of them cached."""
    tokens = sum(len(p.split()) for p in prompts)
    return {"usage": {"prompt_tokens": tokens, "completion_tokens": len(prompts), "total_tokens": tokens + 1,
                      "prompt_tokens_details": {"cached_tokens": 2}}}  # fmt: skip


async def explain_through(backend: OpenAIClientBackend, cap: Decimal) -> tuple:
    clf = LLMClassifier(backend, PROMPT, LABELS)
    budget = Budget(max_usd=cap)
    async with AnchorsExplainer(clf, seed=0, budget=budget, retry=FAST_RETRY) as explainer:
        exp = await explainer.explain(SENTENCE)
    return exp, budget.report()


async def test_a_users_async_openai_with_a_header_and_an_organisation(monkeypatch):
    async with FaultServer(answer=sentiment, usage=openai_usage, fail_rate=0.2, kinds=("429", "500")) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", organization="org-team",
                                    default_headers={"X-Team": "risk"}, max_retries=5)  # fmt: skip
        exp, report = await explain_through(OpenAIClientBackend(client, "gpt-4o-mini"), Decimal("0.05"))
        await client.close()
    assert exp.data.label == "positive" and set(exp.data.anchor) <= {"good", "great"} and exp.data.anchor
    seen = server.requests
    assert all(r["headers"].get("openai-organization") == "org-team" for r in seen)
    assert all(r["headers"].get("x-team") == "risk" and r["path"] == "/v1/chat/completions" for r in seen)
    # The SDK never retried on its own: every request the server saw is one the engine sent and counted.
    assert all(r["headers"]["x-stainless-retry-count"] == "0" for r in seen)
    retries = exp.meta.cost.retries
    assert len(seen) == exp.meta.queries + retries and sum(server.counts[k] for k in ("429", "500")) == retries > 0
    # Billed as OpenAI prices gpt-4o-mini, cached tokens at the cached rate, within the cap.
    price = price_for("gpt-4o-mini")
    settled = report.settled
    assert settled.cache_read_tokens == 2 * exp.meta.queries and 0 < settled.usd <= Decimal("0.05")
    assert settled.usd == price.cost(settled)


async def test_an_azure_deployment_is_priced_as_the_model_it_runs():
    async with FaultServer(answer=sentiment, usage=openai_usage) as server:
        root = server.base_url.removesuffix("/v1")
        client = openai.AsyncAzureOpenAI(azure_endpoint=root, api_version="2024-10-21", api_key="azure-key")
        backend = OpenAIClientBackend(client, "prod-sentiment", price_as="gpt-4o")
        exp, report = await explain_through(backend, Decimal("0.50"))
        await client.close()
    assert exp.data.label == "positive" and exp.meta.queries > 0
    first = server.requests[0]
    assert first["path"] == "/openai/deployments/prod-sentiment/chat/completions"
    assert first["query"] == {"api-version": "2024-10-21"} and first["headers"]["api-key"] == "azure-key"
    assert server.bodies[0]["model"] == "prod-sentiment"
    assert report.settled.usd == price_for("gpt-4o").cost(report.settled) > 0
    assert "gpt-4o" in exp.meta.classifier and "prod-sentiment" in exp.meta.classifier


async def test_the_sdks_errors_are_the_projects():
    async with FaultServer(answer=sentiment, fail_rate=1.0, kinds=("400",)) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        backend = OpenAIClientBackend(client, "gpt-4o-mini")
        clf = LLMClassifier(backend, PROMPT, LABELS)
        with pytest.raises(RequestRejectedError, match="HTTP 400"):
            await clf.classify(["a good film"])
        await client.close()
    assert len(server.requests) == 1  # a 400 is not retried, by the SDK or by anyone


def test_a_too_long_prompt_from_openai_is_an_input_error():
    import httpx2 as httpx

    from llm_anchors.backends.openai_client import map_sdk_error

    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    body = {"error": {"message": "maximum context length", "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}  # fmt: skip
    response = httpx.Response(400, request=request, json=body, headers={"x-request-id": "req_123"})
    error = openai.BadRequestError("maximum context length", response=response, body=body)
    mapped = map_sdk_error(error, "who")
    assert isinstance(mapped, PromptTooLongError) and "req_123" in str(mapped) and not mapped.retryable


def test_a_client_that_is_not_one_is_refused():
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        OpenAIClientBackend(object(), "gpt-4o")


# -- the command line reaches what users reach ------------------------------


async def test_cli_headers_are_sent_everywhere_and_shown_nowhere(tmp_path):
    from tests.test_cli import cli

    secret = "gw-7Hq2mZ9pXv4Lc8Rt"
    async with FaultServer(answer=sentiment) as server:
        code, out = await cli("explain", SENTENCE, "--base-url", server.base_url, "--model", "m", "--free",
                              "--prompt", PROMPT, "--header", f"X-Gateway-Key: {secret}", "--header",
                              "X-Tenant: risk", "--json", stdout=True)  # fmt: skip
    assert code == 0, out
    assert server.requests and all(r["headers"].get("x-gateway-key") == secret for r in server.requests)
    assert all(r["headers"].get("x-tenant") == "risk" for r in server.requests) and secret not in out
    code, err = await cli("explain", SENTENCE, "--base-url", server.base_url, "--header", f"no colon {secret}")
    assert code == 2 and "'Name: value'" in err and secret not in err


async def test_a_gateway_without_tokenize_is_counted_by_tiktoken_not_refused(tmp_path):
    from tests.test_cli import cli

    async with FaultServer(answer=sentiment, tokenize=False, usage=openai_usage) as server:
        code, out = await cli("explain", SENTENCE, "--base-url", server.base_url, "--model", "gpt-4o-mini",
                              "--endpoint", "completions", "--prompt", PROMPT, "--max-usd", "0.10", "--json",
                              stdout=True)  # fmt: skip
    assert code == 0, out
    import json

    meta = json.loads(out)["meta"]
    assert meta["queries"] > 0 and not meta["cost"]["settled"]["estimated"]  # tiktoken's exact count


async def test_cli_azure_openai_deployment_priced_as_its_model(tmp_path, monkeypatch):
    import json

    from tests.test_cli import cli

    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key-1")
    async with FaultServer(answer=sentiment, usage=openai_usage) as server:
        root = server.base_url.removesuffix("/v1")
        code, out = await cli("explain", SENTENCE, "--azure-endpoint", root, "--api-version", "2024-10-21",
                              "--model", "prod-sentiment", "--price-as", "gpt-4o-mini", "--max-usd", "0.10",
                              "--prompt", PROMPT, "--json", stdout=True)  # fmt: skip
    assert code == 0, out
    exp = json.loads(out)
    assert {r["path"] for r in server.requests} == {"/openai/deployments/prod-sentiment/chat/completions"}
    assert all(r["headers"]["api-key"] == "azure-key-1" for r in server.requests)
    settled = exp["meta"]["cost"]["settled"]
    assert 0 < float(settled["usd"]) <= 0.10 and exp["data"]["label"] == "positive"
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    code, err = await cli("explain", SENTENCE, "--azure-endpoint", root, "--api-version", "v", "--model", "d")
    assert code == 2 and "AZURE_OPENAI_API_KEY" in err


@pytest.mark.parametrize("azure", [False, True], ids=["async-openai", "azure"])
async def test_estimate_run_and_report_through_the_users_client(tmp_path, azure):
    from llm_anchors.run import ResultsFile, estimate, explain_resumable, read_results, write_report

    texts = [SENTENCE, "a dull and boring film with a weak plot", "good and great acting in a great film"]
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=sentiment, usage=openai_usage) as server:
        if azure:
            root = server.base_url.removesuffix("/v1")
            client = openai.AsyncAzureOpenAI(azure_endpoint=root, api_version="2024-10-21", api_key="k",
                                             default_headers={"X-Team": "risk"})  # fmt: skip
            backend = OpenAIClientBackend(client, "prod-sentiment", price_as="gpt-4o-mini")
        else:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk", organization="org-team",
                                        default_headers={"X-Team": "risk"})  # fmt: skip
            backend = OpenAIClientBackend(client, "gpt-4o-mini")
        clf = LLMClassifier(backend, PROMPT, LABELS)
        with ResultsFile(out) as results:
            with results.open_budget(max_usd=Decimal("0.05")) as budget:
                async with AnchorsExplainer(clf, seed=0, budget=budget, on_budget="return") as explainer:
                    forecast = await estimate(explainer, texts)
                    report = await explain_resumable(explainer, texts, results)
                spent = budget.report().settled
        await client.close()
    assert forecast.summary() and report.done_now == len(texts) and not report.faulted
    labels = [r["explanation"]["data"]["label"] for r in sorted(read_results(out).values(), key=lambda r: r["index"])]
    assert labels == ["positive", "negative", "positive"]
    assert 0 < spent.usd <= Decimal("0.05") and spent.usd == price_for("gpt-4o-mini").cost(spent)
    assert all(r["headers"]["x-team"] == "risk" and r["headers"]["x-stainless-retry-count"] == "0"
               for r in server.requests)  # fmt: skip
    page = write_report(out, tmp_path / "report.html")
    assert "gpt-4o-mini" in page.read_text()


async def test_the_proxy_in_the_environment_carries_every_request(monkeypatch):
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    async with (
        FaultServer(answer=sentiment) as server,
        FaultServer(upstream=None, answer=sentiment) as proxy,
    ):
        proxy.upstream = server.base_url  # forwards what it is sent, as a proxy would
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        backend = OpenAICompatibleBackend(server.base_url, "m", endpoint="completions")
        clf = LLMClassifier(backend, PROMPT, LABELS)
        try:
            assert (await clf.classify(["a good and great film"])).labels == ["positive"]
        finally:
            await clf.aclose()
    assert proxy.requests and proxy.requests[0]["path"] == "/v1/completions" and server.requests


def test_a_429_waits_as_openais_rate_limit_headers_say():
    import httpx2 as httpx

    from llm_anchors.backends.openai_client import map_sdk_error

    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    headers = {"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "6m0s", "x-request-id": "req_9"}
    response = httpx.Response(429, request=request, json={"error": {"message": "slow down"}}, headers=headers)
    mapped = map_sdk_error(openai.RateLimitError("slow down", response=response, body=None), "who")
    assert mapped is not None and mapped.retry_after == 360.0 and "req_9" in str(mapped) and mapped.retryable
