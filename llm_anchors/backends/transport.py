"""HTTP over aiohttp for the backends: the URL join every request uses, one map of aiohttp's errors
to the project's (`mapped_errors`, as httpx maps httpcore's), and the session the OpenAI-compatible
backend sends through (`Session`).

Every failure a request meets leaves here as one of llm-anchors' errors: no connection made is an
`UnreachableError` (never billed), no answer in time or a dropped connection a `BackendTimeoutError`,
an error status what `openai_wire.error_of` says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import BackendError, BackendTimeoutError, BadResponseError, ConfigError
from ..extend import UnreachableError, shown_url
from .openai_wire import PATHS, error_of

__all__ = ["Session", "check_proxies", "endpoint_url", "mapped_errors"]


def check_proxies(
    environ: Mapping[str, str], *, variables: Sequence[str] = ("http_proxy", "https_proxy"),
    schemes: Sequence[str] = ("http", "https"),
) -> None:  # fmt: skip
    """A `ConfigError` naming the first proxy variable of ``environ`` (``variables``, in either case: what the
    transport reads) a request could not go through: a URL that cannot be read, with no host, a port that
    is not a number from 1 to 65535, or a scheme the transport does not speak (``schemes``; a socks proxy
    without the package that speaks it). Its value is never shown: it may hold a password."""
    for name, value in environ.items():
        if name.lower() not in variables or not value:
            continue
        try:
            parts = urlsplit(value if "://" in value else f"http://{value}")
            parts.port  # noqa: B018 (reading it checks it)
            host = parts.hostname
        except ValueError as exc:
            why = "its port is not a number from 1 to 65535" if "port" in str(exc).lower() else "it cannot be read"
            raise ConfigError(f"${name} names no proxy a request can go through: {why}") from None
        if not host:
            raise ConfigError(f"${name} names no proxy a request can go through: it has no host")
        if parts.scheme.lower() not in schemes:
            raise ConfigError(f"${name} names a {parts.scheme} proxy, which this client does not speak (it speaks "
                              f"{', '.join(schemes)}): give an http(s) proxy, or unset it")  # fmt: skip


def endpoint_url(base_url: str, path: str, *, root: bool = False) -> str:
    """``path`` under ``base_url``, before its query (``…/v1?api-version=x`` + ``/completions`` is
    ``…/v1/completions?api-version=x``); with ``root``, under the server's root (``/v1`` dropped)."""
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    base = base.removesuffix("/v1") if root else base
    return urlunsplit(parts._replace(path=base + path, fragment=""))


@contextlib.contextmanager
def mapped_errors(url: str, who: str) -> Iterator[None]:
    """aiohttp's errors inside as the project's, for a request to ``url`` (shown without credentials)."""
    import aiohttp

    where = shown_url(url)
    try:
        yield
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:  # it never left
        raise UnreachableError(f"no connection to {where}: {type(exc).__name__}", classifier=who) from None
    except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
        raise BackendTimeoutError(f"no answer from {where} in time", classifier=who) from None
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
        raise BackendTimeoutError(f"connection to {where} dropped: {type(exc).__name__}", classifier=who) from None
    except aiohttp.ClientError as exc:  # anything else aiohttp raises (a redirect loop, a malformed answer)
        raise BackendError(f"{where} failed: {type(exc).__name__}", classifier=who, status=None) from None


class Session:
    """One aiohttp session, made in (and bound to) the loop that uses it. ``timeout`` bounds small
    requests (a probe, a tokenize); an explaining request's patience is its caller's (`Pace`)."""

    def __init__(
        self, headers: dict[str, str], timeout: float, max_connections: int, secrets: Sequence[str | None] = ()
    ) -> None:
        import aiohttp

        self.loop = asyncio.get_running_loop()
        self._secrets = tuple(secrets)  # taken out of a server's body before it is cut to a message's length
        self._small = aiohttp.ClientTimeout(total=timeout)
        self._session = aiohttp.ClientSession(
            headers={"Content-Type": "application/json", **headers},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(timeout, 30.0)),
            connector=aiohttp.TCPConnector(limit=max_connections),
            trust_env=True,  # HTTPS_PROXY, HTTP_PROXY, NO_PROXY and ~/.netrc, as the user's other tools read them
        )

    async def post(self, base: str, endpoint: str, body: dict[str, Any], who: str) -> dict[str, Any]:
        """``POST`` ``body`` to ``endpoint`` under ``base``: the answer's JSON object (no timeout of its own)."""
        return await self._post(endpoint_url(base, PATHS[endpoint]), body, who, None)

    async def post_json(self, url: str, body: dict[str, Any], who: str) -> dict[str, Any]:
        """``POST url`` with ``body`` and the small timeout: its JSON object."""
        return await self._post(url, body, who, self._small)

    async def _post(self, url: str, body: dict[str, Any], who: str, timeout: Any) -> dict[str, Any]:
        with mapped_errors(url, who):
            async with self._session.post(url, json=body, timeout=timeout) as response:
                if response.status >= 400:
                    text = await response.text()
                    raise error_of(response.status, text, response.headers, who, shown_url(url), self._secrets)
                try:
                    raw = await response.json(content_type=None)
                except ValueError as exc:
                    raise BadResponseError(f"answer is not JSON: {exc}", classifier=who, transient=True) from None
        if not isinstance(raw, dict):
            raise BadResponseError(f"answer is {type(raw).__name__}, not an object", classifier=who)
        return raw

    async def get_json(self, url: str) -> Any:
        """``GET url``'s JSON; None when the server answers anything else (it has no such page)."""
        with mapped_errors(url, shown_url(url)):
            async with self._session.get(url, timeout=self._small) as response:
                if response.status != 200:
                    return None
                try:
                    return await response.json(content_type=None)
                except ValueError:
                    return None

    async def aclose(self) -> None:
        await self._session.close()
