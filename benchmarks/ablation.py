"""Does each proposer of MAnchors' guided search pay its way? One table from stream runs of one or more streams.

    python -m benchmarks.stream --n 500 --tuning --strategy guided --set use_memory=false  # growth alone
    python -m benchmarks.stream ... --anchors-from A                                     # memory + growth (default)
    python -m benchmarks.ablation A B [C ...] [--name rf_tuning]

Each argument is a `benchmarks.stream` result (JSON); the files of one stream (its dataset, tuning or
evaluation, and its inputs) share one Anchors row, and each stream is a block of rows (the tuning
stream beside the evaluation one). Each guided run is a row, named by the proposers it ran with (the
memory when it had a hit; growth always). Columns: paid queries and their
reduction against Anchors, memory hits, exact repeats (with what they paid, and how many got the
anchor their first occurrence got), coverage and length on the inputs where both anchors are
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
    τ_sim 1, it has none)."""
    return "memory + growth" if any(r.get("memory_hit") for r in rows) else "growth"


def stream_name(params: dict[str, Any], n: int) -> str:
    """The stream a file explains: its dataset, tuning or evaluation part, and its inputs."""
    kind = str(params.get("dataset", "rt"))
    dataset = {"rt": "RT-Polarity", "youtube": "YouTube spam"}.get(kind, kind)
    if params.get("classifier") == "llm":
        dataset += " (local LLM)"
    return f"{dataset}, {'tuning' if params.get('tuning') else 'evaluation'}, {n} inputs"


def repeats(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Exact repeats in a run: how many, the paid queries they cost, and how many got the anchor the
    first occurrence of their text got."""
    first: dict[str, list[str]] = {}
    count = paid = same = 0
    for row in rows:
        if row.get("memory_repeat"):
            count += 1
            paid += row["queries"]
            same += first.get(row["text"]) == row["anchor"]
        first.setdefault(row["text"], row["anchor"])
    return {"repeats": count, "repeat_queries": paid, "repeat_same_anchor": same}


def rows(paths: list[Path]) -> list[dict[str, Any]]:
    """One block per stream: Anchors' figures (the same rows in every file of the stream) and one row
    per guided run, recomputed from the files' rows (`compare`), so files written before a figure
    existed still give it."""
    streams: dict[str, dict[str, Any]] = {}
    for path in paths:
        payload = json.loads(path.read_text())
        a_rows = payload["rows"]["anchors"]
        name = stream_name(payload["params"], len(a_rows))
        block = streams.setdefault(name, {"stream": name, "indices": [r["index"] for r in a_rows], "rows": []})
        if [r["index"] for r in a_rows] != block["indices"]:
            raise SystemExit(f"{path}: another stream than the other files of {name}")
        for run in payload["rows"]["manchors"]:
            if run["strategy"] != "guided":
                continue
            result = compare(a_rows, run["rows"], payload["params"]["price_model"])
            anchors, m = result["anchors"], result["manchors"]
            block["anchors"] = anchors
            block["rows"].append({
                "proposers": proposers(payload["params"], run["rows"]), "file": path.name,
                "paid_queries": m["paid_queries"], "reduction": 1 - m["paid_queries"] / max(anchors["paid_queries"], 1),
                "memory_hits": result["memory_hits"], "inputs": m["inputs"], **repeats(run["rows"]),
                **{k: m[k] for k in FIGURES},
                "anchors": {k: anchors[k] for k in PAIRED},
            })  # fmt: skip
    blocks = [b for b in streams.values() if b["rows"]]
    if not blocks:
        raise SystemExit("no guided run in these files")
    for block in blocks:
        del block["indices"]
    return blocks


def markdown(blocks: list[dict[str, Any]], title: str) -> str:
    def cell(value: dict[str, float]) -> str:
        return f"{value['mean']:.3f} ± {value['ci95']:.3f}"

    def paired(row: dict[str, Any], key: str) -> str:
        return f"{cell(row[key])} (Anchors {row['anchors'][key]['mean']:.3f})"

    head = ["stream", "proposers", "paid queries", "reduction", "memory hits", "exact repeats: paid, same anchor",
            "coverage (both non-empty)", "length (both non-empty)", "empty share", "below τ"]  # fmt: skip
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2)]
    for block in blocks:
        a = block["anchors"]
        lines.append(f"| {block['stream']} | Anchors | {a['paid_queries']:,} | | | | | | {cell(a['empty'])} | "
                     f"{cell(a['below_tau'])} |")  # fmt: skip
        for row in block["rows"]:
            n = row["repeats"]
            repeated = f"{n}: {row['repeat_queries']}, {row['repeat_same_anchor']}" if n else "0"
            lines.append(
                f"| | {row['proposers']} | {row['paid_queries']:,} | {row['reduction']:.1%} | "
                f"{row['memory_hits']} / {row['inputs']} | {repeated} | {paired(row, PAIRED[0])} | "
                f"{paired(row, PAIRED[1])} | {cell(row['empty'])} | {cell(row['below_tau'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="benchmarks.stream JSON files (of one or more streams)")
    parser.add_argument("--name", default="ablation", help="the JSON's name (benchmarks/results/ablation_NAME)")
    parser.add_argument("--title", default="Each proposer on and off")
    args = parser.parse_args(argv)
    if not args.name or any(c in args.name for c in "/\\"):
        parser.error(f"--name is a file name's part (letters, digits, _), not a path: {args.name!r}")
    blocks = rows(args.results)
    print(markdown(blocks, args.title))
    path = write_json(f"ablation_{args.name}", {"streams": [
        {**b, "anchors": {k: b["anchors"][k] for k in ("paid_queries", *FIGURES)}} for b in blocks
    ]})  # fmt: skip
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
