"""A run's results as its report reads them: streamed line by line, one compact row per explained input.

A results file of 100,000 explanations is 400 MB of JSON; its explanations whole, several GB. The
report needs a few dozen numbers and the marked text of each, so each line is read, checked whole
(`Explanation.from_json`'s checks), reduced to a `ReportRow` and dropped.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from .._exceptions import ConfigError
from .._secrets import redact
from ..explain.explanation import Explanation, Opinion
from ..money.charge import Charge

__all__ = ["ReportRow", "RunRows", "read_rows"]


@dataclass(frozen=True)
class ReportRow:
    """One explained input, as the report shows it: what it found and what it cost."""

    index: int
    input_sha256: str
    label: str
    marked: str
    """The input, HTML-escaped, its anchor's words in ``<mark>`` (a coarse anchor's sentences in a span)."""
    anchor: tuple[str, ...]
    success: bool
    precision: float
    lower: float
    certify: str
    """How the anchor was certified: "strict", "default", or "" when it was not."""
    certified_samples: int
    coverage: float
    queries: int
    samples: int
    cache_hits: int
    settled: Charge
    wall_time_s: float
    memory_hit: bool | None
    budget_exhausted: bool
    threshold: float
    made_by: str
    """The explainer and the model's name (its identity up to its settings)."""
    perturbation: str
    opinion: Opinion | None
    repeat: bool = False
    """MAnchors' memory gave back the explanation of the same input made before, at no query."""
    asked: bool | None = None
    """Whether the memory's rules were tested (None: it had none; False: its record's control arm)."""
    certified_by_memory: bool = False
    saved: float = 0.0
    """What asking the memory had saved on the stream by then, by its record."""
    words: frozenset[str] = frozenset()
    """The input's features, lower-cased, once each (how often a word held is in the anchor)."""

    @classmethod
    def of(cls, index: int, input_sha256: str, e: Explanation) -> ReportRow:
        d, m = e.data, e.meta
        return cls(
            index=index, input_sha256=input_sha256, label=str(d.label), marked=e.marked_html(_mark, _sentence),
            anchor=d.anchor, success=d.success, precision=d.precision, lower=d.precision_bounds[0],
            certify=m.settings.search.certify if d.success and d.certified_samples else "",
            certified_samples=d.certified_samples, coverage=d.coverage, queries=m.queries, samples=m.samples,
            cache_hits=m.cost.cache_hits, settled=m.cost.settled, wall_time_s=m.wall_time_s,
            memory_hit=m.memory_hit, budget_exhausted=m.budget_exhausted, threshold=m.settings.search.threshold,
            made_by=f"{m.explainer} on {m.classifier.split('|')[0]}", perturbation=d.perturbation,
            opinion=d.second_opinion, repeat=bool(m.memory and m.memory.repeat),
            asked=m.memory.asked if m.memory else None, certified_by_memory=bool(m.memory and m.memory.certified),
            saved=m.memory.saved if m.memory else 0.0, words=frozenset(w.lower() for w in d.features),
        )  # fmt: skip

    @property
    def usd(self) -> Decimal:
        return self.settled.usd

    @property
    def hit(self) -> bool | None:
        return self.memory_hit


def _mark(word: str) -> str:
    return f"<mark>{word}</mark>"


def _sentence(sentence: str) -> str:
    """A coarse anchor's sentence (coarse to fine: the words marked were searched inside it)."""
    return f'<span class=coarse title="the anchor\'s sentence: its words were searched inside it">{sentence}</span>'


@dataclass(frozen=True)
class RunRows:
    """A results file as the report reads it: its explained inputs in the order they finished, and
    the inputs that could not be explained with why (credentials redacted)."""

    rows: list[ReportRow]
    failed: dict[int, str]
    config: dict[str, Any] = field(default_factory=dict)
    """The run's configuration (`run_config`), as its first line says."""


def read_rows(path: str | Path) -> RunRows:
    """Stream ``path`` (a ``llm-anchors run`` results file) into report rows. A line written again
    for the same input (a failure retried) replaces the earlier one; a last line cut short (a run
    still going, or killed) is left out with a warning; any other damaged line is a `ConfigError`
    naming the file, the line and what is wrong."""
    path = Path(path)
    rows: dict[int, ReportRow] = {}
    failed: dict[int, str] = {}
    explained_at: dict[int, int] = {}  # an explained input's line
    for number, record in _records(path):
        index = record["index"]
        if index in explained_at:  # a run explains an input once and never writes it again
            raise ConfigError(f"{path}:{number}: input {index} was explained already, on line {explained_at[index]}: "
                              "a run writes an explained input once (was the file edited?)")  # fmt: skip
        rows.pop(index, None)
        failed.pop(index, None)
        if "failed" in record:
            failed[index] = redact(str(record["failed"]))
            continue
        try:
            explanation = Explanation.from_mapping(record["explanation"])
        except (ConfigError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: the line of input {index} is {exc}") from None
        rows[index] = ReportRow.of(index, str(record.get("input_sha256", "")), explanation)
        explained_at[index] = number
    return RunRows(list(rows.values()), failed, _config(path))


def _config(path: Path) -> dict[str, Any]:
    """The run's configuration, from the first line (`_records` has checked it is one)."""
    with path.open("rb") as handle:
        first = json.loads(handle.readline() or b"{}")
    return dict(first.get("run", {}).get("config") or {}) if isinstance(first, dict) else {}


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The results lines of ``path`` with their line numbers (the configuration line, first, left out).
    A run writes its inputs in order (its stream yields them so, and a later session goes on from the
    first not written), so each line's index is one written before or the next one: an index past
    that (``10**9`` in a file of ten lines), below 0 or not an integer is a `ConfigError`."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"cannot read the results file {path}: {exc.strerror}") from exc
    following = 0  # the index the next input written would have
    with handle:
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
                if number == 1 and isinstance(record, dict) and "run" in record:
                    continue
                if number == 1:
                    raise ConfigError(f"{path}:1 is not a run's configuration: not a results file of llm-anchors "
                                      "run (or its first line was edited)")  # fmt: skip
                index = record.get("index") if isinstance(record, dict) else None
                if not isinstance(index, int) or isinstance(index, bool):
                    raise TypeError("not an object with an index")
                if not 0 <= index <= following:
                    raise ConfigError(f"{path}:{number}: input {index} cannot come here: a run writes inputs in "
                                      f"order, and the next new one is {following} (was the file edited?)")  # fmt: skip
                if "explanation" not in record and "failed" not in record:
                    raise KeyError("neither an explanation nor a failure")
                following = max(following, index + 1)
            except ConfigError:
                raise
            except (ValueError, KeyError, TypeError) as exc:
                if not line.endswith(b"\n") and not handle.read(1):  # the last line, cut inside its JSON
                    warnings.warn(f"{path}: leaving out a last line cut short (a run still going, or killed)",
                                  stacklevel=3)  # fmt: skip
                    return
                raise ConfigError(f"{path}:{number} is not a results line: {line[:60]!r}") from exc
            yield number, record
