"""MAnchors' guided search (`GuidedSearch`) and what suggests the rules it tests; only its certifier certifies.

Siblings behind the `Proposer` protocol, each with its settings frozen and recorded whole:
growth (`Growth`, `GrowthParams`: the search's own), the memory (`MemoryProposer`, `MemoryParams`: it
looks an input up, proposes `recalled` rules as `Proposals`, remembers; what it did for an input is
`MemoryUse`) and a user's own. A proposer's record on a stream (`ProposerRecord`, `RecordParams`) says
whether to ask it.
"""

from .base import Draw, Guide, Judge, Proposals, Proposer, Step
from .growth import Growth, GrowthParams, credit
from .guided import GuidedParams, GuidedSearch
from .memory import MemoryParams, MemoryProposer, MemoryRules, MemoryUse, near, recalled
from .record import ProposerRecord, RecordParams

__all__ = [
    "Draw",
    "Growth",
    "GrowthParams",
    "Guide",
    "Judge",
    "GuidedParams",
    "GuidedSearch",
    "MemoryParams",
    "MemoryProposer",
    "MemoryRules",
    "MemoryUse",
    "Proposals",
    "Proposer",
    "ProposerRecord",
    "RecordParams",
    "Step",
    "credit",
    "near",
    "recalled",
]
