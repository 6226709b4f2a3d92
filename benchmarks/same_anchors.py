"""Did a change leave the explanations alone? Two `benchmarks.stream` results of one stream, input by input.

    python -m benchmarks.same_anchors BEFORE.json AFTER.json

For each explainer's rows (Anchors, each MAnchors setting), the inputs whose anchor, paid queries or
samples differ, and the totals: what a redesign "with behaviour unchanged" must show as none. Prints a
markdown table and writes JSON beside AFTER (``…_same.json``); exits 1 when any input differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._common import write_json

COMPARED = ("anchor", "queries", "samples", "success")


def runs(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Each explainer's rows of a stream result, by name ("anchors", "manchors guided 0.4 0.8")."""
    rows = json.loads(path.read_text())["rows"]
    found = {"anchors": rows["anchors"]}
    for run in rows["manchors"]:
        found[f"manchors {run['strategy']} {run['tau_sim']} {run['tau_mid']}"] = run["rows"]
    return found


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """The inputs (by index) whose compared figures differ, and each side's totals."""
    if [r["index"] for r in before] != [r["index"] for r in after]:
        return {"same_inputs": False}
    differ = [b["index"] for b, a in zip(before, after, strict=True) if any(b[k] != a[k] for k in COMPARED)]
    return {
        "same_inputs": True,
        "inputs": len(before),
        "differ": differ,
        "queries": [sum(r["queries"] for r in side) for side in (before, after)],
        "samples": [sum(r["samples"] for r in side) for side in (before, after)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    old, new = runs(args.before), runs(args.after)
    table = {name: compare(old[name], new[name]) for name in old if name in new}
    print("| explainer | inputs | inputs that differ | paid queries before → after | samples before → after |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, c in table.items():
        if not c["same_inputs"]:
            print(f"| {name} | another stream | | | |")
            continue
        q, s = c["queries"], c["samples"]
        print(f"| {name} | {c['inputs']} | {len(c['differ'])} | {q[0]:,} → {q[1]:,} | {s[0]:,} → {s[1]:,} |")
    missing = sorted(set(old) ^ set(new))
    if missing:
        print(f"only on one side: {', '.join(missing)}")
    out = args.after.with_name(args.after.stem + "_same.json")
    write_json(out.stem, {"before": str(args.before), "after": str(args.after), "runs": table}, out)
    same = not missing and all(c["same_inputs"] and not c["differ"] for c in table.values())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
