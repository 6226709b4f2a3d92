"""MAnchors' guided search (`GuidedSearch`) and what suggests the rules it tests; only its certifier certifies.

Siblings behind the `Proposer` protocol, each with its settings frozen and recorded whole:
growth (`Growth`, `GrowthParams`: the search's own), the memory (`recalled` rules as `Proposals`, its
settings `MemorySettings`), the surrogate (`SurrogateProposer`) and a classifier named as proxy
(`llm_anchors.propose.proxy.Proxy`, exported by `llm_anchors.explain`: it runs on the explainer's
engine; `ProxyParams`). A proposer's record on a stream (`ProposerRecord`) says whether to ask it.
"""

from .base import Draw, Guide, Judge, Proposals, Proposer, Step
from .growth import Growth, GrowthParams, credit
from .guided import GuidedParams, GuidedSearch
from .memory import MemoryRules, near, recalled
from .record import ProposerRecord, RecordSettings
from .search import ProxyParams, ProxyProposal, proxy_search
from .surrogate import Surrogate, SurrogateFit, SurrogateProposer

__all__ = [
    "Draw",
    "Growth",
    "GrowthParams",
    "Guide",
    "Judge",
    "GuidedParams",
    "GuidedSearch",
    "MemoryRules",
    "Proposals",
    "Proposer",
    "ProposerRecord",
    "ProxyParams",
    "ProxyProposal",
    "RecordSettings",
    "Step",
    "Surrogate",
    "SurrogateFit",
    "SurrogateProposer",
    "credit",
    "near",
    "proxy_search",
    "recalled",
]
