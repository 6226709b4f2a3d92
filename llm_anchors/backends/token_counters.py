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
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from .. import BackendError, BadResponseError, ConfigError
from ..extend import TokenCount, TokenCounter, shown_url
from .transport import Session, endpoint_url
from .vllm_api import probe

__all__ = [
    "FallbackCounter", "NoTokenizeError", "ServerTokenCounter", "TiktokenCounter", "fallback_counter",
    "install_offline_encodings",
]  # fmt: skip


_ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def install_offline_encodings() -> Path:
    """Unpack bpe-openai's encodings into the cache tiktoken reads (``$TIKTOKEN_CACHE_DIR``, else
    ``$DATA_GYM_CACHE_DIR``, else its folder under the temporary directory), under the names it
    looks for: tiktoken then never downloads them. Nothing of the process's environment is changed."""
    # Found without importing bpe_openai: its import warns (a deprecated importlib API).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("counting OpenAI tokens offline needs bpe-openai: pip install 'llm-anchors[openai]'")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    cache = _tiktoken_cache()
    cache.mkdir(parents=True, exist_ok=True)
    for name, url in _ENCODING_URLS.items():
        target = cache / hashlib.sha1(url.encode()).hexdigest()
        if not target.exists():
            blob = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
            partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
            partial.write_bytes(blob)
            partial.replace(target)
    return cache


def _tiktoken_cache() -> Path:
    """The folder tiktoken reads its encodings from, found as tiktoken finds it (``tiktoken.load``)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            if not os.environ[name]:
                raise ConfigError(f"${name} is empty (tiktoken's cache off): counting offline needs its cache")
            return Path(os.environ[name])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


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

    from ..money.tokens import EstimateCounter

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
    stream counts millions of distinct perturbations. ``session``: the
    backend's (`transport.Session`: its headers, timeout and error map, so a
    429 here is a `RateLimitError` as anywhere); by default one of its own.
    Whether the server is vLLM (its request shape) is ``vllm()``'s answer,
    the backend's own (`OpenAICompatibleBackend.vllm`); by default the same
    probe, asked once.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        max_concurrency: int = 16,
        max_entries: int = 100_000,
        session: Callable[[], Session] | None = None,
        vllm: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.url = endpoint_url(base_url, "/tokenize", root=True)
        self._base = base_url
        self.shown = shown_url(endpoint_url(base_url, "", root=True))  # for messages: no credential
        self.model = model
        self._session = session or self._own_session
        self._own: Session | None = None
        self._vllm = vllm or self._probe
        self._probed: list[Any] = []  # the probe's answer, once asked
        self.max_concurrency = max_concurrency
        self.max_entries = max_entries
        self._cache: OrderedDict[str, int] = OrderedDict()

    async def count(self, prompts: Sequence[str]) -> TokenCount:
        counts = {p: self._cache[p] for p in dict.fromkeys(prompts) if p in self._cache}
        missing = [p for p in dict.fromkeys(prompts) if p not in counts]
        if missing:
            semaphore = asyncio.Semaphore(self.max_concurrency)
            vllm = await self._vllm() is not None

            async def one(prompt: str) -> None:
                async with semaphore:
                    counts[prompt] = await self._tokenize(prompt, vllm)

            await asyncio.gather(*(one(p) for p in missing))
        for prompt, n in counts.items():
            self._cache[prompt] = n
            self._cache.move_to_end(prompt)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return TokenCount([counts[p] for p in prompts])

    async def _probe(self) -> Any:
        """The vLLM server at ``base_url`` (`vllm_api.probe`), None for any other; asked once."""
        if not self._probed:
            root = endpoint_url(self._base, "", root=True)
            self._probed = [await probe(self._session().get_json, root, endpoint_url(self._base, ""), self.model or "")]
        return self._probed[0]

    async def _tokenize(self, prompt: str, vllm: bool) -> int:
        body: dict[str, Any] = {"content": prompt, "add_special": True}
        if vllm:
            body = {"model": self.model, "prompt": prompt, "add_special_tokens": True}
        try:
            raw = await self._session().post_json(self.url, body, self.shown)
        except BackendError as exc:
            if exc.status in (404, 405, 501):  # no /tokenize here (a gateway, a proxy): counted another way
                raise NoTokenizeError(
                    f"/tokenize answered {exc.status}", classifier=self.shown, status=exc.status
                ) from None
            raise
        if isinstance(raw.get("count"), int):
            return int(raw["count"])
        if isinstance(raw.get("tokens"), list):
            return len(raw["tokens"])
        raise BadResponseError("/tokenize answer has no tokens", classifier=self.shown)

    def _own_session(self) -> Session:
        """A session of this counter's own (when no backend lends one), made in the running loop."""
        if self._own is None or self._own.loop is not asyncio.get_running_loop():
            self._own = Session({}, 30.0, self.max_concurrency)
        return self._own

    async def aclose(self) -> None:
        """Close a session of its own (a backend's is the backend's to close)."""
        if self._own is not None:
            await self._own.aclose()
            self._own = None
