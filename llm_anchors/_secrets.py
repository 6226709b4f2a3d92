"""What may be shown of a credential: nothing.

`redact` takes credentials out of any text a run writes or prints (an error, a failed line, a
report): the secrets it is given, anything shaped like a credential, and every URL shown as
`shown_url` shows it. A URL can carry a key in its user:password, its query (``?api_key=``), its
fragment, a path segment (``/sk-…/v1``) or, mistyped, its port; `shown_url` keeps the scheme, the
host, the port and the path segments that read as names, and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["header_secrets", "redact", "scrub", "shown_url"]

HIDDEN = "<redacted>"

_CREDENTIALS = [
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), rf"\1{HIDDEN}"),
    (re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s\"',;]+"), rf"\1{HIDDEN}"),
    (re.compile(r"(?i)\b(api[_-]?key[\"']?\s*[:=]\s*[\"']?)(?!<redacted>)[^\s\"',;&]+"), rf"\1{HIDDEN}"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), f"sk-{HIDDEN}"),
    (re.compile(r"sk-[A-Za-z0-9_\-]{20,}"), f"sk-{HIDDEN}"),  # a key glued to a word ("urlsk-proj-…")
]
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s\"'<>`]+")
_SECRET_NAME = re.compile(r"(?i)key|token|secret|sig|pass|auth|cred|session|code")
_PART = 12  # a name's parts (between - _ . ~) are no longer than this; a key's are


def redact(text: str, *secrets: str | None) -> str:
    """``text`` without the given secrets, nor anything that looks like a credential (a Bearer
    token, an Authorization or api_key value, an ``sk-`` key), every URL in it as `shown_url`."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):  # "Bearer k" before "k"
        text = text.replace(secret, HIDDEN)
    text = _URL.sub(_shown_match, text)
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


_SHORTEST = 4
"""A header value shorter than this is not taken for a credential: it could not be told from the words
of a message (a tenant "eu")."""

E = TypeVar("E", bound=BaseException)


def header_secrets(headers: Mapping[str, Any]) -> tuple[str, ...]:
    """The values of a user's headers (a gateway's key, a tenant's token) that `redact` must take out of
    any message: every one of `_SHORTEST` characters or more, and its token after a scheme (``Bearer x``)."""
    found: list[str] = []
    for value in headers.values():
        if isinstance(value, str) and len(value.strip()) >= _SHORTEST:
            found.append(value.strip())
            scheme, _, token = value.strip().partition(" ")
            if token and len(token.strip()) >= _SHORTEST:
                found.append(token.strip())
    return tuple(found)


def scrub(error: E, secrets: Iterable[str | None]) -> E:
    """``error`` with ``secrets`` (and anything shaped like a credential) taken out of its message, in
    place, where a message is kept: its ``message`` (a `ClassifierError`'s) and its args (what ``str``
    shows and a pickled copy, a Ray worker's error, carries). Returned for ``raise scrub(...)``."""
    hidden = [s for s in secrets if s]
    message = getattr(error, "message", None)
    if isinstance(message, str):
        error.message = redact(message, *hidden)  # type: ignore[attr-defined]
    error.args = tuple(redact(a, *hidden) if isinstance(a, str) else a for a in error.args)
    return error


def _shown_match(match: re.Match[str]) -> str:
    url = match.group(0)
    trail = len(url) - len(url.rstrip(".,:;!?)]}"))
    return shown_url(url[: len(url) - trail]) + url[len(url) - trail :]


def shown_url(url: str) -> str:
    """``url`` as messages and files show it: its scheme, host, port and the path segments that read
    as names; no user:password (`HIDDEN` ``@``), no fragment, a query's values only where they read as names under a
    name that is not a credential's (``api-version=2024-10-21``), every other part `HIDDEN`."""
    scheme, _, rest = url.partition("://")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a broken IPv6 address
        return f"{scheme}://{HIDDEN}"
    if host is None:
        return f"{scheme}://{HIDDEN}" if rest else (url if _reads_as_name(url) else HIDDEN)  # not a URL: a name?
    netloc = (f"{HIDDEN}@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
    try:
        netloc += f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # a port that is not a number: what was typed there may be a key
        netloc += f":{HIDDEN}"
    path = "/".join(s if _reads_as_name(s) else HIDDEN for s in parts.path.split("/"))
    query = "&".join(_shown_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    tail = (f"?{query}" if query else "") + (f"#{HIDDEN}" if parts.fragment else "")
    return f"{parts.scheme}://{netloc}{path}{tail}"


def _reads_as_name(segment: str) -> bool:
    """A path segment or a value that reads as a name (``v1``, ``gpt-4o-mini-2024-07-18``), not a key:
    short parts, no ``sk-``."""
    if segment.lower().startswith("sk-") or not re.fullmatch(r"[\w\-.~%]*", segment):
        return False
    return all(len(part) <= _PART for part in re.split(r"[-_.~]", segment))


def _shown_pair(pair: str) -> str:
    name, eq, value = pair.partition("=")
    if not eq:
        return pair if _reads_as_name(pair) else HIDDEN
    keep = _reads_as_name(name) and not _SECRET_NAME.search(name) and _reads_as_name(value)
    return f"{name if _reads_as_name(name) else HIDDEN}={value if keep else HIDDEN}"
