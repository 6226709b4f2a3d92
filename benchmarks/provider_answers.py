"""The cap against what a hosted provider can answer: each case against a loopback server that returns
OpenAI's documented ``usage`` and ``service_tier`` fields, the provider's bill against the cap.

    python -m benchmarks.provider_answers                  # this tree's CLI
    python -m benchmarks.provider_answers --tree OLD_TREE  # another checkout's CLI, same servers

Each case runs ``llm-anchors run`` (or ``estimate`` then ``run``) on 12 sentences, plain Anchors, through
a loopback gateway serving a hosted model by its name, under a cap; then the same command with a cap
large enough to finish. The bill is the provider's for what it answered: the tokens the server really
processed (a word a token), at the tier it said, whatever usage it reported. Cases:

- ``priority``: every answer says ``"service_tier": "priority"`` (none asked; then flex asked);
- ``reasoning``: gpt-5 reasons 50 tokens before its answer, whatever the request's bound (at a cap
  below one call's worst case, $0.003, and at $0.02);
- ``cached > prompt``, ``10^9 prompt``, ``"74" prompt``: usage that cannot be true;
- ``estimate + run``: ``estimate --max-queries 400`` then ``run --max-queries 400`` on one ``--out``;
- ``429 storm``: half the requests answered 429, ``--max-attempts 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from llm_anchors.money import Charge, price_for, read_journal
from tests.fault_server import FaultServer

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Review: {text}\nSentiment:"
SENTENCES = [f"a good and great film number {i}" for i in range(6)] + [f"a dull film number {i}" for i in range(6)]


def answer(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


async def cli(tree: Path, *args: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llm_anchors.cli", *args, env=env, cwd=tree,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, err.decode()


def bill(server: FaultServer, model: str) -> Decimal:
    """What the provider bills for what it answered: what it processed, at the tier it said."""
    price = price_for(model)
    total = Decimal(0)
    for a in server.answered:
        rates = price.at(a["tier"]) or price
        total += rates.cost(Charge(prompt_tokens=a["prompt_tokens"], completion_tokens=a["completion_tokens"]))
    return total


def _lie(server: FaultServer, kind: str) -> Callable[[list[str]], dict[str, Any]]:
    def usage(prompts: list[str]) -> dict[str, Any]:
        true = server.true_usage(len(prompts))
        if kind == "cached":
            return {"usage": {**true, "prompt_tokens_details": {"cached_tokens": 10 * true["prompt_tokens"]}}}
        return {"usage": {**true, "prompt_tokens": 10**9 if kind == "huge" else "74"}}

    return usage


CASES: dict[str, dict[str, Any]] = {
    "priority, none asked": {"model": "gpt-5-chat-latest", "server": {"tier": "priority"}, "cap": "0.003"},
    "priority, flex asked": {
        "model": "gpt-5-chat-latest",
        "server": {"tier": "priority"},
        "cap": "0.003",
        "args": ["--service-tier", "flex"],
    },  # fmt: skip
    "reasoning, 50 tokens": {
        "model": "gpt-5",
        "server": {"reasoning_tokens": 50, "honour_bound": False},
        "cap": "0.003",
    },  # fmt: skip
    "reasoning, 50 tokens, $0.02": {
        "model": "gpt-5",
        "server": {"reasoning_tokens": 50, "honour_bound": False},
        "cap": "0.02",
    },  # fmt: skip
    "cached > prompt": {"model": "gpt-4o-mini", "lie": "cached", "cap": "0.002"},
    "10^9 prompt tokens": {"model": "gpt-4o-mini", "lie": "huge", "cap": "0.002"},
    '"74" prompt tokens': {"model": "gpt-4o-mini", "lie": "string", "cap": "0.002"},
}


async def capped(tree: Path, name: str, case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One case: a run under the cap, then the same command with $1."""
    server = FaultServer(answer=answer, **case.get("server", {}))
    if "lie" in case:
        server.usage = _lie(server, case["lie"])
    source = workdir / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in SENTENCES))
    out = workdir / "out.jsonl"
    async with server:
        args = ["run", str(source), "--out", str(out), "--base-url", server.base_url, "--prompt", PROMPT,
                "--anchors", "--model", case["model"], "--endpoint", "chat", *case.get("args", [])]  # fmt: skip
        code, err = await cli(tree, *args, "--max-usd", case["cap"])
        first = bill(server, case["model"])
        recorded = _recorded(out)
        again, err_again = await cli(tree, *args, "--max-usd", "1")
    return {
        "case": name, "cap": case["cap"], "bill": str(first), "times_cap": float(first / Decimal(case["cap"])),
        "recorded": recorded, "exit": code, "said": _said(err), "rerun_exit": again, "rerun_said": _said(err_again),
        "bill_after_rerun": str(bill(server, case["model"])),
    }  # fmt: skip


def _recorded(out: Path) -> str:
    try:
        return str(read_journal(f"{out}.budget.jsonl").spent.usd)
    except Exception as exc:  # noqa: BLE001 (an old tree's journal its reader refuses)
        return f"unreadable: {str(exc)[:60]}"


def _said(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning:")]
    return lines[-1][:160] if lines else ""


async def estimate_then_run(tree: Path, workdir: Path) -> dict[str, Any]:
    source = workdir / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in SENTENCES))
    async with FaultServer(answer=answer) as server:
        common = [str(source), "--out", str(workdir / "out.jsonl"), "--base-url", server.base_url, "--anchors"]
        pilot, _ = await cli(tree, "estimate", *common, "--max-queries", "400")
        after_pilot = server.prompts_served
        code, err = await cli(tree, "run", *common, "--max-queries", "400")
    return {"case": "estimate + run", "cap": "400 queries", "served": server.prompts_served,
            "pilot_served": after_pilot, "times_cap": server.prompts_served / 400, "exit": code, "said": _said(err),
            "pilot_exit": pilot}  # fmt: skip


async def storm(tree: Path, workdir: Path) -> dict[str, Any]:
    source = workdir / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in SENTENCES[:8]))
    out = workdir / "out.jsonl"
    async with FaultServer(answer=answer, fail_rate=0.5, kinds=["429"], retry_after="0") as server:
        args = ["run", str(source), "--out", str(out), "--base-url", server.base_url, "--anchors",
                "--max-attempts", "2", "--max-queries", "100000"]  # fmt: skip
        code, err = await cli(tree, *args)
        ended = len(out.read_text().splitlines()) - 1 if out.exists() else 0
        server.fail_rate = 0.0
        again, err_again = await cli(tree, *args)
    return {"case": "429 storm", "inputs": 8, "ended": ended, "exit": code, "said": _said(err), "rerun_exit": again,
            "rerun_said": _said(err_again)}  # fmt: skip


async def run_all(tree: Path) -> list[dict[str, Any]]:
    rows = []
    for name, case in CASES.items():
        with tempfile.TemporaryDirectory() as workdir:
            rows.append(await capped(tree, name, case, Path(workdir)))
    for other in (estimate_then_run, storm):
        with tempfile.TemporaryDirectory() as workdir:
            rows.append(await other(tree, Path(workdir)))
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| case | cap | provider's bill | × cap | recorded | exit | then, with enough cap |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in rows:
        if r["case"] == "429 storm":
            lines.append(f"| 429 storm, --max-attempts 2 | — | {r['ended']}/{r['inputs']} inputs ended | — | — | "
                         f"{r['exit']} | exit {r['rerun_exit']} |")  # fmt: skip
        elif r["case"] == "estimate + run":
            lines.append(f"| estimate, then run, one --out | {r['cap']} | {r['served']} queries (pilot "
                         f"{r['pilot_served']}) | {r['times_cap']:.2f} | — | {r['exit']} | — |")  # fmt: skip
        else:
            then = f"exit {r['rerun_exit']}, bill ${Decimal(r['bill_after_rerun']):.4f}"
            lines.append(f"| {r['case']} | ${r['cap']} | ${Decimal(r['bill']):.6f} | {r['times_cap']:.2f} | "
                         f"{r['recorded']} | {r['exit']} | {then} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from ._common import write_json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose CLI is run (default: this one)")
    parser.add_argument("--name", default="provider_answers", help="the JSON file's name")
    args = parser.parse_args(argv)
    rows = asyncio.run(run_all(Path(args.tree).resolve()))
    print(markdown(rows))
    print(f"\nwrote {write_json(args.name, {'tree': args.tree, 'rows': rows})}")


if __name__ == "__main__":
    main()
