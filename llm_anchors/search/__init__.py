"""The search, pure: rules, KL bounds and LUCB, Anchors' beam search, MAnchors' guided search, the proxy's.

Generators that yield sample requests and receive labels; no I/O, no event loop.
"""

from .bandit import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb
from .beam import BeamSearch, RoundTrace, RuleStats, SampleRequest, Samples, SearchParams, SearchResult
from .guided import GuidedSearch
from .proxy import ProxyProposal, proxy_search
from .rules import Rule, covers, make_rule

__all__ = [
    "BeamSearch",
    "GuidedSearch",
    "ProxyProposal",
    "RoundTrace",
    "Rule",
    "RuleStats",
    "SampleRequest",
    "Samples",
    "SearchParams",
    "SearchResult",
    "compute_beta",
    "covers",
    "kl_bernoulli",
    "kl_lower_bound",
    "kl_upper_bound",
    "lucb",
    "make_rule",
    "proxy_search",
]
