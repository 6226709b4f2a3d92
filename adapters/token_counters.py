"""Exact prompt-token counters for the OpenAI-compatible backend.

- `TiktokenCounter`: OpenAI models, with tiktoken's encodings taken from the
  installed ``bpe-openai`` package (no download: they are unpacked into
  tiktoken's cache under the names it looks for).
- `ServerTokenCounter`: the ``/tokenize`` endpoint of llama.cpp's server
  or vLLM's, one call per distinct prompt, cached.

Both implement `llm_anchors.extend.TokenCounter`; without them a backend's
tokens are estimated (`EstimateCounter`, marked in every report).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from llm_anchors import BackendError, BadResponseError, ConfigError
from llm_anchors.extend import TokenCount, TokenCounter, shown_url

__all__ = [
    "FallbackCounter", "NoTokenizeError", "ServerTokenCounter", "TiktokenCounter", "endpoint_url", "fallback_counter",
    "install_offline_encodings",
]  # fmt: skip


def endpoint_url(base_url: str, path: str, *, root: bool = False) -> str:
    """``path`` under ``base_url``, before its query (``…/v1?api-version=x`` + ``/completions`` is
    ``…/v1/completions?api-version=x``); with ``root``, under the server's root (``/v1`` dropped)."""
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    base = base.removesuffix("/v1") if root else base
    return urlunsplit(parts._replace(path=base + path, fragment=""))


_ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def install_offline_encodings(cache: Path | None = None) -> Path:
    """Unpack bpe-openai's encodings where tiktoken looks, and point tiktoken there."""
    # Found without importing bpe_openai: its import warns (a deprecated importlib API).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("counting OpenAI tokens offline needs bpe-openai: pip install 'llm-anchors[openai]'")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    cache = cache or Path(os.environ.get("TIKTOKEN_CACHE_DIR") or Path.home() / ".cache" / "llm-anchors" / "tiktoken")
    cache.mkdir(parents=True, exist_ok=True)
    for name, url in _ENCODING_URLS.items():
        target = cache / hashlib.sha1(url.encode()).hexdigest()
        if not target.exists():
            blob = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
            partial = target.with_suffix(".partial")
            partial.write_bytes(blob)
            partial.replace(target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return cache


class TiktokenCounter:
    """Exact prompt tokens of an OpenAI model (``gpt-4o``, ``gpt-4o-mini``, ...).

    ``per_message`` adds the chat format's tokens around each prompt (role
    markers and the reply's priming: 3 + 4 for one user message).
    """

    def __init__(self, model: str, *, per_message: int = 7) -> None:
        install_offline_encodings()
        import tiktoken

        try:
            self.encoding = tiktoken.encoding_for_model(model)
        except KeyError:
            self.encoding = tiktoken.get_encoding("o200k_base")
        self.model = model
        self.per_message = per_message

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        batches = self.encoding.encode_ordinary_batch(list(prompts))
        return TokenCount([len(tokens) + self.per_message for tokens in batches])


class NoTokenizeError(BackendError):
    """The server has no ``/tokenize`` (404, 405, 501): its prompts are counted another way."""


class FallbackCounter:
    """The server's ``/tokenize`` while it has one; once it answers that it has none, ``fallback``
    (tiktoken for a model tiktoken knows, else a marked over-estimate), never an error."""

    def __init__(self, server: ServerTokenCounter, fallback: TokenCounter) -> None:
        self.server, self.fallback = server, fallback
        self._server_has_none = False

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        if not self._server_has_none:
            try:
                return await self.server.count(prompts)
            except NoTokenizeError:
                self._server_has_none = True
                await self.server.aclose()
        return await self.fallback.count(prompts)

    async def aclose(self) -> None:
        await self.server.aclose()


def fallback_counter(model: str, per_message: int = 0) -> TokenCounter:
    """tiktoken's count when tiktoken knows ``model`` (by name: a gateway's "gpt-4o-mini"), else the
    marked over-estimate (UTF-8 bytes / 3 + 8)."""
    import importlib.util

    from llm_anchors.money.tokens import EstimateCounter

    if importlib.util.find_spec("tiktoken") is not None and importlib.util.find_spec("bpe_openai") is not None:
        import tiktoken

        try:
            tiktoken.encoding_name_for_model(model.rpartition("/")[2])
        except KeyError:
            return EstimateCounter()
        return TiktokenCounter(model.rpartition("/")[2], per_message=per_message)
    return EstimateCounter()


class ServerTokenCounter:
    """Prompt tokens from a server's own ``/tokenize`` (llama.cpp or vLLM), cached.

    ``base_url`` may end in ``/v1``: /tokenize lives at the server's root on
    llama-server and on vLLM. ``add_special`` counts the BOS token the
    server adds to a completion prompt. The counts of at most
    ``max_entries`` prompts are kept (least recently used dropped): a long
    stream counts millions of distinct perturbations.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        max_concurrency: int = 16,
        max_entries: int = 100_000,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = endpoint_url(base_url, "/tokenize", root=True)
        self._headers = dict(headers or {})  # the backend's (its key, a gateway's): never shown
        self.shown = shown_url(endpoint_url(base_url, "", root=True))  # for messages: no credential
        self.model = model
        self._vllm = False  # llama-server's request shape first; vLLM's when it is refused
        self.max_concurrency = max_concurrency
        self.max_entries = max_entries
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        counts = {p: self._cache[p] for p in dict.fromkeys(prompts) if p in self._cache}
        missing = [p for p in dict.fromkeys(prompts) if p not in counts]
        if missing:
            semaphore = asyncio.Semaphore(self.max_concurrency)
            session = self._get_session()

            async def one(prompt: str) -> None:
                async with semaphore:
                    counts[prompt] = await self._tokenize(session, prompt)

            await asyncio.gather(*(one(p) for p in missing))
        for prompt, n in counts.items():
            self._cache[prompt] = n
            self._cache.move_to_end(prompt)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return TokenCount([counts[p] for p in prompts])

    async def _tokenize(self, session: Any, prompt: str) -> int:
        import aiohttp

        try:
            vllm = self._vllm  # as sent: calls in flight learn it together
            status, raw = await self._post(session, prompt, vllm)
            if status in (400, 422) and not vllm:
                self._vllm = True
                status, raw = await self._post(session, prompt, True)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise BackendError(f"/tokenize failed: {type(exc).__name__}", classifier=self.shown, status=503) from exc
        if status in (404, 405, 501):  # no /tokenize here (a gateway, a proxy): counted another way
            raise NoTokenizeError(f"/tokenize answered {status}", classifier=self.shown, status=status)
        if status >= 400:
            raise BackendError(f"/tokenize answered {status}", classifier=self.shown, status=status)
        if isinstance(raw, dict) and isinstance(raw.get("count"), int):
            return int(raw["count"])
        if isinstance(raw, dict) and isinstance(raw.get("tokens"), list):
            return len(raw["tokens"])
        raise BadResponseError("/tokenize answer has no tokens", classifier=self.shown)

    async def _post(self, session: Any, prompt: str, vllm: bool) -> tuple[int, Any]:
        body: dict[str, Any] = {"content": prompt, "add_special": True}
        if vllm:
            body = {"model": self.model, "prompt": prompt, "add_special_tokens": True}
        async with session.post(self.url, json=body) as response:
            if response.status >= 400:
                return response.status, None
            return response.status, await response.json(content_type=None)

    def _get_session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=30), headers=self._headers, trust_env=True
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
