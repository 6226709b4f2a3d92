"""A watchdog for a Ray runtime started by a run's coordinator.

Killed, the coordinator takes Ray's head (GCS, raylet) down with it, but not
Ray's agents and workers: they spend a minute reporting the raylet's death
to the dead head before they end (measured: 61–63 s on Ray 2.x). The
watchdog, a small process of its own, reads a pipe from the coordinator;
when the pipe closes (the coordinator ended, however) it ends every process
started under the coordinator's raylet.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["watch_ray"]

_WATCHDOG = """
import os, signal, sys
sys.stdin.buffer.read()  # returns when the coordinator's end of the pipe closes: it ended, or was killed
marks = [b"RAY_RAYLET_PID=" + pid.encode() for pid in sys.argv[1:]]
for entry in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{entry}/environ", "rb") as handle:
            if set(marks) & set(handle.read().split(b"\\0")):
                os.kill(int(entry), signal.SIGKILL)
    except OSError:
        pass
"""


def watch_ray() -> subprocess.Popen[bytes] | None:
    """A process that outlives this one to stop the Ray runtime it started: killed, this process
    takes down Ray's head with it, but not its agents and workers, which wait a minute (a 60 s
    report to the dead head) before they end. The watchdog ends them when this process is gone."""
    raylets = [pid for pid, name in _children() if name == "raylet"]
    if not raylets or not Path("/proc").is_dir():
        return None
    command = [sys.executable, "-c", _WATCHDOG, *map(str, raylets)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)


def _children() -> list[tuple[int, str]]:
    """This process's children: (pid, command name), read from /proc (Linux)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")) if Path("/proc").is_dir() else ():
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[1]) == os.getpid():
            found.append((int(entry), name))
    return found
