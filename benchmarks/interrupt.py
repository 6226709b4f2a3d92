"""How fast Ctrl-C ends `llm-anchors explain` on a long input, whose search steps take seconds of CPU.

    python -m benchmarks.interrupt --words 5000 --at 3 6 10

A loopback server answers at once (labels from keywords, the fault server of the tests): what the run
spends its time on is the search, its coverage and its drawing, not the model. SIGINT is sent ``--at``
seconds after the start; the table gives how long the process took to exit after it, and its code.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import Any

from tests.fault_server import FaultServer

from ._common import write_json

PROMPT = "Review: {text}\nSentiment:"


def _answer(prompt: str) -> str:
    """Positive when "good" outnumbers "bad": an anchor needs many of the input's words, so the search
    tests many rules, and measures each one's coverage."""
    words = prompt.split("Review: ")[-1].split()
    return "positive" if words.count("good") > words.count("bad") else "negative"


def long_text(words: int) -> str:
    """A review of ``words`` words, seeded: ordinary words, with "good" 40 times and "bad" 30 times."""
    import numpy as np

    vocabulary = "the film plot was set in a town with many people and some scenes of long talk about life".split()
    rng = np.random.default_rng(0)
    body = [vocabulary[i] for i in rng.integers(0, len(vocabulary), words)]
    for position in rng.choice(words, 70, replace=False)[:40]:
        body[position] = "good"
    for position in rng.choice(words, 70, replace=False)[40:]:
        body[position] = "bad" if body[position] != "good" else body[position]
    return " ".join(body)


async def _interrupted(url: str, text: str, at: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "llm_anchors.cli", "explain", text, "--base-url", url, "--model", "m",
               "--prompt", PROMPT, "--free"]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    await asyncio.sleep(at)
    finished_before = process.returncode is not None
    sent = time.perf_counter()
    if not finished_before:
        process.send_signal(signal.SIGINT)
    try:
        _, err = await asyncio.wait_for(process.communicate(), timeout=120)
        code: int | str = process.returncode if process.returncode is not None else "?"
    except TimeoutError:
        process.kill()
        _, err = await process.communicate()
        code = "hung"
    return {"at_s": at, "exit_after_s": time.perf_counter() - sent, "code": code, "done_before": finished_before,
            "said": err.decode().strip().splitlines()[-1:]}  # fmt: skip


async def run(words: int, moments: list[float]) -> dict[str, Any]:
    text = long_text(words)
    async with FaultServer(answer=_answer) as server:
        rows = [await _interrupted(server.base_url, text, at) for at in moments]
    return {"words": words, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=5000)
    parser.add_argument("--at", type=float, nargs="+", default=[3.0, 6.0, 10.0])
    args = parser.parse_args()
    result = asyncio.run(run(args.words, args.at))
    print(f"### Ctrl-C on one {args.words:,}-word input\n")
    print("| SIGINT at (s) | exit after (s) | exit code | finished before |\n| ---: | ---: | ---: | --- |")
    for row in result["rows"]:
        print(f"| {row['at_s']:.1f} | {row['exit_after_s']:.2f} | {row['code']} | {row['done_before']} |")
    print(f"\nwrote {write_json('interrupt', result)}")


if __name__ == "__main__":
    main()
