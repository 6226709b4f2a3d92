"""The user's own OpenAI client as a backend: `AsyncOpenAI`, `AsyncAzureOpenAI`, or any client of the SDK.

Users hand over the client their application already has because their authentication and routing
live in it (Azure AD token providers, organisation and project, default headers and query, proxies,
their own ``http_client``). The backend sends through a copy with the SDK's own retries off
(``with_options(max_retries=0)``): the budgeted retry owns every attempt, so nothing is sent twice
unseen. Answers are read as dicts by the same reader as the aiohttp backend (`parse_response`), so
usage (cached, cache-write and reasoning tokens, ``service_tier``) means the same whichever transport
carried it; the SDK's connection errors are mapped here, its error statuses by the same `error_of` as aiohttp's.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Literal

from .. import BackendError, BackendTimeoutError, BadResponseError, ConfigError
from ..extend import (
    CompletionParams,
    Completions,
    TokenCounter,
    UnreachableError,
    header_secrets,
    scrub,
    shown_url,
)
from .decisions import DecisionCounter
from .openai_base import OpenAIBackend
from .openai_wire import (
    Pace,
    error_of,
    is_loopback,
    parse_decision,
    parse_response,
    request_body,
)
from .token_counters import TiktokenCounter
from .transport import check_proxies

__all__ = ["OpenAIClientBackend", "client_secrets", "map_sdk_error"]

Endpoint = Literal["chat", "completions", "decisions"]


class OpenAIClientBackend(OpenAIBackend):
    """Completes prompts through ``client`` (an ``openai.AsyncOpenAI`` or ``AsyncAzureOpenAI``).

    model: what the client sends (for Azure, the deployment's name).
    price_as: the model it is priced as, when that differs (an Azure deployment named "prod-4o"
        runs ``gpt-4o``); default ``model``.
    endpoint: "chat" (one prompt a request), "completions" (a list of prompts a request) or
        "decisions" (``client.decisions.create``: one input a request, the labels as a choice
        question's choices: `decisions`).
    Every other setting as `OpenAIBackend` has it.
    """

    ENDPOINTS = ("chat", "completions", "decisions")

    def __init__(
        self,
        client: Any,
        model: str,
        *,
        price_as: str | None = None,
        endpoint: Endpoint = "chat",
        timeout: float = 60.0,
        max_request_size: int = 16,
        max_connections: int = 32,
        service_tier: str | None = None,
        reasoning_effort: str | None = "auto",
        local: bool | None = None,
    ) -> None:
        if not callable(getattr(client, "with_options", None)) or not hasattr(client, "chat"):
            raise ConfigError(f"client must be an openai AsyncOpenAI or AsyncAzureOpenAI, got {type(client).__name__}")
        self._client_secrets = client_secrets(client)
        super().__init__(model, price_as=price_as, endpoint=endpoint, timeout=timeout,
                         max_request_size=max_request_size, max_connections=max_connections,
                         service_tier=service_tier, reasoning_effort=reasoning_effort, local=local)  # fmt: skip
        check_proxies(os.environ, variables=("http_proxy", "https_proxy", "all_proxy"), schemes=_proxy_schemes())
        self._client = client.with_options(max_retries=0, timeout=timeout)
        self._pace = Pace()  # a request that carries more than the server answers in ``timeout`` waits longer
        self._semaphore = asyncio.Semaphore(max_connections)  # bound to a loop at its first wait

    def _secrets(self) -> tuple[str | None, ...]:
        return self._client_secrets

    @property
    def api_url(self) -> str:
        return shown_url(str(self._client.base_url))

    @property
    def is_local(self) -> bool:
        """Served from this machine (``local``, else its URL is loopback): priced as local, and a request is
        waited for until it answers."""
        return self.local if self.local is not None else is_loopback(str(self._client.base_url))

    def token_counter(self) -> TokenCounter | None:
        """tiktoken with the encoding of the priced model (o200k_base for a name it does not know); a
        decision's question on top (`DecisionCounter`)."""
        if self.decides:
            return DecisionCounter(TiktokenCounter(self.model, per_message=0))
        return TiktokenCounter(self.model, per_message=self.per_message)

    def __repr__(self) -> str:
        return f"OpenAIClientBackend({self.api_url!r}, model={self.served_model!r}, price_as={self.model!r})"

    async def aclose(self) -> None:
        """The client is the user's: it stays open (they close it)."""

    async def _request(self, prompts: list[str], params: CompletionParams, context: Any) -> Completions:
        body = request_body(self.endpoint, self.served_model, prompts, params, self.reasoning_effort)
        if self.service_tier is not None:
            body["service_tier"] = self.service_tier
        resource = {"decisions": self._client.decisions, "chat": self._client.chat.completions,
                    "completions": self._client.completions}[self.endpoint]  # fmt: skip
        async with self._semaphore:
            try:
                started = time.monotonic()
                patience = None if self.is_local else self._pace.deadline(len(prompts), self.timeout)
                answer = (await resource.with_raw_response.create(**body, timeout=patience)).parse()
                self._pace.add((time.monotonic() - started) / len(prompts))
            except Exception as exc:
                mapped = map_sdk_error(exc, self.identity, self._secrets())
                if mapped is None:
                    raise
                raise mapped from None  # the SDK's error holds the server's body whole, secrets and all
        if not callable(getattr(answer, "model_dump", None)):  # the SDK hands back a body it could not read
            raise BadResponseError("answer is not JSON", classifier=self.identity, transient=True)
        said = answer.model_dump(mode="json", exclude_unset=True, warnings=False)  # read as said, NaN and all
        if self.decides:
            return parse_decision("decisions", said, self.identity, params.answers)
        return parse_response(said, len(prompts), self.identity)


def _proxy_schemes() -> tuple[str, ...]:
    """The proxies httpx (the SDK's transport) speaks here: socks only with its extra (socksio) installed."""
    import importlib.util

    speaks_socks = importlib.util.find_spec("socksio") is not None
    return ("http", "https", "socks5", "socks5h") if speaks_socks else ("http", "https")


def client_secrets(client: Any) -> tuple[str, ...]:
    """What no message may show of a client: its API key (Azure's too) and the values of its auth and
    custom headers (`header_secrets`)."""
    key = getattr(client, "api_key", None)
    headers: dict[str, Any] = {}
    for name in ("auth_headers", "_custom_headers"):
        said = getattr(client, name, None)
        headers |= said if isinstance(said, dict) else {}
    return (*([key] if isinstance(key, str) and key else []), *header_secrets(headers))


def map_sdk_error(exc: BaseException, who: str, secrets: Sequence[str | None] = ()) -> BackendError | None:
    """The openai SDK's error as the project's (None: not the SDK's), with ``secrets`` and anything shaped
    like a credential taken out of what the server said. A status error keeps the ``x-request-id`` the
    provider gave it, for its support."""
    mapped = _mapped(exc, who, secrets)
    return scrub(mapped, secrets) if mapped is not None else None


def _mapped(exc: BaseException, who: str, secrets: Sequence[str | None]) -> BackendError | None:
    """What `transport.mapped_errors` and `error_of` make of the same failure over aiohttp."""
    import openai

    if not isinstance(exc, openai.APIError):
        return None
    where = shown_url(str(exc.request.url))
    if isinstance(exc, openai.APIConnectionError) and _never_left(exc):
        return UnreachableError(f"no connection to {where}: {_cause(exc)}", classifier=who)
    if isinstance(exc, openai.APITimeoutError):
        return BackendTimeoutError(f"no answer from {where} in time", classifier=who)
    if isinstance(exc, openai.APIConnectionError):
        return BackendTimeoutError(f"connection to {where} dropped: {_cause(exc)}", classifier=who)
    if isinstance(exc, openai.APIResponseValidationError):
        return BadResponseError(f"unreadable answer: {exc}", classifier=who)
    if not isinstance(exc, openai.APIStatusError):
        return None
    try:
        body = exc.response.text
    except Exception:  # httpx's ResponseNotRead: what the SDK read of it
        body = json.dumps(exc.body) if exc.body is not None else exc.message
    return error_of(exc.status_code, body, exc.response.headers, who, where, secrets)


def _cause(exc: BaseException) -> str:
    """The name of the error under the SDK's (httpx's ConnectError, ReadError, ...)."""
    return type(exc.__cause__ or exc.__context__ or exc).__name__


_NOT_SENT = {"ConnectError", "ConnectTimeout", "ProxyError", "PoolTimeout", "UnsupportedProtocol"}
"""httpx's (and httpcore's) errors raised before a request left: no connection, or none to be had."""


def _never_left(exc: BaseException) -> bool:
    """Whether the SDK's connection error was raised before its request left (its cause, one of httpx's
    errors, is `_NOT_SENT`): the request cannot have been billed."""
    cause = exc.__cause__ or exc.__context__
    return cause is not None and any(kind.__name__ in _NOT_SENT for kind in type(cause).__mro__)
