"""What both OpenAI transports share (`OpenAIBackend`): their settings checked once, their identity, their
chunking of prompts into requests, and what no message of theirs may show.

`OpenAICompatibleBackend` (aiohttp) and `OpenAIClientBackend` (the user's openai SDK client) differ only in
how a request leaves and what it can be sent to; a setting means the same on both and is refused the same way.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .. import ClassifierError, ConfigError
from ..extend import CompletionParams, Completions, refuse_credentials, remember, scrub
from .openai_wire import NO_TIER_FOR_DECISIONS, REASONING_EFFORTS, Endpoint, combined, reasoning_effort_for

__all__ = ["DECIDING", "OpenAIBackend"]

DECIDING = ("decisions", "systemone")
"""The endpoints that answer with the labels' probabilities (`decisions`)."""


class OpenAIBackend:
    """The settings, identity and chunking of an OpenAI-shaped backend; a subclass sends one request
    (`_request`) and says what no message may show (`_secrets`).

    model: the name requests send (for Azure, the deployment); price_as: the model it is priced (and
    counted) as, when that differs (default ``model``). endpoint: one of the subclass's ``ENDPOINTS``.
    timeout: seconds a request to a remote server is waited for; max_request_size: prompts per
    /completions request (1 elsewhere); max_connections: requests in flight. service_tier: asked of the
    server with every request; reasoning_effort: how hard a reasoning model is asked to reason ("auto":
    the lowest OpenAI's model of that name takes, None for other models); local: whether the server runs
    on this machine (default: its URLs are loopback ones).
    """

    ENDPOINTS: tuple[str, ...] = ("chat", "completions", *DECIDING)

    def __init__(
        self,
        model: str,
        *,
        price_as: str | None,
        endpoint: str,
        timeout: float,
        max_request_size: int,
        max_connections: int,
        service_tier: str | None,
        reasoning_effort: str | None,
        local: bool | None,
        named: Mapping[str, Any] = {},  # noqa: B006 (read only)
    ) -> None:
        if not model or not isinstance(model, str):
            raise ConfigError("model must be named (for Azure OpenAI, the deployment)")
        if endpoint not in self.ENDPOINTS:
            raise ConfigError(f"endpoint must be one of {', '.join(self.ENDPOINTS)}, got {endpoint!r}")
        if not 0 < timeout < math.inf or max_request_size < 1 or max_connections < 1:  # nan is not a timeout
            raise ConfigError("timeout (finite), max_request_size and max_connections must be positive")
        if service_tier is not None and (not isinstance(service_tier, str) or not service_tier.strip()):
            raise ConfigError(f"service_tier must be a tier's name (flex, priority, ...), got {service_tier!r}")
        if service_tier is not None and endpoint in DECIDING:
            raise ConfigError(NO_TIER_FOR_DECISIONS)
        if reasoning_effort is not None and reasoning_effort not in (*REASONING_EFFORTS, "auto"):
            efforts = ", ".join(REASONING_EFFORTS)
            raise ConfigError(f"reasoning_effort must be one of {efforts}, got {reasoning_effort!r}")
        remember(*self._secrets())  # known by value: no file, report or message of this process shows them
        refuse_credentials({"model": model, "price_as": price_as, **named}, *self._secrets())
        self.served_model = model
        self.model = price_as or model  # what its price is looked up as (Backend.model)
        self.endpoint = cast(Endpoint, endpoint)
        self.timeout = timeout
        self.max_request_size = max_request_size if endpoint == "completions" else 1
        self.max_connections = max_connections
        self.service_tier = service_tier
        self.reasoning_effort = reasoning_effort_for(self.model) if reasoning_effort == "auto" else reasoning_effort
        self.local = local

    @property
    def identity(self) -> str:
        """The model as its answers depend on it: the name served, the endpoint, the price's name if another."""
        priced = f":priced-as:{self.model}" if self.model != self.served_model else ""
        return f"openai:{self.served_model}:{self.endpoint}{priced}"

    @property
    def decides(self) -> bool:
        """A decision endpoint: it answers with the labels' probabilities (`decisions`)."""
        return self.endpoint in DECIDING

    @property
    def per_message(self) -> int:
        """Tokens a chat message adds around its content (for tiktoken's count)."""
        return 7 if self.endpoint == "chat" else 0

    async def complete(self, prompts: Sequence[str], params: CompletionParams) -> Completions:
        """The prompts in requests of ``max_request_size``, sent concurrently, their answers in order."""
        step = self.max_request_size
        parts = [list(prompts[i : i + step]) for i in range(0, len(prompts), step)]
        try:
            context = await self._before_sending(prompts, params)
            return combined(await asyncio.gather(*(self._request(part, params, context) for part in parts)))
        except ClassifierError as exc:  # whatever a server echoed: no key or header value goes further
            raise scrub(exc, self._secrets()) from None

    async def _before_sending(self, prompts: Sequence[str], params: CompletionParams) -> Any:
        """What every request of one call needs asked first (nothing, unless a subclass says)."""
        return None

    async def _request(self, prompts: list[str], params: CompletionParams, context: Any) -> Completions:
        raise NotImplementedError

    def _secrets(self) -> tuple[str | None, ...]:
        """What no message may show (an API key, header values); set before ``__init__`` runs."""
        raise NotImplementedError
