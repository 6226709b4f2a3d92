"""One backend for every OpenAI-compatible server: OpenAI, vLLM, llama.cpp.

One transport, ``aiohttp`` (the async openai client was measured no faster
against llama-server, and was dropped: docs/architecture.md). Two endpoints: ``/completions`` with a list
of prompts per request (vLLM and llama-server take one), and
``/chat/completions``, one prompt per request (hosted chat models).
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, cast
from urllib.parse import urlparse

from adapters.decisions import DecisionCounter, Shape, decision_body, read_decision
from adapters.token_counters import (
    FallbackCounter,
    ServerTokenCounter,
    TiktokenCounter,
    endpoint_url,
    fallback_counter,
)
from adapters.vllm_api import LabelTokens, VllmInfo, label_request, logsumexp, probe, read_label_logprobs
from llm_anchors import (
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    ClassifierError,
    ConfigError,
    RateLimitError,
)
from llm_anchors.extend import (
    Charge,
    Completion,
    CompletionParams,
    Completions,
    PromptTooLongError,
    RequestRejectedError,
    TokenCounter,
    UnreachableError,
    header_secrets,
    redact,
    scrub,
    shown_url,
)

__all__ = [
    "REASONING_EFFORTS", "OpenAICompatibleBackend", "Pace", "billed_usage", "combined", "is_loopback", "parse_decision",
    "parse_response", "parse_retry_after", "reasoning_effort_for", "request_body",
]  # fmt: skip

NO_TIER_FOR_DECISIONS = (
    "a decision endpoint takes no service tier (its request has none, so a call could not be billed at the "
    "tier asked): leave service_tier unset"
)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
"""The reasoning efforts OpenAI's chat API takes (each model takes some: gpt-5 has no "none")."""

_NOT_REASONING = re.compile(r"^gpt-5(\.\d+)?-chat")
_LOWEST_EFFORT = [  # OpenAI's reasoning models by name, and the lowest effort each takes
    (re.compile(r"^gpt-5(\.\d+)?(-\w+)*-pro\b"), "high"),
    (re.compile(r"^gpt-5(\.\d+)?(-\w+)*-codex\b"), "low"),
    (re.compile(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$"), "minimal"),
    (re.compile(r"^gpt-5\.\d+"), "none"),
    (re.compile(r"^o\d"), "low"),
]


def reasoning_effort_for(model: str) -> str | None:
    """The lowest reasoning effort OpenAI's reasoning model ``model`` takes ("minimal" for gpt-5,
    "none" from gpt-5.1, "low" for the o-series and codex); None for a model that does not reason
    (gpt-4o, gpt-4.1, gpt-5-chat-latest) or that OpenAI does not name."""
    name = model.rpartition("/")[2].lower()
    if _NOT_REASONING.match(name):
        return None
    return next((effort for pattern, effort in _LOWEST_EFFORT if pattern.match(name)), None)


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (127.0.0.1, localhost, ::1): a server whose tokens cost nothing."""
    return urlparse(url).hostname in ("127.0.0.1", "localhost", "::1")


def _check_url(url: Any, key: str | None) -> None:
    """`ConfigError` unless ``url`` is an http(s) URL with a host and a valid port; the message shows
    it as `shown_url` does (no API key, user:password, query value or key-like segment)."""
    if not isinstance(url, str):
        raise ConfigError(f"base_url must be an http(s) URL, got {type(url).__name__}")
    shown = redact(shown_url(url), key)
    try:
        parts = urlparse(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port out of range or not a number, a broken IPv6 address: never echoed
        raise ConfigError(f"base_url {shown!r} is not a URL: its host or port cannot be read") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ConfigError(f"base_url must be an http(s) URL with a host, like http://127.0.0.1:8000/v1, got {shown!r}")
    if any(c.isspace() for c in url):
        raise ConfigError(f"base_url {shown!r} holds a space")
    if parts.fragment or url.endswith("#"):
        raise ConfigError(f"base_url {shown!r} holds a #fragment, which no request sends: give the key as an API key")
    if (parts.username or parts.password) and key:
        raise ConfigError(f"base_url {shown!r} holds a user:password and an API key is set: give one of them")


Endpoint = Literal["auto", "completions", "chat", "decisions", "systemone"]


class OpenAICompatibleBackend:
    """Completes prompts on one model served at one or more base URLs.

    base_url: ``http://host:port/v1``, or a list of replicas of the same
        model; requests are spread over them in turn.
    endpoint: "completions" (list prompts), "chat", or "auto" (chat for
        api.openai.com, completions elsewhere).
    api_key: taken from ``$api_key_env`` (OPENAI_API_KEY) when not given;
        never logged, never part of ``identity`` or ``repr``.
    timeout: seconds for one HTTP request.
    max_request_size: prompts per /completions request.
    max_connections: HTTP requests in flight from this backend.
    service_tier: asked of the server with every request (OpenAI's ``"flex"``:
        about half the price, slower; ``"priority"``; ``"auto"``, the
        project's default) and priced at the tier the server says it served.
    reasoning_effort: for a model that reasons before it answers, how hard
        (``"none"``, ``"minimal"``, ``"low"``, ...); by default the lowest
        OpenAI's reasoning model of that name takes (`reasoning_effort_for`),
        None for other models. A reasoning model's request bounds its output
        with ``max_completion_tokens`` (reasoning included), and carries no
        temperature or log-probabilities (OpenAI's refuse them).
    headers: HTTP headers sent with every request (a gateway's key, a tenant),
        never shown; proxies are taken from the environment (``HTTPS_PROXY``, ``NO_PROXY``).
    price_as: the model it is priced (and counted by tiktoken) as, when the
        served name differs (a gateway's alias); default ``model``.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        endpoint: Endpoint = "auto",
        timeout: float = 60.0,
        max_request_size: int = 16,
        max_connections: int = 32,
        extra_body: dict[str, Any] | None = None,
        service_tier: str | None = None,
        reasoning_effort: str | None = "auto",
        headers: dict[str, str] | None = None,
        price_as: str | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ConfigError("base_url must be one or more http(s) URLs, got none")
        for url in urls:
            _check_url(url, key)
        if not model:
            raise ConfigError("model must be named")
        if endpoint not in ("auto", "completions", "chat", "decisions", "systemone"):
            raise ConfigError(f"endpoint must be auto, completions, chat, decisions or systemone, got {endpoint!r}")
        if not 0 < timeout < math.inf or max_request_size < 1 or max_connections < 1:  # nan is not a timeout
            raise ConfigError("timeout (finite), max_request_size and max_connections must be positive")
        self.base_urls = [endpoint_url(u, "") for u in urls]  # no trailing slash
        self.served_model = model
        self.model = price_as or model  # what its price is looked up as (Backend.model)
        self.endpoint: Literal["completions", "chat", "decisions", "systemone"] = (
            ("chat" if any(urlparse(u).hostname == "api.openai.com" for u in urls) else "completions")
            if endpoint == "auto"
            else endpoint
        )
        self.timeout = timeout
        self.max_request_size = max_request_size if self.endpoint == "completions" else 1
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        if service_tier is not None and (not isinstance(service_tier, str) or not service_tier.strip()):
            raise ConfigError(f"service_tier must be a tier's name (flex, priority, ...), got {service_tier!r}")
        if service_tier is not None and self.decides:
            raise ConfigError(NO_TIER_FOR_DECISIONS)
        self._service_tier = service_tier
        if service_tier is not None:
            self.extra_body["service_tier"] = service_tier
        if reasoning_effort is not None and reasoning_effort not in (*REASONING_EFFORTS, "auto"):
            raise ConfigError(
                f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, got {reasoning_effort!r}"
            )
        self._effort = reasoning_effort_for(self.model) if reasoning_effort == "auto" else reasoning_effort
        self._api_key = _Secret(key)
        self._extra_headers = _check_headers(headers or {})
        self._next_url = itertools.cycle(self.base_urls)
        self._transport: _Session | None = None
        self._counter: FallbackCounter | None = None
        self._probe_lock = asyncio.Lock()
        self._probed = False
        self._vllm: VllmInfo | None = None
        self._labels = LabelTokens()
        self._pace = Pace()

    @property
    def identity(self) -> str:
        priced = f":priced-as:{self.model}" if self.model != self.served_model else ""
        return f"openai-compat:{self.served_model}:{self.endpoint}{priced}"

    @property
    def is_local(self) -> bool:
        """Served from this machine: its tokens cost no dollars."""
        return all(is_loopback(u) for u in self.base_urls)

    @property
    def decides(self) -> bool:
        """A decision endpoint: it answers with the labels' probabilities (`adapters.decisions`)."""
        return self.endpoint in ("decisions", "systemone")

    @property
    def service_tier(self) -> str | None:
        """The tier every request asks for (None: the server's standard)."""
        return self._service_tier

    @property
    def reasoning_effort(self) -> str | None:
        """How hard the model is asked to reason (None: it is not a reasoning model)."""
        return self._effort

    @property
    def api_url(self) -> str:
        """The first server's base URL (its provider's prices are told apart by it)."""
        return shown_url(self.base_urls[0])

    @property
    def is_openai(self) -> bool:
        return any(urlparse(u).hostname == "api.openai.com" for u in self.base_urls)

    def token_counter(self) -> TokenCounter | None:
        """tiktoken for OpenAI; the server's /tokenize for completions elsewhere (vLLM,
        llama.cpp: one counter, which the backend's own length check shares), and where the server
        has none (a gateway), or on another chat server, tiktoken for a model it knows by name, else
        a marked over-estimate: never an error."""
        per_message = 7 if self.endpoint == "chat" else 0
        if self.decides:
            return DecisionCounter(fallback_counter(self.model) if self.is_openai else self._server_counter())
        if self.is_openai:
            return TiktokenCounter(self.model, per_message=per_message)
        if self.endpoint == "completions":
            return self._server_counter()
        return fallback_counter(self.model, per_message)

    def _server_counter(self) -> FallbackCounter:
        """The first server's /tokenize (tiktoken or an estimate once it says it has none), made once."""
        if self._counter is None:
            server = ServerTokenCounter(self.base_urls[0], model=self.served_model, headers=self._headers())
            self._counter = FallbackCounter(server, fallback_counter(self.model))
        return self._counter

    def __repr__(self) -> str:
        urls = [shown_url(u) for u in self.base_urls]
        return f"OpenAICompatibleBackend({urls!r}, model={self.served_model!r}, endpoint={self.endpoint!r})"

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions:
        step = self.max_request_size
        parts = [list(prompts[i : i + step]) for i in range(0, len(prompts), step)]
        try:
            names = None
            if (vllm := await self.vllm()) is not None:
                await self._check_fits(prompts, params, vllm)
                names = await self.label_tokens(params) if params.answers and params.top_logprobs else None
            return combined(await asyncio.gather(*(self._request(part, params, names) for part in parts)))
        except ClassifierError as exc:  # whatever a server echoed: no key or header value goes further
            raise scrub(exc, self._secrets()) from None

    def _secrets(self) -> tuple[str | None, ...]:
        """What no message may show: the API key and the user's header values (`header_secrets`)."""
        return (self._api_key.value, *header_secrets(self._extra_headers.value))

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None
        if self._counter is not None:
            await self._counter.aclose()

    async def served_models(self) -> list[str] | None:
        """What the first server says it serves (``GET /models``: the model ids), to tell one
        server's model from another's under the same name; None when it does not say."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=min(self.timeout, 10.0))
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, headers=self._headers(), trust_env=True) as session,
                session.get(endpoint_url(self.base_urls[0], "/models")) as response,
            ):
                raw = await response.json(content_type=None) if response.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return None
        data = raw.get("data") if isinstance(raw, dict) else None
        if not isinstance(data, list):
            return None
        return sorted(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)

    async def vllm(self) -> VllmInfo | None:
        """The vLLM server behind a completions endpoint (asked once: ``/version``, ``/v1/models``),
        None for any other server (llama.cpp, OpenAI, a chat endpoint)."""
        if self.endpoint != "completions" or self.is_openai:
            return None
        async with self._probe_lock:
            if not self._probed:
                transport = self._get_transport()
                base = self.base_urls[0]
                self._vllm = await probe(transport.get_json, endpoint_url(base, "", root=True), base, self.served_model)
                self._probed = True
        return self._vllm

    async def _check_fits(self, prompts: Sequence[str], params: CompletionParams, vllm: VllmInfo) -> None:
        """`PromptTooLongError` before sending when a prompt and its output bound pass the model's
        context. Only prompts that might are counted: a token is at least one byte of UTF-8."""
        limit = vllm.max_model_len
        if limit is None:
            return
        room = limit - params.max_tokens - 1  # the BOS token
        doubtful = [p for p in prompts if len(p.encode()) > room]
        counter = self.token_counter()
        if not doubtful or counter is None:
            return
        counted = await counter.count(doubtful)
        longest = max(counted.tokens)
        if longest + params.max_tokens > limit:
            raise PromptTooLongError(
                f"a prompt of {longest:,} tokens and {params.max_tokens} output token(s) does not fit the model's "
                f"context of {limit:,} tokens (vLLM's max_model_len): shorten the text or the prompt",
                classifier=self.identity,
                status=None,
                param="input_tokens",
            )

    async def label_tokens(self, params: CompletionParams) -> dict[int, str]:
        """The first token of each of ``params.answers`` as the vLLM server tokenizes them, each with the
        text it spells (asked once): what a request asks the log-probabilities of (`label_request`)."""
        transport, root = self._get_transport(), endpoint_url(self.base_urls[0], "", root=True)
        who = self.identity

        async def tokenize(text: str) -> list[int]:
            body = {"model": self.served_model, "prompt": text, "add_special_tokens": False}
            raw = await transport.post_json(root + "/tokenize", body, self.identity)
            tokens = raw.get("tokens")
            if not isinstance(tokens, list):
                return []
            if not all(_token_id(t) for t in tokens):
                shown = ", ".join(repr(t) for t in tokens[:3])
                raise BadResponseError(f"/tokenize answered tokens that are not token ids ({shown})", classifier=who)
            return [int(t) for t in tokens]

        async def detokenize(tokens: list[int]) -> str:
            raw = await transport.post_json(
                root + "/detokenize", {"model": self.served_model, "tokens": tokens}, self.identity
            )
            return str(raw.get("prompt") or "")

        return await self._labels.ids(params.answers, tokenize, detokenize)

    async def _request(self, prompts: list[str], params: CompletionParams, names: dict[int, str] | None) -> Completions:
        transport = self._get_transport()
        body = self._body(prompts, params)
        if names:
            body |= label_request(names)
        base = next(self._next_url)
        started = time.monotonic()
        raw = await self._patiently(transport.post(base, self.endpoint, body, self.identity), len(prompts), base)
        self._pace.add((time.monotonic() - started) / len(prompts))
        if names:
            return parse_response(raw, len(prompts), self.identity, lambda c: read_label_logprobs(c, names))
        if self.decides:
            return parse_decision(cast(Shape, self.endpoint), raw, self.identity, params.answers)
        return parse_response(raw, len(prompts), self.identity)

    async def _patiently(self, call: Awaitable[dict[str, Any]], n: int, base: str) -> dict[str, Any]:
        """``call``'s answer, waited for as long as its ``n`` prompts take (`Pace`: ``timeout``, or more
        for a request that carries more than the server answers in that time). A server on this machine
        whose health endpoint answers is alive but slow (a busy machine): it is waited for again, never
        counted as a failure, and the request is never sent again while it may still work on it."""
        task = asyncio.ensure_future(call)
        waited, patience = 0.0, self._pace.deadline(n, self.timeout)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=patience)
                if done:
                    return task.result()
                waited += patience
                if not self.is_local or waited >= MAX_LOCAL_WAIT or not await self._get_transport().alive(base):
                    where = shown_url(endpoint_url(base, _PATHS[self.endpoint]))
                    raise BackendTimeoutError(f"no answer from {where} in {waited:.0f} s", classifier=self.identity)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def _body(self, prompts: list[str], params: CompletionParams) -> dict[str, Any]:
        return request_body(self.endpoint, self.served_model, prompts, params, self._effort) | self.extra_body

    def _headers(self) -> dict[str, str]:
        """Every request's headers: the API key as a bearer token, and the user's (``headers``)."""
        auth = {"Authorization": f"Bearer {self._api_key.value}"} if self._api_key.value else {}
        return auth | self._extra_headers.value

    def _get_transport(self) -> _Session:
        loop = asyncio.get_running_loop()
        if self._transport is None or self._transport.loop is not loop:
            self._transport = _Session(self._headers(), self.timeout, self.max_connections, self._secrets())
        return self._transport


MAX_LOCAL_WAIT = 3600.0
"""Seconds a request to a server on this machine is waited for while its health endpoint answers."""


class Pace:
    """Seconds a server takes a prompt, lately (an exponential average of its answered requests), and the
    patience a request of ``n`` prompts is owed: ``timeout``, or eight times what its prompts take at that
    pace when that is longer (a request that carries more is waited for longer)."""

    def __init__(self) -> None:
        self.per_prompt = 0.0

    def add(self, seconds: float) -> None:
        self.per_prompt = seconds if not self.per_prompt else 0.8 * self.per_prompt + 0.2 * seconds

    def deadline(self, n: int, timeout: float) -> float:
        return max(timeout, 8 * self.per_prompt * n)


class _Secret:
    """Holds an API key so that no repr, log line or vars() dump shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<secret>" if self.value else "<none>"


class _Headers:
    """The user's extra headers (a gateway's key, a tenant): sent, never shown."""

    __slots__ = ("value",)

    def __init__(self, value: dict[str, str]) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"<{len(self.value)} headers>"


def _check_headers(headers: Any) -> _Headers:
    """``headers`` as sent; `ConfigError` (naming the header, never its value) for one HTTP cannot carry."""
    if not isinstance(headers, dict):
        raise ConfigError(f"headers must be a dict of names to values, got {type(headers).__name__}")
    for name, value in headers.items():
        if not isinstance(name, str) or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            raise ConfigError(f"header name {name!r} is not a valid HTTP header name")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ConfigError(f"header {name}: its value must be text on one line")
    return _Headers(dict(headers))


_PATHS = {
    "completions": "/completions",
    "chat": "/chat/completions",
    "decisions": "/decisions",
    "systemone": "/systemone",
}


class _Session:
    """One aiohttp session (made in, and bound to, the loop that uses it): every failure one of
    llm-anchors' errors."""

    def __init__(
        self, headers: dict[str, str], timeout: float, max_connections: int, secrets: Sequence[str | None] = ()
    ) -> None:
        import aiohttp

        self.loop = asyncio.get_running_loop()
        self._secrets = tuple(secrets)  # taken out of a server's body before it is cut to a message's length
        self._small = aiohttp.ClientTimeout(total=timeout)  # a probe's, a tokenize's: small answers
        self._aiohttp = aiohttp
        self._session = aiohttp.ClientSession(  # each request's patience is the backend's (`Pace`)
            headers={"Content-Type": "application/json", **headers},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(timeout, 30.0)),
            connector=aiohttp.TCPConnector(limit=max_connections),
            trust_env=True,  # HTTPS_PROXY, HTTP_PROXY, NO_PROXY and ~/.netrc, as the user's other tools read them
        )

    async def post(self, base: str, endpoint: str, body: dict[str, Any], who: str) -> dict[str, Any]:
        aiohttp = self._aiohttp
        url = endpoint_url(base, _PATHS[endpoint])
        try:
            async with self._session.post(url, json=body) as response:
                if response.status >= 400:
                    text = await response.text()
                    retry_after = response.headers.get("Retry-After")
                    raise _status_error(response.status, text, retry_after, who, shown_url(url), self._secrets)
                try:
                    raw = await response.json(content_type=None)
                except ValueError as exc:
                    raise BadResponseError(f"answer is not JSON: {exc}", classifier=who, transient=True) from exc
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:  # it never left
            raise UnreachableError(f"no connection to {shown_url(url)}: {type(exc).__name__}", classifier=who) from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise BackendTimeoutError(f"no answer from {shown_url(url)} in time", classifier=who) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            where = shown_url(url)
            raise BackendTimeoutError(f"connection to {where} dropped: {type(exc).__name__}", classifier=who) from None
        if not isinstance(raw, dict):
            raise BadResponseError(f"answer is {type(raw).__name__}, not an object", classifier=who)
        return raw

    async def alive(self, base: str) -> bool:
        """Whether the server at ``base`` says it is alive: its ``/health`` (llama-server's, vLLM's) answers
        200, or 503 while it loads, within 10 s. No such page, or no answer: it cannot be told alive."""
        url = endpoint_url(base, "/health", root=True)
        try:
            async with self._session.get(url, timeout=self._aiohttp.ClientTimeout(total=10.0)) as response:
                return response.status in (200, 503)
        except (self._aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def get_json(self, url: str) -> Any:
        """``GET url``'s JSON; None when the server answers anything else (it has no such page);
        `BackendTimeoutError` (retried) when it does not answer."""
        try:
            async with self._session.get(url, timeout=self._small) as response:
                return await response.json(content_type=None) if response.status == 200 else None
        except ValueError:
            return None
        except (self._aiohttp.ClientError, asyncio.TimeoutError) as exc:
            who = shown_url(url)
            raise BackendTimeoutError(f"{who} did not answer: {type(exc).__name__}", classifier=who) from None

    async def post_json(self, url: str, body: dict[str, Any], who: str) -> dict[str, Any]:
        """``POST url`` with ``body``: its JSON object, or the error `_status_error` maps."""
        try:
            async with self._session.post(url, json=body, timeout=self._small) as response:
                if response.status >= 400:
                    text = await response.text()
                    raise _status_error(response.status, text, None, who, shown_url(url), self._secrets)
                raw = await response.json(content_type=None)
        except (asyncio.TimeoutError, self._aiohttp.ClientError) as exc:
            raise BackendTimeoutError(f"{shown_url(url)} failed: {type(exc).__name__}", classifier=who) from None
        except ValueError as exc:
            raise BadResponseError(f"{shown_url(url)} answered no JSON: {exc}", classifier=who) from None
        if not isinstance(raw, dict):
            raise BadResponseError(f"{shown_url(url)} answered {type(raw).__name__}", classifier=who)
        return raw

    async def aclose(self) -> None:
        await self._session.close()


def _status_error(
    status: int, text: str, retry_after: str | None, who: str, where: str = "", secrets: Sequence[str | None] = ()
) -> BackendError:
    """The project's error for an HTTP error status; ``where`` (the URL as shown) names the page a 404,
    a 401 or a 5xx came from. The body is redacted (``secrets``, anything shaped like a credential)
    before it is cut to a message's length: a secret cut in two would pass."""
    text = redact(text, *secrets)
    detail = text.strip().replace("\n", " ")[:200]
    if status == 429:
        return RateLimitError(f"HTTP 429: {detail}", classifier=who, retry_after=parse_retry_after(retry_after))
    if status == 400:
        message, param = _error_said(text)
        shown = f"HTTP 400: {message or detail}"
        if param == "input_tokens":  # vLLM: the prompt does not fit the model's context
            return PromptTooLongError(shown, classifier=who, param=param)
        return RequestRejectedError(shown, classifier=who, param=param)
    at = f" at {where}" if where else ""
    return BackendError(f"HTTP {status}{at}: {detail}", classifier=who, status=status)


def _error_said(text: str) -> tuple[str, str | None]:
    """The message and ``param`` of an OpenAI-shaped error body (``{"error": {"message", "type", "param",
    "code"}}``: OpenAI, vLLM); ("", None) for any other body."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return "", None
    if not isinstance(error, dict):
        return "", None
    param = error.get("param")
    return str(error.get("message") or "")[:300], param if isinstance(param, str) and param else None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def parse_response(
    raw: dict[str, Any],
    n_prompts: int,
    who: str,
    alternatives: Callable[[dict[str, Any]], dict[str, float] | None] | None = None,
) -> Completions:
    """Read a /completions or /chat/completions answer, in any of the three
    logprob shapes servers use (see `_first_token`), or with ``alternatives``
    (a choice -> its first token's alternatives: vLLM's label reads)."""
    choices = raw.get("choices")
    if not isinstance(choices, list) or len(choices) != n_prompts:
        got = len(choices) if isinstance(choices, list) else "no"
        raise BadResponseError(f"{got} choices for {n_prompts} prompts", classifier=who)
    if all(isinstance(c, dict) and isinstance(c.get("index"), int) for c in choices):
        choices = sorted(choices, key=lambda c: c["index"])
    try:
        items = [_completion(c, alternatives) for c in choices]
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise BadResponseError(f"unreadable choice: {type(exc).__name__}: {exc}", classifier=who) from exc
    tier = _tier_said(raw)
    usage_raw = raw.get("usage") or raw.get("usageMetadata") or {}
    try:
        usage = replace(billed_usage(usage_raw), queries=n_prompts)
    except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:  # the answers stand; its bill does not
        return Completions(items, Charge(), None, tier, f"unreadable usage ({exc})", _model_said(raw))
    # llama-server reports the usage of the first prompt only for a list of prompts.
    covered = n_prompts if usage_raw and (n_prompts == 1 or usage.completion_tokens >= n_prompts) else None
    return Completions(items, usage, covered, tier, served_model=_model_said(raw))


def _token_id(value: Any) -> bool:
    """Whether ``value`` reads as a token id (an integer, or a float that is one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


def _completion(
    choice: dict[str, Any], alternatives: Callable[[dict[str, Any]], dict[str, float] | None] | None
) -> Completion:
    """One choice as a completion: its text, its first token's alternatives and the token chosen."""
    if alternatives is not None:
        return Completion(_text(choice), alternatives(choice), _cut(choice))
    top, chosen = _first_token(choice.get("logprobs"))
    return Completion(_text(choice), top, _cut(choice), chosen)


def _model_said(raw: dict[str, Any]) -> str | None:
    """The model an answer says served it (None: it says none)."""
    model = raw.get("model")
    return model if isinstance(model, str) and model.strip() else None


def _tier_said(raw: dict[str, Any]) -> str | None:
    """The service tier an answer says it was served at (None: it says none)."""
    tier = raw.get("service_tier")
    return tier if isinstance(tier, str) and tier else None


def parse_decision(shape: Shape, raw: dict[str, Any], who: str, labels: Sequence[str] = ()) -> Completions:
    """Read a decision endpoint's answer (`adapters.decisions`): one completion (only the classes asked,
    ``labels``, read), its usage, its tier."""
    item = read_decision(shape, raw, who, labels)
    tier = _tier_said(raw)
    usage_raw = raw.get("usage")
    if not isinstance(usage_raw, dict) or "input_tokens" not in usage_raw:  # unknown, never 0
        return Completions([item], Charge(), None, tier, "no usage said", _model_said(raw))
    try:
        usage = replace(billed_usage(usage_raw), queries=1)
    except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        return Completions([item], Charge(), None, tier, f"unreadable usage ({exc})", _model_said(raw))
    return Completions([item], usage, 1, tier, served_model=_model_said(raw))


def billed_usage(raw: dict[str, Any]) -> Charge:
    """One answer's usage as the provider bills it, whatever its shape, as a `Charge` whose
    ``prompt_tokens`` are every input token (cache reads and writes among them) and whose
    ``completion_tokens`` are every output token (reasoning among them):

    - OpenAI, vLLM (``--enable-prompt-tokens-details``), llama.cpp, OpenRouter and Gemini's
      OpenAI-compatible endpoint: ``prompt_tokens`` counts every input token;
      ``prompt_tokens_details.cached_tokens`` (reads) and ``.cache_write_tokens`` (writes) are
      among them; ``completion_tokens_details.reasoning_tokens`` are among ``completion_tokens``.
    - Anthropic: ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are *not* among
      ``input_tokens`` (nor the ``prompt_tokens`` beside them): they are added.
    - Gemini (``usageMetadata``): ``cachedContentTokenCount`` is among ``promptTokenCount``;
      ``thoughtsTokenCount`` is *not* among ``candidatesTokenCount``: it is added.
    """
    if "promptTokenCount" in raw:  # Gemini's own shape
        thoughts = _count(raw, "thoughtsTokenCount")
        return Charge(
            prompt_tokens=_count(raw, "promptTokenCount"),
            completion_tokens=_count(raw, "candidatesTokenCount") + thoughts,
            cache_read_tokens=_count(raw, "cachedContentTokenCount"),
            reasoning_tokens=thoughts,
        )
    prompt = _count(raw, "prompt_tokens") if "prompt_tokens" in raw else _count(raw, "input_tokens")
    completion = _count(raw, "completion_tokens") if "completion_tokens" in raw else _count(raw, "output_tokens")
    details = raw.get("prompt_tokens_details") or raw.get("input_tokens_details") or {}
    read, write = _count(details, "cached_tokens"), _count(details, "cache_write_tokens")
    anthropic_read, anthropic_write = _count(raw, "cache_read_input_tokens"), _count(raw, "cache_creation_input_tokens")
    out = raw.get("completion_tokens_details") or raw.get("output_tokens_details") or {}
    return Charge(
        prompt_tokens=prompt + anthropic_read + anthropic_write,
        completion_tokens=completion,
        cache_read_tokens=read + anthropic_read,
        cache_write_tokens=write + anthropic_write,
        reasoning_tokens=_count(out, "reasoning_tokens"),
    )


def request_body(
    endpoint: Literal["completions", "chat", "decisions", "systemone"],
    model: str,
    prompts: list[str],
    params: CompletionParams,
    effort: str | None,
) -> dict[str, Any]:
    """One request's body (either transport's): a list of prompts for completions, one for the others;
    a reasoning model (``effort``) gets its effort on chat, a bound covering its reasoning and no
    temperature; a decision endpoint the labels as its choices (`adapters.decisions`)."""
    if endpoint in ("decisions", "systemone"):
        (prompt,) = prompts
        return decision_body(endpoint, model, prompt, params.answers)
    body: dict[str, Any] = {"model": model}
    if endpoint == "completions":
        body |= {"prompt": prompts if len(prompts) > 1 else prompts[0], "max_tokens": params.max_tokens}
    else:
        (prompt,) = prompts
        bound = "max_completion_tokens" if effort is not None else "max_tokens"
        body |= {"messages": [{"role": "user", "content": prompt}], bound: params.max_tokens}
    if effort is not None:  # a reasoning model: its bound covers reasoning; its own temperature
        if endpoint == "chat":
            body["reasoning_effort"] = effort
    else:
        body["temperature"] = params.temperature
    if params.top_logprobs and endpoint == "completions":
        body["logprobs"] = params.top_logprobs
    elif params.top_logprobs and effort is None:  # a reasoning model refuses them
        body |= {"logprobs": True, "top_logprobs": params.top_logprobs}
    return body


def combined(results: Sequence[Completions]) -> Completions:
    """The answers of one call sent as several requests, in order: their usage added, covering every
    prompt only if each request's did, at the dearest tier served (`_served_tier`), unread if any was."""
    items = [item for r in results for item in r.items]
    covered = [r.usage_prompts for r in results]
    told = None if None in covered else sum(c for c in covered if c is not None)
    unread = next((r.usage_error for r in results if r.usage_error), "")
    usage = sum((r.usage for r in results), Charge())
    served = next((r.served_model for r in results if r.served_model is not None), None)
    return Completions(items, usage, told, _served_tier([r.service_tier for r in results]), unread, served)


def _served_tier(tiers: list[str | None]) -> str | None:
    """The tier to bill requests answered at ``tiers``: the one they share, else the dearest said
    (priority, then default: a call split over tiers is never billed below what it cost)."""
    said = {t for t in tiers if t is not None}
    if len(said) <= 1:
        return next(iter(said), None)
    return next((t for t in ("priority", "default") if t in said), sorted(said)[0])


def _count(raw: Any, key: str) -> int:
    """A token count of a usage object (absent or null: 0); anything but a count >= 0 is a `ValueError`."""
    value = raw.get(key) if isinstance(raw, dict) else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise ValueError(f"{key} is not a token count: {value!r}")
    return int(value)


def _cut(choice: dict[str, Any]) -> bool:
    """Whether an answer ended at the output bound before any text (``finish_reason`` "length")."""
    return choice.get("finish_reason") == "length" and not _text(choice).strip()


def _text(choice: dict[str, Any]) -> str:
    if "text" in choice and choice["text"] is not None:
        return str(choice["text"])
    return str(choice["message"]["content"] or "")


def _first_token(logprobs: Any) -> tuple[dict[str, float] | None, str | None]:
    """The first generated token's alternatives and the token chosen, from any of:

    - chat shape (chat completions; llama-server's completions too):
      ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}``
    - legacy shape (OpenAI/vLLM completions, llama-cpp-python):
      ``{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}]}``

    A log-probability that is not a number is kept as NaN, which `Completion` drops; alternatives
    listed twice under one text are added (two tokens spelling it), NaN if either is unreadable.
    """
    if not logprobs:
        return None, None
    content = logprobs.get("content")
    if content:
        first = content[0]
        chosen = str(first["token"]) if first.get("token") is not None else None
        listed: dict[str, list[float]] = {}
        for t in first.get("top_logprobs") or []:
            listed.setdefault(str(t["token"]), []).append(_number(t.get("logprob")))
        top = {token: logsumexp(values) for token, values in listed.items()}
        if chosen is not None and (chosen not in top or math.isnan(top[chosen])):
            top[chosen] = _number(first.get("logprob"))
        return top or None, chosen
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    chosen = str(tokens[0]) if tokens and tokens[0] is not None else None
    legacy = logprobs.get("top_logprobs")
    if legacy:
        return {str(k): _number(v) for k, v in legacy[0].items()} or None, chosen
    if chosen is not None and values:
        return {chosen: _number(values[0])}, chosen
    return None, chosen


def _number(value: Any) -> float:
    """A log-probability as a float: NaN when it is none (null, a string that is not a number)."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
