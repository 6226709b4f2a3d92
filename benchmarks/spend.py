"""Where the guided search's samples go: the empty rule, the anchor's certificate, rules refused, draws.

    python -m benchmarks.spend --tuning --n 200 --strategy guided --set use_memory=false [any stream option]

Runs `benchmarks.stream` with its options, and counts, over every search it runs (MAnchors' and Anchors'
alike: `Search` is shared), the samples drawn to judge each rule tested (while it was being judged:
samples of it drawn later, to choose, are draws), by what became of the rule: the empty rule (``root``),
the anchor returned (``answer``), another rule certified (``certified-other``: a jump's longer rule,
before a shorter one), a rule refused (``refused``), each also split by whether the rule was tested
before or after an anchor was found (after: growth reducing a certified jump, looking for a shorter
anchor); the rest were drawn to choose (``draws``: growth sampling a rule to rank what to add, Anchors'
arms). Then every sample a search drew, per input, by where its anchor was among the rules it tested:
the first rule tested after the empty rule (``inputs, anchor tested first``), a later one (``…
later``), the empty rule, or none found.
Per input, mean of the searches; for the guided search alone, run ``--strategy guided`` with
``--anchors-from`` (Anchors' rows read, not run). Writes ``benchmarks/results/spend.json``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import stream
from benchmarks._common import write_json
from llm_anchors.search.base import Candidate, Search, SearchResult
from llm_anchors.search.samples import SampleRequest, Samples

__all__ = ["Tally", "main"]


class Tally:
    """Counts the samples of every search run while `installed`, by what became of each rule."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.judged: dict[int, list[tuple[Candidate, str, str, int]]] = {}
        self.drawn: Counter[int] = Counter()  # every sample, per search
        self.by_rank: dict[str, list[int]] = {}

    @contextmanager
    def installed(self) -> Iterator[Tally]:
        """Wrap `Search._certify`, `_sample` and `_result` while inside (a measuring device: nothing else
        changes), and put them back after."""
        certify, sample, result = Search._certify, Search._sample, Search._result
        tally = self

        def _certify(self: Search, c: Candidate, stage: str, *args: Any, **kwargs: Any) -> Generator[Any, Any, bool]:
            after = "after" if getattr(self, "_best", None) is not None else "before"
            certified = yield from certify(self, c, stage, *args, **kwargs)
            tally.judged.setdefault(id(self), []).append((c, stage, after, len(c.fresh or [])))
            return certified

        def _sample(self: Search, pairs: Any, stage: str) -> Generator[list[SampleRequest], list[Samples], None]:
            tally.counts["all"] += sum(n for _, n in pairs)
            tally.drawn[id(self)] += sum(n for _, n in pairs)
            yield from sample(self, pairs, stage)

        def _result(self: Search, best: Candidate) -> SearchResult:
            tally.close(self, best)
            return result(self, best)

        Search._certify = _certify  # type: ignore[method-assign]
        Search._sample = _sample  # type: ignore[method-assign,assignment]
        Search._result = _result  # type: ignore[method-assign,assignment]
        try:
            yield self
        finally:
            Search._certify, Search._sample, Search._result = certify, sample, result  # type: ignore[method-assign]

    def close(self, search: Search, best: Candidate | None) -> None:
        """Count one search's judged samples by outcome, once (a search may report its result again)."""
        if id(search) not in self.judged:
            return
        judged = self.judged.pop(id(search))
        self.by_rank.setdefault(where(judged, best), []).append(self.drawn.pop(id(search), 0))
        for c, stage, after, n in judged:
            outcome = (
                "root" if stage == "root" else
                "answer" if c.certified and best is not None and c.rule == best.rule else
                "certified-other" if c.certified else "refused"
            )  # fmt: skip
            self.counts[outcome] += n
            self.counts[f"{outcome} rules"] += 1
            if outcome != "root":
                self.counts[f"{outcome}, tested {after} an anchor was found"] += n
        self.counts["searches"] += 1

    def per_search(self) -> dict[str, float]:
        n = max(self.counts["searches"], 1)
        judged = sum(self.counts[k] for k in ("root", "answer", "certified-other", "refused"))
        out = {k: round(v / n, 2) for k, v in sorted(self.counts.items()) if k != "searches"}
        out["draws"] = round((self.counts["all"] - judged) / n, 2)
        out["searches"] = self.counts["searches"]
        for name, drawn in sorted(self.by_rank.items()):
            out[f"inputs, {name}"] = len(drawn)
            out[f"samples per input, {name}"] = round(sum(drawn) / len(drawn), 1)
        return out


def where(judged: list[tuple[Candidate, str, str, int]], best: Candidate | None) -> str:
    """Where a search's anchor was among the rules it tested: the empty rule, the first tested after
    it, a later one, or none found."""
    if best is None or not best.certified:
        return "no anchor"
    if not best.rule:
        return "anchor empty"
    ranks = sorted(c.trial.rank for c, stage, _, _ in judged if stage != "root" and c.trial is not None)
    first = best.trial is not None and bool(ranks) and best.trial.rank == ranks[0]
    return "anchor tested first" if first else "anchor tested later"


def main(argv: list[str] | None = None) -> None:
    with Tally().installed() as tally:
        stream.main(argv)
    table = tally.per_search()
    print("\n| samples per search | mean |\n| --- | ---: |")
    for name, value in table.items():
        print(f"| {name} | {value:,} |")
    print(f"wrote {write_json('spend', {'argv': argv or sys.argv[1:], 'per_search': table})}")


if __name__ == "__main__":
    main()
