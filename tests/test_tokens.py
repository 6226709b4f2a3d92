import os
import subprocess
import sys

import pytest

from llm_anchors.backends.token_counters import TiktokenCounter
from llm_anchors.money import EstimateCounter


async def test_tiktoken_works_offline_with_packaged_encodings(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    counter = TiktokenCounter("gpt-4o-mini", per_message=0)
    count = await counter.count(["hello world", "Review: a great movie\nSentiment:"])
    assert count.tokens == [2, 9]
    assert not count.estimated
    assert any(tmp_path.iterdir())  # the encodings were unpacked here, not downloaded
    assert counter.encoding.name == "o200k_base"
    assert TiktokenCounter("gpt-4").encoding.name == "cl100k_base"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path)


def test_tiktoken_is_found_offline_where_tiktoken_looks_and_the_environment_is_left_alone(tmp_path):
    """A fresh process (tiktoken keeps what it loaded) with no network: the encodings are unpacked where
    tiktoken looks ($DATA_GYM_CACHE_DIR here), and no variable of the process's environment is written."""
    code = (
        "import asyncio, os; before = dict(os.environ)\n"
        "from llm_anchors.backends.token_counters import TiktokenCounter\n"
        "count = asyncio.run(TiktokenCounter('gpt-4o-mini', per_message=0).count(['hello world']))\n"
        "print(count.tokens, dict(os.environ) == before)"
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"} | {"DATA_GYM_CACHE_DIR": str(tmp_path)}
    env |= {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}  # a download would fail
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["[2]", "True"], done.stderr
    assert any(tmp_path.iterdir())


async def test_chat_overhead_is_added_per_prompt():
    plain = await TiktokenCounter("gpt-4o", per_message=0).count(["a b c"])
    chat = await TiktokenCounter("gpt-4o", per_message=7).count(["a b c"])
    assert chat.total == plain.total + 7


@pytest.mark.parametrize("text", ["hello", "Ça marche très bien — vraiment !", "x" * 1000])
async def test_estimate_is_conservative_and_marked(text):
    estimate = await EstimateCounter().count([text])
    exact = await TiktokenCounter("gpt-4o", per_message=0).count([text])
    assert estimate.estimated
    assert estimate.total >= exact.total


@pytest.mark.parametrize(
    ("status", "error", "falls_back"),
    [(429, "RateLimitError", False), (503, "BackendError", False), (404, "NoTokenizeError", True),
     (501, "NoTokenizeError", True)],
)  # fmt: skip
async def test_tokenize_goes_through_the_backend_s_session_and_error_map(status, error, falls_back):
    """/tokenize is asked with the backend's own headers, and its error statuses mean what they mean for any
    request (a 429 is a `RateLimitError`); only "no such page" falls back to another count."""
    from aiohttp import web

    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
    from tests.test_openai_wire import serve

    seen: list[str | None] = []

    async def tokenize(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-Tenant"))
        return web.json_response({"error": {"message": "no"}}, status=status, headers={"Retry-After": "1"})

    runner, url = await serve(tokenize, "/tokenize")
    backend = OpenAICompatibleBackend(url, "m", headers={"X-Tenant": "t1"}, api_key="k")
    try:
        counter = backend.token_counter()
        assert counter is not None
        if falls_back:
            assert (await counter.count(["a b c"])).estimated
        else:
            with pytest.raises(Exception) as raised:
                await counter.count(["a b c"])
            assert type(raised.value).__name__ == error
        assert seen and set(seen) == {"t1"}
    finally:
        await backend.aclose()
        await runner.cleanup()
