"""The README's first command on a fresh clone: how long it takes, and how long its explanation takes.

    python -m benchmarks.first_command [--cache DIR] [--keep]

Clones this repository's HEAD into a temporary folder (as a user clones it: no ``.venv``, no data beside
it), then runs the README's first command there with an empty pip cache and, unless ``--cache`` names one
already filled, an empty build cache (``LLM_ANCHORS_CACHE``: llama-server built from source, the model
unpacked), as on a fresh machine. Prints a table (set-up, explanation, total; the machine's load) and
writes JSON. Run it alone: it is a timing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import write_json

ROOT = Path(__file__).resolve().parents[1]


def first_command() -> tuple[str, str]:
    """The README's first command, split at ``&&``: its set-up and its explanation."""
    block = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    setup, explain = block.splitlines()[0].split(" && ", 1)
    return setup, explain


def timed(command: str, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Seconds ``command`` took in ``cwd`` (a failure raises, its output shown), and its output."""
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"`{command}` failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done.stdout + done.stderr


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=None, help="an LLM_ANCHORS_CACHE to use (default: empty)")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its caches")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="llm-anchors-first-"))
    clone = work / "llm-anchors"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    cache = args.cache or work / "cache"
    env = {**os.environ, "LLM_ANCHORS_CACHE": str(cache), "PIP_CACHE_DIR": str(work / "pip-cache")}
    env.pop("LLM_ANCHORS_DATA", None)
    env.pop("VIRTUAL_ENV", None)
    setup, explain = first_command()
    load = os.getloadavg()[0]
    try:
        setup_s, _ = timed(setup, clone, env)
        explain_s, said = timed(explain, clone, env)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    anchor = re.search(r"^anchor +(.*)$", said, re.MULTILINE)
    result: dict[str, Any] = {
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "setup_s": setup_s, "explain_s": explain_s, "total_s": setup_s + explain_s,
        "empty_cache": args.cache is None, "load_at_start": load, "load_at_end": os.getloadavg()[0],
        "cpus": os.cpu_count(), "anchor": anchor.group(1) if anchor else None, "output": said[-2000:],
    }  # fmt: skip
    print("| step | seconds |")
    print("| --- | ---: |")
    print(f"| `{setup}` ({'empty caches' if args.cache is None else 'build cache given'}) | {setup_s:.0f} |")
    print(f"| `{explain}` | {explain_s:.1f} |")
    print(f"| the README's first command | {setup_s + explain_s:.0f} ({(setup_s + explain_s) / 60:.1f} min) |")
    print(f"\nload {load:.1f} → {result['load_at_end']:.1f} on {os.cpu_count()} cores; anchor: {result['anchor']}")
    print(f"wrote {write_json('first_command', result)}")


if __name__ == "__main__":
    main()
