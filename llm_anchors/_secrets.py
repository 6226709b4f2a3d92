"""What may be shown of a credential: nothing.

`redact` takes credentials out of any text a run writes or prints (an error, a failed line, a
report): the secrets it is given, anything shaped like a credential, and every URL shown as
`shown_url` shows it. A URL can carry a key in its user:password, its query (``?api_key=``), its
fragment, a path segment (``/sk-…/v1``) or, mistyped, its port; `shown_url` keeps the scheme, the
host, the port and the path segments that read as names, and nothing else.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["redact", "shown_url"]

HIDDEN = "<redacted>"

_CREDENTIALS = [
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), rf"\1{HIDDEN}"),
    (re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s\"',;]+"), rf"\1{HIDDEN}"),
    (re.compile(r"(?i)\b(api[_-]?key[\"']?\s*[:=]\s*[\"']?)(?!<redacted>)[^\s\"',;&]+"), rf"\1{HIDDEN}"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), f"sk-{HIDDEN}"),
]
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s\"'<>`]+")
_SECRET_NAME = re.compile(r"(?i)key|token|secret|sig|pass|auth|cred|session|code")
_PART = 12  # a name's parts (between - _ . ~) are no longer than this; a key's are


def redact(text: str, *secrets: str | None) -> str:
    """``text`` without the given secrets, nor anything that looks like a credential (a Bearer
    token, an Authorization or api_key value, an ``sk-`` key), every URL in it as `shown_url`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, HIDDEN)
    text = _URL.sub(_shown_match, text)
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


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
        return f"{scheme}://{HIDDEN}" if rest else url
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
