"""A model server this process starts on loopback and stops: llama-server or vLLM.

`LocalServer` holds what both share: a free port, a log file, a health
check, a clean shutdown (SIGTERM, then SIGKILL), and Linux's promise that
the server dies with its parent. A subclass says how to find what it runs
(`prepare`), its command line (`command`) and its health URL.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from .. import LLMAnchorsError

__all__ = ["LocalServer", "LocalServerError", "cache_dir", "free_port", "main", "serve_in_foreground"]


class LocalServerError(LLMAnchorsError):
    """A local model server could not be found, started or stopped."""


def cache_dir() -> Path:
    """Where builds, venvs and converted models are kept, once per machine (``$LLM_ANCHORS_CACHE``)."""
    return Path(os.environ.get("LLM_ANCHORS_CACHE", Path.home() / ".cache" / "llm-anchors"))


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when its parent dies,
    so a killed Python process never leaves a server behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc; none elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


class LocalServer:
    """A server process on ``host``:``port`` (a free port when None), healthy within ``startup_timeout``."""

    name = "server"
    error: type[LocalServerError] = LocalServerError

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, startup_timeout: float = 120.0) -> None:
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://{self.host}:{self.port}/health"

    def prepare(self) -> None:
        """Find what the server runs (binary, model); raise `LocalServerError` when it is missing."""

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> Mapping[str, str]:
        return os.environ

    def start(self) -> str:
        """Start the server and wait until it is healthy; returns the base URL."""
        if self._process is not None:
            return self.base_url
        self.prepare()
        self.port = self.port or free_port(self.host)
        fd, log = tempfile.mkstemp(prefix=f"{self.name}-", suffix=".log")
        self.log_path = Path(log)
        with os.fdopen(fd, "wb") as sink:
            self._process = subprocess.Popen(
                self.command(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=dict(self.environment()),
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise self.error(f"{self.name} exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.health_url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise self.error(f"{self.name} not healthy after {self.startup_timeout:.0f}s:\n{self.log_tail()}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def rss_mb(self) -> float:
        """The server process's resident memory now, in MB (NaN when not running or unreadable)."""
        if self._process is None:
            return math.nan
        try:
            for line in Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return math.nan

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds; then any process it
        started that outlived it (vLLM's engine) is killed too."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        children = _children(process.pid)
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve_in_foreground(server: LocalServer) -> None:
    """Start ``server``, print its base URL and keep it until SIGTERM or Ctrl-C, which stop it too."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the server must not be orphaned
    with server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


def main(
    argv: Sequence[str] | None,
    module: str,
    prepare: tuple[str, Callable[[bool], Sequence[object]]],
    server: Callable[[int | None], LocalServer],
) -> int:
    """A local server's command line: ``python -m MODULE WORD [--force]`` prepares it once per machine
    (``prepare`` is the word and what it runs; it prints what it made), ``serve [PORT]`` serves it in
    the foreground. Exit 2 with the reason when it cannot."""
    args = list(sys.argv[1:] if argv is None else argv)
    word, run = prepare
    try:
        if args[:1] == [word]:
            for made in run("--force" in args):
                print(made)
            return 0
        if args[:1] == ["serve"]:
            serve_in_foreground(server(int(args[1]) if len(args) > 1 else None))
    except LLMAnchorsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    print(f"usage: python -m {module} {word} [--force] | serve [PORT]", file=sys.stderr)
    return 2
