"""MAnchors' guided search (`GuidedSearch`) and what suggests the rules it tests; only its certifier certifies.

Siblings behind the `Proposer` protocol, each with its settings frozen and recorded whole:
growth (`Growth`, `GrowthParams`: the search's own), the memory (`MemoryProposer`, `MemoryParams`: it
looks an input up, proposes `recalled` rules as `Proposals`, remembers), the surrogate
(`SurrogateProposer`) and a classifier named as proxy (`Proxy`, on an engine of its own;
`ProxyParams`). A proposer's record on a stream (`ProposerRecord`, `RecordParams`) says whether to
ask it; what each did for an input is `MemoryUse` and `ProxyUse`.
"""

from .base import Draw, Guide, Judge, Proposals, Proposer, Step
from .growth import Growth, GrowthParams, credit
from .guided import GuidedParams, GuidedSearch
from .memory import MemoryParams, MemoryProposer, MemoryRules, near, recalled
from .proxy_search import ProxyParams, ProxyProposal, proxy_search
from .record import ProposerRecord, RecordParams
from .surrogate import Surrogate, SurrogateFit, SurrogateProposer
from .use import MemoryUse, ProxyUse

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
    "ProxyParams",
    "ProxyProposal",
    "ProxyUse",
    "RecordParams",
    "Step",
    "Surrogate",
    "SurrogateFit",
    "SurrogateProposer",
    "credit",
    "near",
    "proxy_search",
    "recalled",
]
