"""One explanation run across processes and machines, on Ray (``pip install 'llm-anchors[ray]'``).

>>> from llm_anchors.distributed import RayPool, explain_distributed
>>> async for exp in explain_distributed(texts, make_explainer, workers=4, max_queries=100_000):
...     print(exp)

Every worker runs ``make_explainer()``; they share one budget (a ledger
actor: the cap holds for the whole run) and, for MAnchors, one memory.
"""

from .ledger import LedgerView
from .memory import ActorMemory, ReplicaMemory
from .pool import PoolStats, RayPool
from .run import explain_distributed, explain_resumable_on_ray

__all__ = [
    "ActorMemory", "LedgerView", "RayPool", "ReplicaMemory", "PoolStats", "explain_distributed",
    "explain_resumable_on_ray",
]  # fmt: skip
