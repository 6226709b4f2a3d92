"""What any memory could save on a stream: an oracle that proposes each input's anchor.

`oracle` is a proposer for MAnchors (``proposers=``) whose proposal for an input, tested before the
empty rule and final when certified, is the anchor an earlier run of the same stream found for it (``--oracle FILE`` of
`benchmarks.stream`, run with the memory off). Its cost is what a memory that always knew the answer
would pay: the answer's certificate, nothing to find it. With ``--oracle-seen`` it proposes an anchor
only when an earlier input of the stream, of the same label, had the same one: the most any memory of
earlier explanations could propose, proposed perfectly. Both are measuring devices, not explainers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

from llm_anchors.extend import Instance, Proposer
from llm_anchors.propose import Proposals
from llm_anchors.search.rules import Rule

__all__ = ["oracle", "oracle_answers"]


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


def oracle(answers: dict[str, list[str]]) -> Callable[[Instance, Hashable], Proposer | None]:
    """The oracle as a proposer (``MAnchorsExplainer(proposers=[oracle(answers)])``): for each input (each
    level of it), the anchor ``answers`` holds for its text, proposed before the empty rule and final when
    certified; none for an input it holds none for."""

    def propose(instance: Instance, label: Hashable) -> Proposer | None:
        rule = as_rule(answers.get(instance.query, []), instance.features)
        return Proposals("oracle", [rule], first=True, final=frozenset([rule])) if rule else None

    return propose
