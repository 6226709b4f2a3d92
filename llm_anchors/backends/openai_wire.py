"""The OpenAI wire format, read and written the same way by both transports (aiohttp's
`llm_anchors.backends.openai_compat`, the user's own SDK client in `llm_anchors.backends.openai_client`).

What a request carries (`request_body`), how an answer and its usage read (`parse_response`,
`parse_decision`, `billed_usage`), how a call sent as several requests adds up (`combined`), what an
error status means (`error_of`: one map, whichever transport met it) and how long a request of ``n``
prompts is waited for (`Pace`). Nothing here sends a request.
"""

from __future__ import annotations

import email.utils
import ipaddress
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlparse

from .. import BackendError, BadResponseError, ConfigError, RateLimitError
from ..extend import (
    Alternatives,
    Charge,
    Completion,
    CompletionParams,
    Completions,
    PromptTooLongError,
    RequestRejectedError,
    redact,
)
from .decisions import Shape, decision_body, read_decision

__all__ = [
    "NO_TIER_FOR_DECISIONS", "PATHS", "REASONING_EFFORTS", "Pace", "billed_usage", "combined", "error_of",
    "is_loopback", "parse_decision", "parse_response", "reasoning_effort_for", "request_body", "retry_after",
]  # fmt: skip

Endpoint = Literal["completions", "chat", "decisions", "systemone"]


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
    """Whether ``url`` names this machine: a loopback address (``127.0.0.0/8``, ``::1``, an IPv4-mapped one),
    the unspecified one a server listens on (``0.0.0.0``, ``::``: what vLLM prints), or ``localhost`` (with
    or without its final dot, and its subdomains). No name is looked up."""
    try:
        host = (urlparse(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


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


PATHS = {
    "completions": "/completions",
    "chat": "/chat/completions",
    "decisions": "/decisions",
    "systemone": "/systemone",
}


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


def error_of(
    status: int, body: str, headers: Mapping[str, str], who: str, where: str = "", secrets: Sequence[str | None] = ()
) -> BackendError:
    """The project's error for an HTTP error status, whichever transport met it: 429 a `RateLimitError`
    waiting as its headers say (`retry_after`); a 400 saying the prompt passes the model's context
    (OpenAI's ``context_length_exceeded``, vLLM's ``param`` "input_tokens") a `PromptTooLongError`, any
    other 400 a `RequestRejectedError`; the rest a `BackendError` with its status (5xx retried).
    ``where`` (the URL as shown) names the page; the provider's ``x-request-id`` is kept, for its
    support. The body is redacted (``secrets``, anything shaped like a credential) before it is cut to
    a message's length: a secret cut in two would pass."""
    body = redact(body, *secrets)
    message, param, code = _error_said(body)
    detail = message or body.strip().replace("\n", " ")[:200]
    request_id = headers.get("x-request-id")
    told = f"{detail} (x-request-id {request_id})" if request_id else detail
    if status == 429:
        return RateLimitError(f"HTTP 429: {told}", classifier=who, retry_after=retry_after(headers))
    if status == 400:
        if code == "context_length_exceeded" or param == "input_tokens":
            return PromptTooLongError(f"HTTP 400: {told}", classifier=who, param=param)
        return RequestRejectedError(f"HTTP 400: {told}", classifier=who, param=param)
    at = f" at {where}" if where else ""
    return BackendError(f"HTTP {status}{at}: {told}", classifier=who, status=status)


def _error_said(text: str) -> tuple[str, str | None, str | None]:
    """The message, ``param`` and ``code`` of an OpenAI-shaped error body (``{"error": {"message",
    "type", "param", "code"}}``: OpenAI, vLLM); ("", None, None) for any other body."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return "", None, None
    if not isinstance(error, dict):
        return "", None, None
    param, code = error.get("param"), error.get("code")
    return (
        str(error.get("message") or "")[:300],
        param if isinstance(param, str) and param else None,
        code if isinstance(code, str) and code else None,
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """When to try again after a 429: ``Retry-After`` (seconds or an HTTP date), else the later of
    OpenAI's ``x-ratelimit-reset-requests`` and ``-tokens`` (durations like "1s", "6m0s", "120ms")."""
    said = parse_retry_after(headers.get("retry-after"))
    if said is not None:
        return said
    resets = [_seconds(headers.get(f"x-ratelimit-reset-{kind}")) for kind in ("requests", "tokens")]
    known = [r for r in resets if r is not None]
    return max(known) if known else None


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?")


def _seconds(value: str | None) -> float | None:
    match = _DURATION.fullmatch(value.strip()) if value else None
    if match is None or not any(match.groups()):
        return None
    h, m, s, ms = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s + ms / 1000


def parse_response(
    raw: dict[str, Any],
    n_prompts: int,
    who: str,
    alternatives: Callable[[dict[str, Any]], tuple[Alternatives | None, str | None]] | None = None,
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


def _completion(
    choice: dict[str, Any], alternatives: Callable[[dict[str, Any]], tuple[Alternatives | None, str | None]] | None
) -> Completion:
    """One choice as a completion: its text, its first token's alternatives and the token chosen."""
    top, chosen = alternatives(choice) if alternatives is not None else _first_token(choice.get("logprobs"))
    return Completion(_text(choice), top, _cut(choice), chosen, _tokens(choice.get("logprobs")), _calls(choice))


def _model_said(raw: dict[str, Any]) -> str | None:
    """The model an answer says served it (None: it says none)."""
    model = raw.get("model")
    return model if isinstance(model, str) and model.strip() else None


def _tier_said(raw: dict[str, Any]) -> str | None:
    """The service tier an answer says it was served at (None: it says none)."""
    tier = raw.get("service_tier")
    return tier if isinstance(tier, str) and tier else None


def parse_decision(shape: Shape, raw: dict[str, Any], who: str, labels: Sequence[str] = ()) -> Completions:
    """Read a decision endpoint's answer (`llm_anchors.backends.decisions`): one completion (only the classes asked,
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
    prompts: Sequence[Any],
    params: CompletionParams,
    effort: str | None,
) -> dict[str, Any]:
    """One request's body (either transport's): a list of prompts for completions, one for the others;
    a reasoning model (``effort``) gets its effort on chat, a bound covering its reasoning and no
    temperature; a decision endpoint the labels as its choices (`llm_anchors.backends.decisions`). A prompt that is
    a request's body (`llm_anchors.models.request.ChatRequest`) is sent as it is, with only what reading
    probabilities needs added where the request allows them (no reasoning effort, none asked already)."""
    if any(isinstance(p, dict) for p in prompts):
        if endpoint != "chat" or len(prompts) != 1:
            raise ConfigError("a request is sent to the chat endpoint, one a call: give --endpoint chat")
        sent: dict[str, Any] = {"model": model, **prompts[0]}
        if params.top_logprobs and effort is None and "reasoning_effort" not in sent and "logprobs" not in sent:
            sent |= {"logprobs": True, "top_logprobs": params.top_logprobs}
        return sent
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
    """Whether an answer ended at the output bound before any text or call (``finish_reason`` "length")."""
    return choice.get("finish_reason") == "length" and not _text(choice).strip() and not _calls(choice)


def _text(choice: dict[str, Any]) -> str:
    if "text" in choice and choice["text"] is not None:
        return str(choice["text"])
    return str(choice["message"]["content"] or "")


def _first_token(logprobs: Any) -> tuple[list[tuple[str, Any]] | None, str | None]:
    """The first generated token's alternatives as said (pairs, in order, values as they are: the
    classifier's reader judges them, `llm_anchors.models.answer`) and the token chosen, from either of:

    - chat shape (chat completions; llama-server's completions too):
      ``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}``
    - legacy shape (OpenAI/vLLM completions, llama-cpp-python):
      ``{"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}]}``

    The chosen token's own log-probability is added to its alternatives when they do not list it.
    """
    if not logprobs:
        return None, None
    content = logprobs.get("content")
    if content:
        first = content[0]
        chosen = str(first["token"]) if first.get("token") is not None else None
        pairs = [(str(t["token"]), t.get("logprob")) for t in first.get("top_logprobs") or []]
        own = first.get("logprob", _ABSENT)
    else:
        tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
        chosen = str(tokens[0]) if tokens and tokens[0] is not None else None
        legacy = logprobs.get("top_logprobs")
        pairs = [(str(k), v) for k, v in legacy[0].items()] if legacy and isinstance(legacy[0], dict) else []
        own = values[0] if values else _ABSENT
    if chosen is not None and own is not _ABSENT and all(token != chosen for token, _ in pairs):
        pairs.append((chosen, own))
    return pairs or None, chosen


_ABSENT = object()


def _tokens(logprobs: Any) -> tuple[tuple[str, list[tuple[str, Any]]], ...] | None:
    """Every output token of the chat shape with its alternatives as said (its own log-probability added
    when they do not list it): where a label sits inside the answer's JSON, its token is one of them."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not all(isinstance(c, dict) and isinstance(c.get("token"), str)
                                                 for c in content):  # fmt: skip
        return None
    out = []
    for entry in content:
        pairs = [(str(t["token"]), t.get("logprob")) for t in entry.get("top_logprobs") or [] if isinstance(t, dict)]
        if "logprob" in entry and all(token != entry["token"] for token, _ in pairs):
            pairs.append((entry["token"], entry["logprob"]))
        out.append((entry["token"], pairs))
    return tuple(out)


def _calls(choice: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The tools a chat answer called, with their arguments (JSON text)."""
    message = choice.get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    out = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out.append((function["name"], str(function.get("arguments") or "")))
    return tuple(out)
