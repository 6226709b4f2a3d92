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
