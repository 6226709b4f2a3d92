"""What may be shown of a credential: nothing.

**Secrets are known by value.** Every credential a run is given (an API key, a header's value, a
proxy's password) is `remember`-ed where it is handed over; `hide` then takes each out of any text, in
every form it has been met in (as it is, split across line breaks or spaces, percent-encoded, JSON- or
HTML-escaped, base64 on its own or inside a longer base64 string such as a Basic credential). Every
JSON line the project writes (`_files.JsonLines`) and every line a command prints pass through it.

`redact`, for messages, also takes out anything shaped like a credential and shows every URL as
`shown_url` does. A URL can carry a key in its user:password, its query (``?api_key=``), its
fragment, a path segment (``/sk-…/v1``) or, mistyped, its port; `shown_url` keeps the scheme, the
host, the port and the path segments that read as names, and nothing else.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "environment_secrets", "header_secrets", "hide", "known", "redact", "refuse_credentials", "remember", "scrub",
    "shown_url",
]  # fmt: skip

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


_KNOWN: set[str] = set()


def remember(*secrets: str | None) -> None:
    """Know ``secrets`` (of `_SHORTEST` characters or more) as credentials for the rest of the process:
    `hide` and `redact` take them out of every text from now on."""
    _KNOWN.update(s.strip() for s in secrets if isinstance(s, str) and len(s.strip()) >= _SHORTEST)


def known() -> frozenset[str]:
    """The credentials `remember`-ed so far."""
    return frozenset(_KNOWN)


_KEY_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY")
_PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def environment_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The credentials ``environ`` hands a run: the API keys it reads, and a proxy URL's user and password
    (whole and decoded)."""
    found = [environ[name] for name in _KEY_VARIABLES if environ.get(name)]
    for name in _PROXY_VARIABLES:
        try:
            parts = urlsplit(environ.get(name) or "")
            found += [part for part in (parts.password, parts.username) if part]
        except ValueError:  # a proxy URL that cannot be read: its credentials, if any, as typed
            credentials = (environ.get(name) or "").partition("://")[2].rpartition("@")[0]
            found += [credentials, *credentials.split(":", 1)] if credentials else []
    return tuple(found + [unquote(f) for f in found if unquote(f) != f])


def refuse_credentials(values: Mapping[str, Any], *secrets: str | None) -> None:
    """A `ConfigError` naming the first of ``values`` (a setting's name -> what it was given: a model's name,
    a URL, a path; a list of them) that holds one of ``secrets`` or of the `known` credentials: such a value
    would be sent, shown or written where a credential never is. The message names the setting, never
    the value."""
    from ._exceptions import ConfigError

    for name, value in values.items():
        given = value if isinstance(value, list | tuple) else [value]
        if any(isinstance(v, str) and hide(v, *secrets) != v for v in given):
            raise ConfigError(
                f"{name} holds one of the credentials given (an API key, a header's or a proxy's): give the "
                "credential only where it is asked for (the key's variable, --header)"
            )


def hide(text: str, *secrets: str | None) -> str:
    """``text`` without any of ``secrets`` or of the `known` credentials, in any of their forms."""
    every = frozenset(_KNOWN | {s for s in secrets if isinstance(s, str) and len(s) >= _SHORTEST})
    return _forms(every).sub(HIDDEN, text) if every else text


@functools.lru_cache(maxsize=64)
def _forms(secrets: frozenset[str]) -> re.Pattern[str]:
    """One pattern matching every form of every secret, the longest first ("Bearer k" before "k")."""
    forms = {(len(form), re.escape(form)) for secret in secrets for form in _spellings(secret)}
    forms |= {(len(secret), r"\s*".join(re.escape(c) for c in secret)) for secret in secrets}  # across breaks
    return re.compile("|".join(pattern for _, pattern in sorted(forms, reverse=True)))


def _spellings(secret: str) -> set[str]:
    """How ``secret`` may be written in a text: as it is, percent-encoded, JSON- and HTML-escaped, and in
    base64 (standard and URL-safe) at each of the three places a base64 string may hold it."""
    found = {secret, quote(secret, safe=""), json.dumps(secret)[1:-1], html.escape(secret)}
    raw = secret.encode()
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            coded = encode(b"\0" * offset + raw).decode().rstrip("=")
            first = (8 * offset + 5) // 6  # the characters that hold a bit of the padding
            last = (8 * (offset + len(raw))) // 6  # the characters that hold only the secret's bits
            core = coded[first:last]
            if len(core) >= max(_SHORTEST, len(secret) // 2):
                found.add(core)
    return {form for form in found if form}


def redact(text: str, *secrets: str | None) -> str:
    """``text`` without the given secrets and the `known` ones in any form (`hide`), nor anything that
    looks like a credential (a Bearer token, an Authorization or api_key value, an ``sk-`` key), every
    URL in it as `shown_url`."""
    text = hide(text, *secrets)
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
