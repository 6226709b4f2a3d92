"""What any memory could save on a stream: an oracle that proposes each input's anchor.

`OracleExplainer` is MAnchors whose first proposal for an input, tested before the empty rule and final
when certified, is the anchor an earlier run of the same stream found for it (``--oracle FILE`` of
`benchmarks.stream`, run with the memory off). Its cost is what a memory that always knew the answer
would pay: the answer's certificate, nothing to find it. With ``--oracle-seen`` it proposes an anchor
only when an earlier input of the stream, of the same label, had the same one: the most any memory of
earlier explanations could propose, proposed perfectly. Both are measuring devices, not explainers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_anchors import MAnchorsExplainer
from llm_anchors.extend import Proposer
from llm_anchors.propose import Proposals
from llm_anchors.search.rules import Rule

__all__ = ["OracleExplainer", "oracle_answers"]


def oracle_answers(path: str | Path, *, seen_only: bool = False) -> dict[str, list[str]]:
    """Each input's anchor (its words) in the MAnchors rows of a `benchmarks.stream` result file; with
    ``seen_only``, only the inputs whose anchor an earlier input of the same label had too."""
    rows = json.loads(Path(path).read_text())["rows"]["manchors"][0]["rows"]
    answers: dict[str, list[str]] = {}
    seen: set[tuple[Any, tuple[str, ...]]] = set()
    for row in rows:
        key = (row["label"], tuple(sorted(row["anchor"])))
        if row["anchor"] and (not seen_only or key in seen):
            answers.setdefault(row["text"], row["anchor"])
        seen.add(key)
    return answers


def as_rule(words: Sequence[str], features: Sequence[str]) -> Rule | None:
    """The positions of ``words`` among ``features`` (each word its first position not yet taken); None
    when one is not there."""
    taken: list[int] = []
    for word in words:
        at = [i for i, f in enumerate(features) if f == word and i not in taken]
        if not at:
            return None
        taken.append(at[0])
    return frozenset(taken)


class OracleExplainer(MAnchorsExplainer):
    """MAnchors proposing, first and final, the anchor ``answers`` holds for each input (see the module)."""

    def __init__(self, *args: Any, answers: dict[str, list[str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answers = answers
        self._features: Sequence[str] = ()
        self._query = ""

    async def _guided(self, run: Any, similar: Any, looked_up: Any) -> Any:
        self._query, self._features = run.instance.query, run.instance.features
        return await super()._guided(run, similar, looked_up)

    def guided_search(
        self, n_features: int, pool: np.ndarray, proposers: Sequence[Proposer] = (), *args: Any, **kwargs: Any
    ) -> Any:
        rule = as_rule(self.answers.get(self._query, []), self._features)
        known = [rule] if rule else []
        oracle = [Proposals("oracle", known, first=True, final=frozenset(known))] if known else []
        return super().guided_search(n_features, pool, [*oracle, *proposers], *args, **kwargs)
