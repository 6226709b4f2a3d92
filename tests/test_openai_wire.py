"""The same provider failure is the same typed error over both OpenAI transports (aiohttp's backend and
the user's own openai client): each error path against a loopback server that answers it as a
provider does, the error's type, retry, wait, status and ``param`` compared side by side."""

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import openai
import pytest
from aiohttp import web

from llm_anchors import (
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    RateLimitError,
)
from llm_anchors.backends.openai_client import OpenAIClientBackend
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.extend import CompletionParams, PromptTooLongError, RequestRejectedError, UnreachableError

LABELS = ("negative", "positive")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def said(status: int, error: dict | None = None, **headers: str) -> Handler:
    """A handler answering ``status`` with an OpenAI-shaped error body and ``headers``."""

    async def handle(request: web.Request) -> web.Response:
        body = json.dumps({"error": error or {"message": f"status {status}", "type": "server_error"}})
        return web.Response(status=status, text=body, content_type="application/json", headers=headers)

    return handle


async def drop(request: web.Request) -> web.StreamResponse:
    """The connection closed before any answer (a proxy restarting)."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()


async def hang(request: web.Request) -> web.Response:
    await asyncio.sleep(3)  # past both transports' 0.5 s
    return web.Response()


async def not_json(request: web.Request) -> web.Response:
    return web.Response(status=200, text="<html>a proxy's page</html>", content_type="text/html")


TOO_LONG = {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error",
            "param": "messages", "code": "context_length_exceeded"}  # fmt: skip
VLLM_TOO_LONG = {"message": "The prompt is too long.", "type": "BadRequestError", "param": "input_tokens", "code": 400}
REJECTED = {"message": "Unsupported value: 'temperature'", "type": "invalid_request_error", "param": "temperature"}

PATHS: dict[str, tuple[Handler, type[BackendError]]] = {
    "429, Retry-After": (said(429, **{"Retry-After": "2", "x-request-id": "req_1"}), RateLimitError),
    "429, OpenAI's reset headers": (
        said(429, **{"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "6m0s"}),
        RateLimitError,
    ),
    "400, OpenAI's context_length_exceeded": (said(400, TOO_LONG, **{"x-request-id": "req_2"}), PromptTooLongError),
    "400, vLLM's input_tokens": (said(400, VLLM_TOO_LONG), PromptTooLongError),
    "400, another parameter": (said(400, REJECTED), RequestRejectedError),
    "401": (said(401), BackendError),
    "404": (said(404), BackendError),
    "500": (said(500), BackendError),
    "503": (said(503), BackendError),
    "connection dropped": (drop, BackendTimeoutError),
    "no answer in time": (hang, BackendTimeoutError),
    "an answer that is not JSON": (not_json, BadResponseError),
}


async def serve(handler: Handler, path: str = "/v1/chat/completions") -> tuple[web.AppRunner, str]:
    """A server on loopback answering POSTs to ``path`` with ``handler``: its runner and its base URL."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/v1"


async def error_over_both(url: str) -> list[BackendError]:
    """The error each transport raises for one prompt to ``url`` (sent once: no retry is the transport's)."""
    errors = []
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-test") as client:
        transports = [
            OpenAICompatibleBackend(url, "gpt-4o-mini", endpoint="chat", api_key="sk-test", timeout=0.5, local=False),
            OpenAIClientBackend(client, "gpt-4o-mini", endpoint="chat", timeout=0.5, local=False),
        ]
        for backend in transports:
            try:
                with pytest.raises(BackendError) as caught:
                    await backend.complete(["Review: a good film\nSentiment:"], CompletionParams(answers=LABELS))
            finally:
                await backend.aclose()
            errors.append(caught.value)
    return errors


def compared(error: BackendError) -> dict:
    return {
        "type": type(error).__name__,
        "retryable": error.retryable,
        "status": error.status,
        "retry_after": getattr(error, "retry_after", None),
        "param": getattr(error, "param", None),
        "request id": "req_" in str(error),
    }


@pytest.mark.parametrize("path", PATHS)
async def test_a_provider_failure_is_the_same_error_over_both_transports(path):
    handler, expected = PATHS[path]
    runner, url = await serve(handler)
    try:
        aiohttp_error, sdk_error = await error_over_both(url)
    finally:
        await runner.cleanup()
    assert type(aiohttp_error) is expected, aiohttp_error
    assert compared(aiohttp_error) == compared(sdk_error), (aiohttp_error, sdk_error)


def test_the_waits_and_ids_are_read_as_the_provider_says():
    """What the comparison above compares holds what the headers said (not only the same on both)."""
    from llm_anchors.backends.openai_wire import error_of

    limited = error_of(429, "{}", {"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "6m0s"}, "who")
    assert isinstance(limited, RateLimitError) and limited.retry_after == 360.0 and limited.retryable
    too_long = error_of(400, json.dumps({"error": TOO_LONG}), {"x-request-id": "req_7"}, "who")
    assert isinstance(too_long, PromptTooLongError) and "req_7" in str(too_long) and not too_long.retryable
    failed = error_of(503, "busy", {}, "who", "http://h/v1/chat/completions")
    assert failed.retryable and failed.status == 503 and "at http://h/v1/chat/completions" in str(failed)


async def test_no_connection_is_unreachable_over_both_transports():
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    errors = await error_over_both(f"http://127.0.0.1:{port}/v1")
    assert [type(e) for e in errors] == [UnreachableError, UnreachableError]
    assert compared(errors[0]) == compared(errors[1])
