"""What any memory could save on a stream: an oracle that proposes each input's anchor.

`oracle` is a proposer for MAnchors (``proposers=``) whose proposal for an input, tested before the
empty rule and final when certified, is the anchor an earlier run of the same stream found for it (``--oracle FILE`` of
`benchmarks.stream`, run with the memory off). Its cost is what a memory that always knew the answer
would pay: the answer's certificate, nothing to find it. With ``--oracle-seen`` it proposes an anchor
only when an earlier input of the stream, of the same label, had the same one: the most any memory of
earlier explanations could propose, proposed perfectly. `told_length` (``--told-length FILE``) tells
growth only how many words each input's anchor has: it tests no shorter rule (while it has words of
positive credit to add), and the first rule it certifies is final. Between growth and the oracle, it
is the most that predicting, before each test, whether a rule is long enough could save. All three
are measuring devices, not explainers.

    python -m benchmarks.ceiling GROWTH ORACLE

compares the two runs input for input (`split`): paid queries per input, growth against the oracle, by
where growth's anchor was among the rules it tested (empty, the first after the empty rule, later), and
the share of growth's excess each group carries. Prints a markdown table and writes
``benchmarks/results/ceiling_split.json``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

from llm_anchors.extend import Instance, Proposer
from llm_anchors.propose import Growth, Proposals
from llm_anchors.search.rules import Rule

__all__ = ["oracle", "oracle_answers", "split", "told_length"]


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


def told_length(answers: dict[str, list[str]]) -> Callable[[Instance, Hashable], Proposer | None]:
    """Growth told, for each input ``answers`` holds a non-empty anchor for, only how many words it has
    (``MAnchorsExplainer(proposers=[told_length(answers)])``; see the module); plain growth after it,
    and for every other input."""

    def propose(instance: Instance, label: Hashable) -> Proposer | None:
        words = answers.get(instance.query, [])  # no shorter rule is tested; the first certified ends the search
        return Growth(name="told-length", shortest=len(words), final=True) if words else None

    return propose


def split(growth: str | Path, oracle_run: str | Path) -> list[dict[str, Any]]:
    """Per group of inputs (growth's anchor empty, tested first after the empty rule, tested later), the
    inputs, paid queries per input of each run, their ratio, and the share of growth's excess the group
    carries. Both files are `benchmarks.stream` results of the same inputs, in the same order."""
    rows = [json.loads(Path(f).read_text())["rows"]["manchors"][0]["rows"] for f in (growth, oracle_run)]
    if [r["text"] for r in rows[0]] != [r["text"] for r in rows[1]]:
        raise ValueError(f"{growth} and {oracle_run} are not runs of the same inputs")
    groups: dict[str, list[tuple[int, int]]] = {
        "anchor empty": [],
        "anchor tested first": [],
        "anchor tested later": [],
    }
    for g, o in zip(*rows, strict=True):
        name = (
            "anchor empty" if not g["anchor"] else "anchor tested first" if g["tested"] == 2 else "anchor tested later"
        )
        groups[name].append((g["queries"], o["queries"]))
    excess = sum(g - o for pairs in groups.values() for g, o in pairs)
    out = []
    for name, pairs in groups.items():
        paid, known = sum(g for g, _ in pairs), sum(o for _, o in pairs)
        n = max(len(pairs), 1)
        out.append({
            "inputs": name, "count": len(pairs), "growth_per_input": paid / n, "oracle_per_input": known / n,
            "ratio": paid / known if known else None, "excess_share": (paid - known) / excess if excess else None,
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    from benchmarks._common import write_json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("growth", help="a stream result, growth alone (memory off)")
    parser.add_argument("oracle", help="the same stream with --oracle of that result")
    args = parser.parse_args(argv)
    try:
        table = split(args.growth, args.oracle)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        parser.error(f"cannot compare {args.growth} with {args.oracle}: {type(exc).__name__}: {exc}")
    print("| inputs | count | growth, paid queries per input | oracle | growth / oracle | share of the excess |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in table:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "—"
        share = f"{round(r['excess_share'], 2) + 0.0:.0%}" if r["excess_share"] is not None else "—"
        paid = f"{r['growth_per_input']:.1f} | {r['oracle_per_input']:.1f}"
        print(f"| {r['inputs']} | {r['count']} | {paid} | {ratio} | {share} |")
    print(f"\nwrote {write_json('ceiling_split', {'growth': args.growth, 'oracle': args.oracle, 'rows': table})}")


if __name__ == "__main__":
    main()
