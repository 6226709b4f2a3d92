"""Does each proposer of MAnchors' guided search pay its way? One table from stream runs of one stream.

    python -m benchmarks.stream --n 500 --tuning --strategy guided                   # the default: growth
    python -m benchmarks.stream ... --anchors-from A --set use_memory=true           # memory + growth
    python -m benchmarks.stream ... --anchors-from A --proxy surrogate               # surrogate + growth
    python -m benchmarks.stream ... --anchors-from A --proxy surrogate --set use_memory=true  # all three
    python -m benchmarks.ablation A B C D [--name rf_tuning]

Each argument is a `benchmarks.stream` result (JSON) of the same stream against the same Anchors rows;
each of its guided runs is a row, named by the proposers it ran with (the memory when it had a hit, the
surrogate when it ran; growth always). Columns: paid queries and their
reduction against Anchors, memory hits, coverage and length on the inputs where both anchors are
non-empty, the share of empty anchors and the share below τ on fresh samples, each with its 95% CI.
Prints a markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ._common import compare, write_json

FIGURES = ("coverage_both_non_empty", "length_both_non_empty", "empty", "below_tau")
PAIRED = FIGURES[:2]
"""Measured on the inputs where both anchors are non-empty: Anchors' own value differs by row."""


def proposers(params: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The proposers a run had besides growth, from its rows: the memory when it had a hit (off, or
    τ_sim 1, it has none), the surrogate when it ran."""
    memory = any(r.get("memory_hit") for r in rows)
    surrogate = any(r.get("proxy") for r in rows)
    names = [name for name, on in (("memory", memory), ("surrogate", surrogate)) if on]
    return " + ".join([*names, "growth"])


def rows(paths: list[Path]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Anchors' figures (the same rows in every file) and one row per guided run, recomputed from the
    files' rows (`compare`), so files written before a figure existed still give it."""
    anchor_rows: list[dict[str, Any]] | None = None
    anchors: dict[str, Any] = {}
    out = []
    for path in paths:
        payload = json.loads(path.read_text())
        a_rows = payload["rows"]["anchors"]
        if anchor_rows is not None and [r["index"] for r in a_rows] != [r["index"] for r in anchor_rows]:
            raise SystemExit(f"{path}: another stream than {paths[0]}")
        anchor_rows = a_rows
        for run in payload["rows"]["manchors"]:
            if run["strategy"] != "guided":
                continue
            result = compare(a_rows, run["rows"], payload["params"]["price_model"])
            anchors, m = result["anchors"], result["manchors"]
            out.append({
                "proposers": proposers(payload["params"], run["rows"]), "file": path.name,
                "paid_queries": m["paid_queries"], "reduction": 1 - m["paid_queries"] / max(anchors["paid_queries"], 1),
                "memory_hits": result["memory_hits"], "inputs": m["inputs"],
                **{k: m[k] for k in FIGURES},
                "anchors": {k: anchors[k] for k in PAIRED},
            })  # fmt: skip
    if not out:
        raise SystemExit("no guided run in these files")
    return anchors, out


def markdown(anchors: dict[str, Any], table: list[dict[str, Any]], title: str) -> str:
    def cell(value: dict[str, float]) -> str:
        return f"{value['mean']:.3f} ± {value['ci95']:.3f}"

    def paired(row: dict[str, Any], key: str) -> str:
        return f"{cell(row[key])} (Anchors {row['anchors'][key]['mean']:.3f})"

    head = ["proposers", "paid queries", "reduction", "memory hits", "coverage (both non-empty)",
            "length (both non-empty)", "empty share", "below τ"]  # fmt: skip
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    lines.append(f"| Anchors | {anchors['paid_queries']:,} | | | | | {cell(anchors['empty'])} | "
                 f"{cell(anchors['below_tau'])} |")  # fmt: skip
    for row in table:
        lines.append(
            f"| {row['proposers']} | {row['paid_queries']:,} | {row['reduction']:.1%} | "
            f"{row['memory_hits']} / {row['inputs']} | {paired(row, PAIRED[0])} | {paired(row, PAIRED[1])} | "
            f"{cell(row['empty'])} | {cell(row['below_tau'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="benchmarks.stream JSON files of one stream")
    parser.add_argument("--name", default="ablation", help="the JSON's name (benchmarks/results/ablation_NAME)")
    parser.add_argument("--title", default="Each proposer on and off")
    args = parser.parse_args(argv)
    if not args.name or any(c in args.name for c in "/\\"):
        parser.error(f"--name is a file name's part (letters, digits, _), not a path: {args.name!r}")
    anchors, table = rows(args.results)
    print(markdown(anchors, table, args.title))
    path = write_json(f"ablation_{args.name}", {"anchors": {k: anchors[k] for k in ("paid_queries", *FIGURES)},
                                                  "rows": table})  # fmt: skip
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
