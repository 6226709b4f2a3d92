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
    refuse_credentials,
    remember,
    scrub,
    shown_url,
)
from .decisions import DecisionCounter
from .openai_wire import (
    NO_TIER_FOR_DECISIONS,
    REASONING_EFFORTS,
    Pace,
    combined,
    error_of,
    is_loopback,
    parse_decision,
    parse_response,
    reasoning_effort_for,
    request_body,
)
from .token_counters import TiktokenCounter
from .transport import check_proxies

__all__ = ["OpenAIClientBackend", "client_secrets", "map_sdk_error"]

Endpoint = Literal["chat", "completions", "decisions"]


class OpenAIClientBackend:
    """Completes prompts through ``client`` (an ``openai.AsyncOpenAI`` or ``AsyncAzureOpenAI``).

    model: what the client sends (for Azure, the deployment's name).
    price_as: the model it is priced as, when that differs (an Azure deployment named "prod-4o"
        runs ``gpt-4o``); default ``model``.
    endpoint: "chat" (one prompt a request), "completions" (a list of prompts a request) or
        "decisions" (``client.decisions.create``: one input a request, the labels as a choice
        question's choices: `llm_anchors.backends.decisions`).
    timeout: seconds for one request; max_connections: requests in flight.
    service_tier, reasoning_effort, local: as `OpenAICompatibleBackend` has them.
    """

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
        if not model:
            raise ConfigError("model must be named (for Azure OpenAI, the deployment)")
        if endpoint not in ("chat", "completions", "decisions"):
            raise ConfigError(f"endpoint must be chat, completions or decisions, got {endpoint!r}")
        if reasoning_effort is not None and reasoning_effort not in (*REASONING_EFFORTS, "auto"):
            efforts = ", ".join(REASONING_EFFORTS)
            raise ConfigError(f"reasoning_effort must be one of {efforts}, got {reasoning_effort!r}")
        self._client = client.with_options(max_retries=0, timeout=timeout)
        self._timeout = timeout
        self._pace = Pace()  # a request that carries more than the server answers in ``timeout`` waits longer
        self._secrets = client_secrets(client)
        remember(*self._secrets)  # known by value: no file, report or message of this process shows them
        check_proxies(os.environ, variables=("http_proxy", "https_proxy", "all_proxy"), schemes=_proxy_schemes())
        refuse_credentials({"model": model, "price_as": price_as}, *self._secrets)
        self.deployment = model
        self.priced_as = price_as or model
        self.endpoint = endpoint
        self._request_size = max_request_size if endpoint == "completions" else 1
        self._semaphore = asyncio.Semaphore(max_connections)  # bound to a loop at its first wait
        if service_tier is not None and endpoint == "decisions":
            raise ConfigError(NO_TIER_FOR_DECISIONS)
        self._service_tier = service_tier
        self._effort = reasoning_effort_for(self.priced_as) if reasoning_effort == "auto" else reasoning_effort
        self._local = local

    @property
    def identity(self) -> str:
        return f"openai-client:{self.priced_as}:{self.deployment}:{self.endpoint}"

    @property
    def model(self) -> str:
        """The model's name for its price (``price_as``)."""
        return self.priced_as

    @property
    def served_model(self) -> str:
        """The name requests send (for Azure, the deployment's)."""
        return self.deployment

    @property
    def api_url(self) -> str:
        return shown_url(str(self._client.base_url))

    @property
    def is_local(self) -> bool:
        """Served from this machine (``local``, else its URL is loopback): priced as local, and a request is
        waited for until it answers."""
        return self._local if self._local is not None else is_loopback(str(self._client.base_url))

    @property
    def decides(self) -> bool:
        """A decision endpoint: it answers with the labels' probabilities (`llm_anchors.backends.decisions`)."""
        return self.endpoint == "decisions"

    @property
    def service_tier(self) -> str | None:
        return self._service_tier

    @property
    def reasoning_effort(self) -> str | None:
        return self._effort

    @property
    def max_request_size(self) -> int:
        return self._request_size

    def token_counter(self) -> TokenCounter | None:
        """tiktoken with the encoding of the priced model (o200k_base for a name it does not know); a
        decision's question on top (`DecisionCounter`)."""
        if self.endpoint == "decisions":
            return DecisionCounter(TiktokenCounter(self.priced_as, per_message=0))
        return TiktokenCounter(self.priced_as, per_message=7 if self.endpoint == "chat" else 0)

    def __repr__(self) -> str:
        return f"OpenAIClientBackend({self.api_url!r}, model={self.deployment!r}, price_as={self.priced_as!r})"

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions:
        step = self._request_size
        parts = [list(prompts[i : i + step]) for i in range(0, len(prompts), step)]
        return combined(await asyncio.gather(*(self._request(part, params) for part in parts)))

    async def aclose(self) -> None:
        """The client is the user's: it stays open (they close it)."""

    async def _request(self, prompts: list[str], params: CompletionParams) -> Completions:
        body = request_body(self.endpoint, self.deployment, prompts, params, self._effort)
        if self._service_tier is not None:
            body["service_tier"] = self._service_tier
        resource = {"decisions": self._client.decisions, "chat": self._client.chat.completions,
                    "completions": self._client.completions}[self.endpoint]  # fmt: skip
        async with self._semaphore:
            try:
                started = time.monotonic()
                patience = None if self.is_local else self._pace.deadline(len(prompts), self._timeout)
                answer = (await resource.with_raw_response.create(**body, timeout=patience)).parse()
                self._pace.add((time.monotonic() - started) / len(prompts))
            except Exception as exc:
                mapped = map_sdk_error(exc, self.identity, self._secrets)
                if mapped is None:
                    raise
                raise mapped from None  # the SDK's error holds the server's body whole, secrets and all
        if not callable(getattr(answer, "model_dump", None)):  # the SDK hands back a body it could not read
            raise BadResponseError("answer is not JSON", classifier=self.identity, transient=True)
        said = answer.model_dump(mode="json", exclude_unset=True, warnings=False)  # read as said, NaN and all
        if self.endpoint == "decisions":
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
