"""What a light install costs and runs: a fresh venv with ``pip install "llm-anchors[openai]"``.

    python -m benchmarks.light_install --inputs 20

Creates a venv in a temporary folder, installs this checkout with the ``openai`` extra (as a new user
would from its wheel), and reports its size, the install's wall time and whether torch came with it.
Then, with that venv's ``llm-anchors``, runs ``run`` on ``--inputs`` inputs (half of them exact repeats
of the other half) against a loopback OpenAI-shaped server (the tests' fault server, answering by
keywords), the memory on as by default: every input must be explained, and every repeat at no query.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fault_server import FaultServer

from ._common import write_json

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Review: {text}\nSentiment:"


def _answer(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def install(venv: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    started = time.perf_counter()
    subprocess.run([*pip, "--upgrade", "pip"], check=True, capture_output=True)
    done = subprocess.run([*pip, f"{ROOT}[openai]"], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pip install failed:\n{done.stderr[-3000:]}")
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    names = sorted(p["name"].lower() for p in json.loads(listed.stdout))
    return {"install_s": seconds, "size_mb": _size_mb(venv), "packages": len(names),
            "torch": "torch" in names, "sentence_transformers": "sentence-transformers" in names}  # fmt: skip


async def run_with_memory(venv: Path, folder: Path, inputs: int) -> dict[str, Any]:
    half = [f"a good and great film number {i} with a fine plot" for i in range(inputs // 4)]
    half += [f"a dull film number {i} with a weak plot" for i in range(inputs // 2 - len(half))]
    texts = half + half  # the second half repeats the first exactly
    source, out = folder / "in.txt", folder / "out.jsonl"
    source.write_text("".join(t + "\n" for t in texts))
    async with FaultServer(answer=_answer) as server:
        command = [str(venv / "bin" / "llm-anchors"), "run", str(source), "--out", str(out), "--base-url",
                   server.base_url, "--model", "m", "--prompt", PROMPT, "--free"]  # fmt: skip
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(*command, stderr=asyncio.subprocess.PIPE)
        _, err = await process.communicate()
        seconds = time.perf_counter() - started
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]] if out.exists() else []
    explained = [r for r in lines if "explanation" in r]
    repeats = [r for r in explained if r["index"] >= len(half)]
    return {
        "code": process.returncode, "wall_s": seconds, "inputs": len(texts), "explained": len(explained),
        "memory_hits": sum(bool(r["explanation"]["meta"]["memory_hit"]) for r in explained),
        "repeat_queries": [r["explanation"]["meta"]["queries"] for r in repeats],
        "said": err.decode().strip().splitlines()[-1:],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="light-install-"))
    try:
        installed = install(folder / "venv")
        ran = asyncio.run(run_with_memory(folder / "venv", folder, args.inputs))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = {"install": installed, "run": ran}
    print('### pip install "llm-anchors[openai]" in a fresh venv, then `run` with the memory on\n')
    print("| install (s) | venv (MB) | packages | torch | run: explained | memory hits | repeats' queries |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | --- |")
    print(f"| {installed['install_s']:.0f} | {installed['size_mb']:.0f} | {installed['packages']} | "
          f"{'yes' if installed['torch'] else 'no'} | {ran['explained']}/{ran['inputs']} | {ran['memory_hits']} | "
          f"{sum(ran['repeat_queries'])} in all |")  # fmt: skip
    print(f"\nwrote {write_json('light_install', result)}")


if __name__ == "__main__":
    main()
