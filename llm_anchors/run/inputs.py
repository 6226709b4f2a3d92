"""The inputs of `llm-anchors run`: JSON lines, CSV or plain text, from a file or standard input."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError

__all__ = ["read_inputs"]


def read_inputs(source: str, fmt: str = "auto", text_field: str = "text", text_column: str = "text") -> list[Any]:
    """The inputs of ``source`` (a path, or ``-`` for standard input), in order: texts, and
    ``{"text": ..., "pinned": [...]}`` for a JSON line with a ``pinned`` field (parts never perturbed:
    substrings, or [start, end] character offsets; see `TextSampler`).

    ``fmt``: "jsonl" (each line an object; its ``text_field``), "csv" (a
    header row; its ``text_column``), "text" (each non-empty line), or
    "auto": by the file's suffix (.jsonl/.json, .csv), else JSON lines when
    the first line is an object, else text. Lines end at ``\n`` (or
    ``\r\n``) only: a form feed, U+2028 or U+0085 inside a text is part of
    it. A UTF-8 byte-order mark is skipped. `ConfigError` names the line or
    the missing field. A text that cannot be explained (empty, a lone
    surrogate) is still read: the run records it as failed.
    """
    name = "standard input" if source == "-" else source
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        raw = data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {name}: {type(exc).__name__}: {exc}") from exc
    if fmt == "auto":
        fmt = _guess(source, raw)
    if fmt == "jsonl":
        texts = _jsonl(raw, text_field, name)
    elif fmt == "csv":
        texts = _csv(raw, text_column, name)
    else:
        texts = [line.strip() for line in _lines(raw) if line.strip()]
    if not texts:
        raise ConfigError(f"{name} holds no inputs")
    return texts


def _lines(raw: str) -> list[str]:
    """``raw`` split at ``\n`` only (not at every character `str.splitlines` breaks at), without a ``\r`` before it."""
    return [line.removesuffix("\r") for line in raw.split("\n")]


def _guess(source: str, raw: str) -> str:
    suffix = Path(source).suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    first = next((line for line in _lines(raw) if line.strip()), "")
    return "jsonl" if first.lstrip().startswith("{") else "text"


def _jsonl(raw: str, field: str, name: str) -> list[Any]:
    texts: list[Any] = []
    for number, line in enumerate(_lines(raw), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{name}:{number} is not JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise ConfigError(f"{name}:{number} has no text field {field!r} (--text-field)")
        if "pinned" in record and not isinstance(record["pinned"], list):
            raise ConfigError(f"{name}:{number}: pinned must be a list of substrings or [start, end] pairs")
        texts.append({"text": record[field], "pinned": record["pinned"]} if "pinned" in record else record[field])
    return texts


def _csv(raw: str, column: str, name: str) -> list[str]:
    reader = csv.DictReader(io.StringIO(raw, newline=""), strict=True)  # a stray quote is an error, not a merged row
    try:
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise ConfigError(f"{name} has no column {column!r} (--text-column); columns: {reader.fieldnames}")
        return [row[column] for row in reader if (row.get(column) or "").strip()]
    except csv.Error as exc:
        raise ConfigError(f"{name}:{reader.line_num} is not CSV ({exc})") from exc
