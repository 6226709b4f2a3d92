"""One backend for every OpenAI-compatible server (OpenAI, vLLM, llama.cpp), over aiohttp.

Endpoints: ``/completions`` with a list of prompts per request (vLLM and llama-server take one),
``/chat/completions`` (one prompt a request: hosted chat models) and the decision endpoints. The
wire format is `llm_anchors.backends.openai_wire`'s (the SDK transport, `llm_anchors.backends.openai_client`, reads and
writes the same); the session and its error map are `llm_anchors.backends.transport`'s.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Literal, cast
from urllib.parse import urlparse

from .. import BackendError, BackendTimeoutError, BadResponseError, ConfigError
from ..extend import (
    CompletionParams,
    Completions,
    PromptTooLongError,
    TokenCounter,
    header_secrets,
    redact,
    shown_url,
)
from .decisions import DecisionCounter, Shape
from .openai_base import OpenAIBackend
from .openai_wire import (
    PATHS,
    Pace,
    is_loopback,
    parse_decision,
    parse_response,
    request_body,
)
from .token_counters import FallbackCounter, ServerTokenCounter, TiktokenCounter, fallback_counter
from .transport import Session, check_proxies, endpoint_url
from .vllm_api import LabelTokens, VllmInfo, label_request, probe, read_label_logprobs

__all__ = ["OpenAICompatibleBackend"]


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


class OpenAICompatibleBackend(OpenAIBackend):
    """Completes prompts on one model served at one or more base URLs, over aiohttp.

    base_url: ``http://host:port/v1``, or a list of replicas of the same
        model; requests are spread over them in turn.
    endpoint: "completions" (list prompts), "chat", "decisions", "systemone" or "auto" (chat for
        api.openai.com, completions elsewhere).
    api_key: taken from ``$api_key_env`` (OPENAI_API_KEY) when not given;
        never logged, never part of ``identity`` or ``repr``.
    timeout: seconds a request to a remote server is waited for (longer when it carries more than
        the server answers in that time); a server on this machine is waited for until it answers,
        never sent the request again. Both end at the call's deadline (`RetryPolicy.max_elapsed`).
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
    local: whether the server runs on this machine (default: whether every URL
        is a loopback one, `is_loopback`): a local model whose name has no price
        costs nothing, and a request to it is waited for until it answers.
    Every other setting as `OpenAIBackend` has it.
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
        local: bool | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ConfigError("base_url must be one or more http(s) URLs, got none")
        for url in urls:
            _check_url(url, key)
        self._api_key = _Secret(key)
        self._extra_headers = _check_headers(headers or {})
        self.base_urls = [endpoint_url(u, "") for u in urls]  # no trailing slash
        if endpoint == "auto":
            endpoint = "chat" if self.is_openai else "completions"
        super().__init__(model, price_as=price_as, endpoint=endpoint, timeout=timeout,
                         max_request_size=max_request_size, max_connections=max_connections,
                         service_tier=service_tier, reasoning_effort=reasoning_effort, local=local,
                         named={"base_url": urls})  # fmt: skip
        check_proxies(os.environ)  # aiohttp reads them (trust_env): one it cannot use is refused now, not mid-run
        self.extra_body = dict(extra_body or {})
        if service_tier is not None:
            self.extra_body["service_tier"] = service_tier
        self._next_url = itertools.cycle(self.base_urls)
        self._transport: Session | None = None
        self._counter: FallbackCounter | None = None
        self._probe_lock = asyncio.Lock()
        self._probed = False
        self._vllm: VllmInfo | None = None
        self._labels = LabelTokens()
        self._pace = Pace()

    @property
    def is_local(self) -> bool:
        """Served from this machine (``local``, else every URL loopback): a model whose name has no price costs
        nothing, and a request is waited for until it answers."""
        return self.local if self.local is not None else all(is_loopback(u) for u in self.base_urls)

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
        per_message = self.per_message
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
            server = ServerTokenCounter(
                self.base_urls[0], model=self.served_model, session=self._get_transport, vllm=self.server_vllm
            )
            self._counter = FallbackCounter(server, fallback_counter(self.model))
        return self._counter

    def __repr__(self) -> str:
        urls = [shown_url(u) for u in self.base_urls]
        return f"OpenAICompatibleBackend({urls!r}, model={self.served_model!r}, endpoint={self.endpoint!r})"

    async def _before_sending(self, prompts: Sequence[str], params: CompletionParams) -> dict[int, str] | None:
        """On vLLM, the prompts checked against its context and the labels' token ids asked; a failure here is
        of a request that never left for the model (``sent`` false: not billed, not counted as queries)."""
        try:
            if (vllm := await self.vllm()) is None:
                return None
            await self._check_fits(prompts, params, vllm)
            return await self.label_tokens(params) if params.answers and params.top_logprobs else None
        except BackendError as exc:
            exc.sent = False
            raise

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
        session = Session(self._headers(), min(self.timeout, 10.0), 1, self._secrets())
        try:
            raw = await session.get_json(endpoint_url(self.base_urls[0], "/models"))
        except BackendError:
            return None
        finally:
            await session.aclose()
        data = raw.get("data") if isinstance(raw, dict) else None
        if not isinstance(data, list):
            return None
        return sorted(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)

    async def vllm(self) -> VllmInfo | None:
        """The vLLM server behind a completions endpoint, None for any other server or endpoint
        (llama.cpp, OpenAI, a chat endpoint): what decides the label reads and the length check."""
        return await self.server_vllm() if self.endpoint == "completions" else None

    async def server_vllm(self) -> VllmInfo | None:
        """The first server, when it is vLLM (asked once: ``/version``, ``/v1/models``), whatever the
        endpoint; None for any other (OpenAI is not asked). The one answer to "is this vLLM?": its
        /tokenize's request shape is this answer's too."""
        if self.is_openai:
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
        is waited for until it answers: it is never sent a request it may still be working on. Either
        wait ends at the call's deadline (`RetryPolicy.max_elapsed`), which its caller holds."""
        if self.is_local:
            return await call
        patience = self._pace.deadline(n, self.timeout)
        try:
            return await asyncio.wait_for(call, timeout=patience)
        except TimeoutError:
            where = shown_url(endpoint_url(base, PATHS[self.endpoint]))
            raise BackendTimeoutError(f"no answer from {where} in {patience:.0f} s", classifier=self.identity) from None

    def _body(self, prompts: list[str], params: CompletionParams) -> dict[str, Any]:
        return request_body(self.endpoint, self.served_model, prompts, params, self.reasoning_effort) | self.extra_body

    def _headers(self) -> dict[str, str]:
        """Every request's headers: the API key as a bearer token, and the user's (``headers``)."""
        auth = {"Authorization": f"Bearer {self._api_key.value}"} if self._api_key.value else {}
        return auth | self._extra_headers.value

    def _get_transport(self) -> Session:
        loop = asyncio.get_running_loop()
        if self._transport is None or self._transport.loop is not loop:
            self._transport = Session(self._headers(), self.timeout, self.max_connections, self._secrets())
        return self._transport


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


def _token_id(value: Any) -> bool:
    """Whether ``value`` reads as a token id (an integer, or a float that is one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
