"""`llm-anchors report` on a long run: wall time, peak memory and the page's size.

    python -m benchmarks.report_scale --lines 100000

A results file of ``--lines`` lines is made from real explanations: MAnchors (memory on) explains
``--distinct`` RT-Polarity sentences with a keyword model, and their lines are written again under
new indices and hashes until the file holds ``--lines`` (about 4 KB a line, as a real run's). Then
``llm-anchors report`` runs on it in a process of its own: its wall time, its peak resident memory
(``wait4``), the page's size; and, with ``--browser``, the time headless Chromium takes to draw it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_anchors import FunctionClassifier, MAnchorsExplainer
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.run import ResultsFile, explain_resumable

from ._common import write_json

POSITIVE = {"good", "great", "fine", "best", "funny", "beautiful", "moving", "fun", "love", "charming"}


def _keywords(texts: list[str]) -> list[str]:
    return ["pos" if set(t.lower().split()) & POSITIVE else "neg" for t in texts]


async def _explained(folder: Path, distinct: int, data: str | None) -> list[str]:
    """The results lines of ``distinct`` real explanations (the configuration line first)."""
    texts, _ = load_rt_polarity(data)
    chosen = texts[: distinct // 2] + texts[-(distinct - distinct // 2) :]
    async with MAnchorsExplainer(FunctionClassifier(_keywords, name="keywords"), seed=0) as e:
        with ResultsFile(folder / "base.jsonl") as results:
            await explain_resumable(e, chosen, results)
    return (folder / "base.jsonl").read_text().splitlines()


def make(path: Path, lines: int, distinct: int, data: str | None) -> None:
    base = asyncio.run(_explained(path.parent, distinct, data))
    head, body = base[0], base[1:]
    with path.open("w") as out:
        out.write(head + "\n")
        for i in range(lines):
            record = json.loads(body[i % len(body)])
            record["index"], record["input_sha256"] = i, hashlib.sha256(str(i).encode()).hexdigest()
            out.write(json.dumps(record) + "\n")


def measure(results: Path, page: Path) -> dict[str, Any]:
    started = time.perf_counter()
    command = [sys.executable, "-m", "llm_anchors.cli", "report", str(results), "-o", str(page)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"report failed: {process.stderr.read().decode() if process.stderr else ''}")
    return {"wall_s": time.perf_counter() - started, "peak_mb": usage.ru_maxrss / 1024,
            "results_mb": results.stat().st_size / 1e6, "page_mb": page.stat().st_size / 1e6}  # fmt: skip


def browser(page: Path, folder: Path) -> float | None:
    """Seconds headless Chromium takes to load the page and run its script (None: no Chromium)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             f"--user-data-dir={folder / 'profile'}", "--dump-dom", page.resolve().as_uri()]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run([chromium, *flags], capture_output=True, timeout=600)
    if b"page 1 of" not in done.stdout:
        raise RuntimeError("the page's script did not draw its table")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000, help="results lines (default 100,000)")
    parser.add_argument("--distinct", type=int, default=200, help="real explanations they repeat (default 200)")
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium drawing the page")
    parser.add_argument("--data", default=None, help="data folder (default ../shared/data or $LLM_ANCHORS_DATA)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output (default benchmarks/results/)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = folder / "results.jsonl"
        make(results, args.lines, args.distinct, args.data)
        result = {"lines": args.lines, **measure(results, folder / "report.html")}
        if args.browser:
            result["browser_s"] = browser(folder / "report.html", folder)
    print("| lines | results file | report: wall | peak memory | page | Chromium draws it |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    drawn = f"{result['browser_s']:.1f} s" if result.get("browser_s") is not None else "—"
    print(f"| {result['lines']:,} | {result['results_mb']:.0f} MB | {result['wall_s']:.1f} s | "
          f"{result['peak_mb']:.0f} MB | {result['page_mb']:.1f} MB | {drawn} |")  # fmt: skip
    print(f"wrote {write_json('report_scale', result, args.out)}")


if __name__ == "__main__":
    main()
