"""What a short `run` costs before and around its queries: wall time, peak memory, and how fast Ctrl-C ends it.

    python -m benchmarks.startup --repeats 3

Against the embedded local LLM (llama-server on 127.0.0.1, started here), one 6-word input is run
(`llm-anchors run`, a fresh ``--out`` each time) as plain Anchors (``--anchors``), MAnchors without its
memory (``--no-memory``), MAnchors as it comes (its memory on) and under the ``similar`` perturbation
(the nearest words of the whole vocabulary). Peak memory is the process's own maximum resident set
(``wait4``). Then a 20-input run (as it comes) is sent SIGINT at set moments (during the imports, the start, the
search) and the time it takes to exit is measured: every finished input must be kept.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_anchors.backends.llamacpp import LlamaServer

from ._common import write_json

CONFIGS = {
    "anchors": ["--anchors"],
    "manchors, no memory": ["--no-memory"],
    "manchors (its memory on)": [],
    "manchors, similar": ["--perturbation", "similar"],
}
SIGNAL_AT = (0.1, 0.3, 0.6, 1.0, 2.0, 4.0, 10.0, 20.0)
ONE = "a charming , funny and moving film"


def _command(source: Path, out: Path, url: str, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "llm_anchors.cli", "run", str(source), "--out", str(out), "--base-url", url,
            "--model", "gemma-3-270m-q4_k_m", "--free", *extra]  # fmt: skip


def _timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak resident MB and exit code of one command."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024, process.returncode


def _interrupted(command: list[str], at: float, out: Path) -> dict[str, Any]:
    """Send SIGINT ``at`` seconds after the start; how long the exit took, its code, the lines kept."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(at)
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
        code: int | str = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        code = "hung"
    kept = [json.loads(line) for line in out.read_text().splitlines()[1:]] if out.exists() else []
    return {"at_s": at, "exit_after_s": time.perf_counter() - sent, "code": code, "explained": len(kept),
            "said": err.decode().strip().splitlines()[-1:] }  # fmt: skip


def run(repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, LlamaServer() as server:
        folder = Path(tmp)
        one, many = folder / "one.txt", folder / "many.txt"
        one.write_text(ONE + "\n")
        many.write_text("".join(f"{ONE} number {i} with friends\n" for i in range(20)))
        starts: dict[str, dict[str, Any]] = {}
        for name, extra in CONFIGS.items():
            times, peaks, queries = [], [], []
            for r in range(repeats):
                out = folder / f"{name.replace(', ', '-')}-{r}.jsonl"
                seconds, peak, code = _timed(_command(one, out, server.base_url, extra))
                if code != 0:
                    raise RuntimeError(f"{name}: exit {code}")
                times.append(seconds)
                peaks.append(peak)
                queries.append(json.loads(out.read_text().splitlines()[1])["explanation"]["meta"]["queries"])
            starts[name] = {"wall_s": statistics.median(times), "peak_mb": max(peaks), "runs": times,
                            "queries": statistics.median(queries)}  # fmt: skip
        signals = []
        for at in SIGNAL_AT:
            out = folder / f"signal-{at}.jsonl"
            signals.append(_interrupted(_command(many, out, server.base_url, []), at, out))
    return {"starts": starts, "signals": signals}


def markdown(result: dict[str, Any]) -> str:
    base = result["starts"]["anchors"]["wall_s"]
    lines = [
        "| one 6-word input | wall, median | × --anchors | queries | peak memory |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s in result["starts"].items():
        lines.append(
            f"| {name} | {s['wall_s']:.2f} s | {s['wall_s'] / base:.2f} | {s['queries']:g} | {s['peak_mb']:.0f} MB |"
        )
    lines += ["", "| SIGINT at | exit after | code | inputs kept |", "| ---: | ---: | ---: | ---: |"]
    for s in result["signals"]:
        lines.append(f"| {s['at_s']:.1f} s | {s['exit_after_s']:.2f} s | {s['code']} | {s['explained']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each configuration (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output (default benchmarks/results/)")
    args = parser.parse_args(argv)
    result = run(args.repeats)
    print(markdown(result))
    print(f"wrote {write_json('startup', result, args.out)}")


if __name__ == "__main__":
    main()
