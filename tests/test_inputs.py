"""The inputs of `llm-anchors run`: JSON lines, CSV, text; lines end at a newline only."""

import json
import subprocess
import sys

import pytest

from llm_anchors import ConfigError
from llm_anchors.run import read_inputs


def test_inputs_from_jsonl_csv_and_text(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "one", "id": 1}\n\n{"text": "two"}\n')
    (tmp_path / "a.csv").write_text('id,review\n1,"one, with a comma"\n2,two\n')
    (tmp_path / "a.txt").write_text("one\n\ntwo\n")
    assert read_inputs(str(tmp_path / "a.jsonl")) == ["one", "two"]
    assert read_inputs(str(tmp_path / "a.csv"), text_column="review") == ["one, with a comma", "two"]
    assert read_inputs(str(tmp_path / "a.txt")) == ["one", "two"]
    with pytest.raises(ConfigError, match="a.jsonl:1 has no text field 'body'"):
        read_inputs(str(tmp_path / "a.jsonl"), text_field="body")
    with pytest.raises(ConfigError, match="no column 'text'"):
        read_inputs(str(tmp_path / "a.csv"))
    (tmp_path / "bad.csv").write_text('text\n"a stray" quote\nnext\n')
    with pytest.raises(ConfigError, match="bad.csv:.* is not CSV"):
        read_inputs(str(tmp_path / "bad.csv"))
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(ConfigError, match="holds no inputs"):
        read_inputs(str(tmp_path / "empty.txt"))


def test_only_a_newline_ends_a_line():
    inside = ["a\u2028b", "c\u2029d", "e\u0085f", "g\x0ch", "i\x1cj", "k\x0bl"]  # str.splitlines splits at each
    assert (
        read_inputs_of("in.jsonl", "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in inside))
        == inside
    )
    assert read_inputs_of("in.txt", "\n".join(inside) + "\n") == inside
    assert read_inputs_of("in.txt", "one\r\ntwo\r\n") == ["one", "two"]
    assert read_inputs_of("in.csv", 'text\r\n"a\u2028b"\r\n"two\nlines"\r\n') == ["a\u2028b", "two\nlines"]


@pytest.mark.parametrize(
    "name,content", [("in.jsonl", '{"text": "one"}\n'), ("in.csv", "text\none\n"), ("in.txt", "one\n")]
)
def test_a_byte_order_mark_is_skipped(name, content):
    assert read_inputs_of(name, "\ufeff" + content) == ["one"]


def test_a_lone_surrogate_is_read_as_it_is_and_hashed(tmp_path):
    from llm_anchors.run import input_hash

    (texts,) = [read_inputs_of("in.jsonl", '{"text": "a \\ud800 b"}\n')]
    assert texts == ["a \ud800 b"] and len(input_hash(texts[0])) == 16  # the run records it as failed


def test_standard_input_with_a_byte_order_mark():
    code = "from llm_anchors.run import read_inputs; print(read_inputs('-'))"
    done = subprocess.run([sys.executable, "-c", code], input="\ufeffone\ntwo\n".encode(), capture_output=True)
    assert done.stdout.decode().strip() == "['one', 'two']", done.stderr


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def read_inputs_of(name: str, content: str) -> list[str]:
    with open(name, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)
    return read_inputs(name)
