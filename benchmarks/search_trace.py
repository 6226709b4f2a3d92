"""Every rule a guided search tests, logged with the samples that judged it (a measuring device).

`Tracer`, while `installed`, wraps `AnchorsExplainer._drive` and `Search._choose`, `_sample` and `_certify`
(nothing else changes) and logs each guided search: its input's words, label and hiding rate; every sample
labelled, in order (`bits`: the features each kept); and per rule chosen for a test, its rank and share of
δ, the samples labelled before it was chosen, its judging samples in order and its verdict. `save` writes
the log (gzip JSON) that `benchmarks.control_variate` replays.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors.explain.anchors import AnchorsExplainer
from llm_anchors.explain.explaining import Explaining
from llm_anchors.propose.guided import GuidedSearch
from llm_anchors.search.base import Candidate, Search, SearchResult
from llm_anchors.search.samples import SampleRequest, Samples

__all__ = ["Tracer", "bits", "row", "save"]


def bits(kept: np.ndarray) -> int:
    """The features a perturbation kept, as one integer (bit i: feature i), of any length."""
    return sum(1 << int(i) for i in np.flatnonzero(kept))


def row(packed: int, n: int) -> np.ndarray:
    """`bits` read back: which of ``n`` features the perturbation kept."""
    return np.array([(packed >> i) & 1 for i in range(n)], dtype=bool)


def _plain(label: Any) -> Any:
    return label.item() if hasattr(label, "item") else label


class Tracer:
    """Logs every guided search run while `installed` (a measuring device: nothing else changes)."""

    def __init__(self) -> None:
        self.searches: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}

    @contextmanager
    def installed(self) -> Iterator[Tracer]:
        drive, choose, sample, certify = AnchorsExplainer._drive, Search._choose, Search._sample, Search._certify
        tracer = self

        async def _drive(self: AnchorsExplainer, run: Explaining, search: Any) -> SearchResult:
            if not isinstance(search, GuidedSearch):
                return await drive(self, run, search)
            record: dict[str, Any] = {"words": list(run.instance.features), "target": _plain(run.target),
                                      "p_hide": getattr(run.instance, "p_hide", 0.5), "rules": {}}  # fmt: skip
            tracer._open[id(search)] = record
            try:
                result = await drive(self, run, search)
            finally:
                tracer._open.pop(id(search), None)
            present, kept = search.labelled()
            record |= {"present": [bits(r) for r in present], "kept": "".join("1" if k else "0" for k in kept),
                       "answer": sorted(result.rule), "success": result.success}  # fmt: skip
            record["rules"] = list(record["rules"].values())
            tracer.searches.append(record)
            return result

        def _choose(self: Search, c: Candidate) -> None:
            new = c.trial is None
            choose(self, c)
            record = tracer._open.get(id(self))
            if record is not None and new and c.trial is not None:
                record["rules"][c.rule] = {"rule": sorted(c.rule), "rank": c.trial.rank, "share": c.trial.share,
                                           "before": self._store.size, "fresh": [], "kept": [],
                                           "verdict": None}  # fmt: skip

        def _sample(self: Search, pulls: Any, stage: str) -> Generator[list[SampleRequest], list[Samples], list[int]]:
            inner = sample(self, pulls, stage)
            answers = yield next(inner)
            record = tracer._open.get(id(self))
            for (c, _), got in zip(pulls, answers, strict=False):
                logged = record["rules"].get(c.rule) if record is not None else None
                if logged is not None and logged["verdict"] is None and c.fresh is not None:
                    logged["fresh"] += [bits(r) for r in got.present]
                    logged["kept"] += [bool(k) for k in got.labels]
            try:
                inner.send(answers)
            except StopIteration as stop:
                done: list[int] = stop.value
                return done
            raise RuntimeError("Search._sample asked twice")

        def _certify(self: Search, c: Candidate, stage: str, *args: Any, **kwargs: Any) -> Generator[Any, Any, bool]:
            certified = yield from certify(self, c, stage, *args, **kwargs)
            record = tracer._open.get(id(self))
            logged = record["rules"].get(c.rule) if record is not None else None
            if logged is not None and logged["verdict"] is None and c.trial is not None:
                logged |= {"verdict": c.trial.verdict, "stage": stage}
            return certified

        AnchorsExplainer._drive = _drive  # type: ignore[method-assign]
        Search._choose, Search._certify = _choose, _certify  # type: ignore[method-assign]
        Search._sample = _sample  # type: ignore[method-assign]
        try:
            yield self
        finally:
            AnchorsExplainer._drive = drive  # type: ignore[method-assign]
            Search._choose, Search._sample, Search._certify = choose, sample, certify  # type: ignore[method-assign]


def save(out: Path, argv: list[str], searches: list[dict[str, Any]]) -> None:
    with gzip.open(out, "wt") as f:
        json.dump({"argv": argv, "searches": searches}, f)
