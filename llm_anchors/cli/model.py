"""The explained model as the command line names it: its prompt, labels, price and servers (the
embedded local LLM, started here, unless ``--base-url`` or ``--azure-endpoint`` names the user's)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .._secrets import shown_url
from ..models.backend import CompletionParams
from ..models.llm import LLMClassifier
from ..models.request import ChatRequest
from ..money.pricing import FREE, load_prices

__all__ = ["Model", "backend", "check_azure", "model_identity", "read_prompt", "served_as", "servers"]


class Model:
    """The explained model as the options say: its prompt, labels, price and servers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.prompt = read_prompt(args.prompt) if args.prompt else None
        self.request = read_request(args.request, args.label_field) if args.request else None
        if self.request is not None and self.prompt is not None:
            raise ConfigError("--request is the whole request, its prompt among its messages: give no --prompt with it")
        if self.request is None and args.label_field:
            raise ConfigError("--label-field names where a --request's label is read: give the request")
        self.prices = load_prices(args.price_file) if args.price_file else None  # read before anything starts
        self.headers = headers_of(args.header)
        if args.azure_endpoint:
            check_azure(args)
        if args.base_url and args.serve:
            raise ConfigError("--serve starts the embedded LLM and --base-url names a server of yours: give one")
        if urls := servers(args):  # a dollar cap that cannot price its model is refused now, before anything starts
            self.classifier(urls, args.model or "default")

    def classifier(self, base_urls: list[str], model: str, *, embedded: bool = False) -> LLMClassifier:
        from llm_anchors.backends.llamacpp import DEFAULT_LABELS, DEFAULT_PROMPT
        from llm_anchors.backends.openai_compat import Endpoint, OpenAICompatibleBackend

        args, request = self.args, self.request
        given = [label.strip() for label in args.labels.split(",")] if args.labels else []
        labels = given or ([] if request is not None and request.enum else list(DEFAULT_LABELS))
        if request is not None:
            if args.endpoint not in ("auto", "chat"):
                raise ConfigError("--request is sent to the chat endpoint: --endpoint must be chat (or auto)")
            if args.max_output_tokens is not None:
                raise ConfigError("--request bounds its own output: put max_completion_tokens in the request, not "
                                  "--max-output-tokens")  # fmt: skip
            if embedded:  # the local LLM answers in the place of the model the request names
                request = request.with_model(model)
            model = args.model or request.model or model
        endpoint: Endpoint = "chat" if request is not None else args.endpoint
        backend: Any
        if args.azure_endpoint:
            backend = azure_backend(args, model, self.headers)
        else:
            backend = OpenAICompatibleBackend(
                base_urls, model, endpoint=endpoint, max_request_size=8, timeout=args.timeout,
                service_tier=args.service_tier, reasoning_effort=args.reasoning_effort or "auto",
                headers=self.headers, price_as=args.price_as,
            )  # fmt: skip
        price = FREE if embedded or args.free else None
        params = None
        if args.max_output_tokens is not None:
            reasons = backend.reasoning_effort is not None
            base = CompletionParams.for_reasoning() if reasons else CompletionParams()
            params = replace(base, max_tokens=args.max_output_tokens)
        prompt: str | ChatRequest = request or self.prompt or DEFAULT_PROMPT
        clf = LLMClassifier(backend, prompt, labels, params=params, price=price, prices=self.prices)
        if args.max_usd is not None and clf.unbounded:
            raise ConfigError(
                "--max-usd cannot bound the request's output: it sets no max_completion_tokens and its schema allows "
                "free text. Give the request a max_completion_tokens"
            )
        if args.max_usd is not None and not clf.price.known:
            raise ConfigError(
                f"--max-usd cannot cap model {model!r} at {', '.join(base_urls)}: it has no price (served on this "
                "machine under a name the price table lacks). Give its price (--price-file) or declare it free (--free)"
            )
        return clf


def headers_of(given: list[str]) -> dict[str, str]:
    """``--header 'Name: value'`` options as a dict; `ConfigError` naming the header, never its value."""
    headers = {}
    for line in given:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ConfigError("--header takes 'Name: value' (a name, a colon, the value)")
        headers[name.strip()] = value.strip()
    return headers


def check_azure(args: argparse.Namespace) -> None:
    """`ConfigError` for an Azure OpenAI call that could not be sent: before anything starts."""
    if args.base_url or args.serve:
        raise ConfigError("--azure-endpoint names the server: give no --base-url or --serve with it")
    missing = [flag for flag, value in (("--api-version", args.api_version), ("--model", args.model)) if not value]
    if missing:
        raise ConfigError(f"--azure-endpoint needs {' and '.join(missing)} (the deployment's name as --model)")
    if not os.environ.get("AZURE_OPENAI_API_KEY"):
        raise ConfigError("--azure-endpoint needs the key in $AZURE_OPENAI_API_KEY")
    if args.endpoint not in ("auto", "chat"):
        raise ConfigError("--azure-endpoint sends chat completions: --endpoint must be chat (or auto)")


def azure_backend(args: argparse.Namespace, deployment: str, headers: dict[str, str]) -> Any:
    """The deployment on Azure OpenAI, through the openai package's `AsyncAzureOpenAI`."""
    from llm_anchors.backends.openai_client import OpenAIClientBackend

    try:
        import openai
    except ImportError as exc:
        raise ConfigError("--azure-endpoint needs the openai package: pip install 'llm-anchors[openai]'") from exc
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=args.azure_endpoint, api_version=args.api_version,
        api_key=os.environ["AZURE_OPENAI_API_KEY"], default_headers=headers or None,
    )  # fmt: skip
    return OpenAIClientBackend(
        client, deployment, price_as=args.price_as, timeout=args.timeout,
        service_tier=args.service_tier, reasoning_effort=args.reasoning_effort or "auto",
    )  # fmt: skip


async def model_identity(clf: LLMClassifier, embedded: bool) -> dict[str, Any]:
    """What tells this model from another under the same name: the embedded model's file, or the
    servers' addresses and what they say they serve."""
    from llm_anchors.backends.llamacpp import find_model
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    backend = clf.backend
    if embedded and isinstance(backend, OpenAICompatibleBackend) and (vllm := await backend.vllm()) is not None:
        from llm_anchors.backends.vllm import find_model as converted

        return {"embedded": converted().name, "vllm": vllm.version}
    if embedded or not isinstance(backend, OpenAICompatibleBackend):
        return {"embedded": find_model().name}
    return {"base_url": [shown_url(u) for u in backend.base_urls], "served": await backend.served_models()}


@contextlib.contextmanager
def backend(args: argparse.Namespace) -> Iterator[tuple[list[str], str, bool]]:
    """The servers' base URLs, the model's name, and whether it is the embedded local LLM (started here)."""
    if servers(args):
        yield served_as(args)
        return
    if args.serve == "vllm":
        from llm_anchors.backends.vllm import VllmServer

        print("starting the local LLM (Gemma 3 270M on vLLM, about a minute)…", file=sys.stderr, flush=True)
        with VllmServer() as vllm:
            yield [vllm.base_url], served_as(args)[1], True
        return
    from llm_anchors.backends.llamacpp import LlamaServer

    print("starting the local LLM (Gemma 3 270M on llama-server)…", file=sys.stderr, flush=True)
    with LlamaServer() as server:
        yield [server.base_url], served_as(args)[1], True


def served_as(args: argparse.Namespace) -> tuple[list[str], str, bool]:
    """The servers, the model's name and whether it is the embedded LLM, as the options say (the embedded
    LLM's address is known once it starts: a placeholder until then)."""
    if urls := servers(args):
        return urls, args.model or "default", False
    if args.serve == "vllm":
        from llm_anchors.backends.vllm import SERVED_NAME

        return ["http://127.0.0.1:1/v1"], args.model or SERVED_NAME, True
    return ["http://127.0.0.1:1/v1"], args.model or "gemma-3-270m-q4_k_m", True


def servers(args: argparse.Namespace) -> list[str]:
    """The user's servers (``--base-url``, or ``--azure-endpoint``): none when the embedded LLM is started."""
    return [args.azure_endpoint] if args.azure_endpoint else list(args.base_url or [])


def read_request(value: str, label: str | None) -> ChatRequest:
    """``--request``: the JSON itself, or with ``@FILE`` the file's; `ConfigError` naming what cannot be read."""
    said = read_prompt(value, "--request")
    try:
        body = json.loads(said)
    except ValueError as exc:
        raise ConfigError(f"--request {value[:40]}: not JSON ({exc})") from None
    return ChatRequest(body, label=label)


def read_prompt(value: str, flag: str = "--prompt") -> str:
    """The template itself, or with ``@FILE`` the file's text; `ConfigError` when it cannot be read."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{flag} {value}: cannot read the file ({type(exc).__name__}: {exc})") from exc
