import pytest

from llm_anchors.extend import redact, shown_url


def test_redact_catches_credentials_in_any_shape():
    for leaky in (
        "Incorrect API key provided: Bearer sk-abc123def456",
        "headers: {'Authorization': 'xyz-token-1'}",
        'api_key="tok_123456"',
        "see http://user:pw@host/v1",
        "raw sk-proj-AbCdEf123456",
    ):
        clean = redact(leaky)
        assert "abc123" not in clean and "xyz-token-1" not in clean and "tok_123456" not in clean
        assert "pw@" not in clean and "AbCdEf" not in clean and "<redacted>" in clean
    assert redact("no secret here, HTTP 500") == "no secret here, HTTP 500"
    assert redact("the key is k3y!", "k3y!") == "the key is <redacted>"


KEY = "Zq8vT3kLm9XwR2pN7sHd"  # shaped like no known provider's key: only where it sits gives it away


@pytest.mark.parametrize(
    "url",
    [
        f"http://127.0.0.1:8000/v1?api_key={KEY}",
        f"http://127.0.0.1:8000/v1?key={KEY}&api-version=2024-10-21",
        f"http://127.0.0.1:8000/v1#{KEY}",
        f"http://127.0.0.1:8000/{KEY}/v1",
        f"http://127.0.0.1:8000/v1/sk-{KEY[:8]}",
        f"http://127.0.0.1:{KEY}/v1",  # the key typed where the port goes
        f"http://[{KEY}/v1",  # a broken IPv6 host
        f"http://user:{KEY}@127.0.0.1:8000/v1",
    ],
)
def test_a_key_anywhere_in_a_url_is_not_shown(url):
    shown = shown_url(url)
    assert KEY not in shown and KEY[:8] not in shown and "<redacted>" in shown
    message = redact(f"{url}: /tokenize answered 404")  # a URL inside a message, with its punctuation
    assert KEY not in message and message.endswith(": /tokenize answered 404")


def test_a_url_keeps_what_reads_as_names():
    for url in (
        "http://127.0.0.1:8000/v1",
        "https://r.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18?api-version=2024-10-21",
        "http://[::1]:8080/v1",
    ):
        assert shown_url(url) == url
    assert redact("no answer from http://127.0.0.1:9/v1/completions in time") == (
        "no answer from http://127.0.0.1:9/v1/completions in time"
    )


SECRET = "gw7Q-tenant-token-0a8f3c91d2"
PASSWORD = SECRET + "/p@ss"  # a proxy's password, with characters a URL encodes


def _b64(text: str, urlsafe: bool = False) -> str:
    import base64

    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()


# Each: a form a secret given by value may take in a text; `hide` must leave none of it.
FORMS = {
    "as it is": SECRET,
    "glued to words": f"urlsk{SECRET}z",
    "split across a line break": f"{SECRET[:11]}\n{SECRET[11:]}",
    "split by spaces": " ".join(SECRET),
    "percent-encoded": SECRET + "%2Fp%40ss",
    "JSON-escaped": '"' + SECRET + '"',
    "base64": _b64(SECRET),
    "base64, URL-safe": _b64(SECRET, urlsafe=True),
    "base64 of a Basic credential (offset 1)": _b64(f"u:{SECRET}"),
    "base64 of a Basic credential (offset 2)": _b64(f"ab:{SECRET}"),
    "base64 of a Basic credential (offset 0)": _b64(f"abc:{SECRET}"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_secret_known_by_value_is_hidden_in_every_form(form):
    from llm_anchors._secrets import _KNOWN, hide, remember

    remember(SECRET, PASSWORD)
    assert SECRET in _KNOWN
    shown = hide(f"the server said: {FORMS[form]} (denied)")
    assert "<redacted>" in shown and shown.startswith("the server said: ") and shown.endswith(" (denied)")
    import base64
    import re

    bare = re.sub(r"\s+", "", shown)
    assert SECRET not in bare and "p%40ss" not in bare
    for token in re.findall(r"[A-Za-z0-9+/_-]{8,}", shown):  # what is left decodes to no part of it
        decoded = base64.b64decode(token + "=" * (-len(token) % 4) + "==", altchars=b"-_", validate=False)
        assert SECRET[4:20].encode() not in decoded


def test_short_values_and_words_are_not_taken_for_secrets():
    from llm_anchors._secrets import hide, remember

    remember("eu", "", None, "  ")
    assert hide("tenant eu, region eu-west") == "tenant eu, region eu-west"


def test_the_environment_hands_keys_and_proxy_passwords():
    from llm_anchors._secrets import environment_secrets

    found = environment_secrets({"OPENAI_API_KEY": "sk-env", "HTTPS_PROXY": "http://user:p%40ss@proxy:3128",
                                 "ALL_PROXY": "socks5://u:broken@[::1:99999", "PATH": "/bin"})  # fmt: skip
    assert {"sk-env", "p%40ss", "p@ss", "user"} <= set(found) and "/bin" not in found
