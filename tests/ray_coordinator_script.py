"""A Ray run's coordinator that waits to be killed: ``python ray_coordinator_script.py``.

It starts its own Ray runtime with one worker, prints the pid of the raylet it started, then sleeps.
"""

import asyncio
import os

from llm_anchors import AnchorsExplainer, FunctionClassifier
from llm_anchors.distributed import RayPool


def make() -> AnchorsExplainer:
    return AnchorsExplainer(FunctionClassifier(lambda texts: [0] * len(texts), name="zero"), seed=0)


async def main() -> None:
    async with RayPool(make, workers=1, ray_init={"num_cpus": 1}):
        raylets = [p for p in os.listdir("/proc") if p.isdigit() and _is_raylet_child(p)]
        print(" ".join(raylets), flush=True)
        await asyncio.sleep(300)


def _is_raylet_child(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return False
    return (
        stat[stat.index("(") + 1 : stat.rindex(")")] == "raylet"
        and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
    )


if __name__ == "__main__":
    asyncio.run(main())
