"""The smaller breaks of issue 68 (item 5), each a test that failed before: a memory's explanations cut by
a kill, a lock that is a symbolic link, a check the cap stops, a proxy the environment cannot give, a
local server's address the price table does not know, a vLLM /tokenize answer that never reached the model."""

import json

import pytest

from llm_anchors import ConfigError
from tests.fault_server import FaultServer
from tests.test_cli import PROMPT, cli, keyword_sentiment


def test_a_cut_last_line_is_dropped_before_the_next_one_is_appended(tmp_path):
    from llm_anchors._files import JsonLines

    path = tmp_path / "explained.jsonl"
    path.write_text('{"a": 1}\n{"b": 2, "cut sh')  # a kill or a full disk mid-line
    lines = JsonLines(path, "the memory's explanations")
    lines.write({"c": 3})
    lines.close()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"a": 1}, {"c": 3}]


async def test_explain_memory_keeps_every_explanation_after_a_cut_line(tmp_path):
    memory = tmp_path / "mem"
    async with FaultServer(answer=keyword_sentiment) as server:
        args = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--memory", str(memory)]
        code, err = await cli("explain", "a good and great film", *args)
        assert code == 0, err
        explained = memory / "explained.jsonl"
        explained.write_bytes(explained.read_bytes() + b'{"text": "a cut li')
        code, err = await cli("explain", "a dull and boring film", *args)
        assert code == 0, err
        code, err = await cli("explain", "a dull and boring film", *args, "--json")  # answered from memory
        assert code == 0, err
    kept = [json.loads(line) for line in explained.read_text().splitlines()]
    assert [k["text"] for k in kept] == ["a good and great film", "a dull and boring film"]


@pytest.mark.parametrize("lock", ["out.jsonl.lock", "mem/LOCK"])
async def test_a_lock_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path, lock):
    target = tmp_path / "precious.txt"
    target.write_text("do not truncate me")
    (tmp_path / "mem").mkdir()
    (tmp_path / lock).symlink_to(target)
    (tmp_path / "in.txt").write_text("a good and great film\n")
    code, err = await cli("run", str(tmp_path / "in.txt"), "--out", str(tmp_path / "out.jsonl"), "--memory",
                          str(tmp_path / "mem"), "--base-url", "http://127.0.0.1:9/v1", "--prompt", PROMPT)  # fmt: skip
    assert code == 2 and "symbolic link" in err, err
    assert target.read_text() == "do not truncate me"


async def test_a_check_the_cap_stops_reports_what_it_measured_and_exits_3():
    async with FaultServer(answer=keyword_sentiment) as server:
        text = "a good and great film with a fine plot and a fine cast overall"
        args = ["check", text, "--anchor", "good great", "--base-url", server.base_url, "--prompt", PROMPT,
                "--n", "5000", "--max-queries", "100", "--json"]  # fmt: skip
        code, out = await cli(*args, stdout=True)
    assert code == 3, out
    found = json.loads(out)
    assert found["stopped_by_cap"] and 0 < found["n"] < 5000 and found["asked"] == 5000
    assert found["precision"] == 1.0 and 0.9 < found["interval"][0] < 1.0 == found["interval"][1]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [("HTTPS_PROXY", "http://proxy.example:99999", "port"), ("HTTPS_PROXY", "http://[::1:3128", "cannot be read"),
     ("HTTP_PROXY", "socks5://u:s3cretpass@proxy.example:1080", "socks5"), ("https_proxy", "http://:3128", "host")],
)  # fmt: skip
async def test_a_proxy_the_environment_cannot_give_is_a_clear_error_before_anything_starts(variable, value, said):
    import os

    env = {**os.environ, variable: value}
    code, err = await cli("explain", "a good film", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", env=env)
    assert code == 2 and variable in err and said in err and "Traceback" not in err, err
    assert "s3cretpass" not in err


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.2", "localhost.", "[::1]", "LOCALHOST"])
def test_every_address_of_this_machine_is_local(host):
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend

    assert OpenAICompatibleBackend(f"http://{host}:8000/v1", "m").is_local


def test_a_hosted_model_without_a_price_names_the_flags_that_fix_it():
    from llm_anchors.money import price_for

    with pytest.raises(ConfigError) as raised:
        price_for("my-finetune", local=False, api_url="https://gateway.example/v1")
    assert "--price-as" in str(raised.value) and "--free" in str(raised.value)
