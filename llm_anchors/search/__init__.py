"""The search, pure: rules, KL bounds and LUCB, the certifier, Anchors' beam search, MAnchors' guided
search, the proxy's.

Generators that yield sample requests and receive labels; no I/O, no event loop. The searches choose
rules; the `Certifier` (one per search, one δ per explanation) says which are anchors.
"""

from .bandit import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb
from .base import STAGES, RoundTrace, RuleStats, SampleRequest, Samples, Search, SearchResult, kl_bounds, run_sync
from .beam import BeamSearch
from .certify import Certificate, Certifier, share_of
from .guided import GuidedParams, GuidedSearch, credit
from .params import SearchParams
from .proxy import ProxyParams, ProxyProposal, proxy_search
from .rules import Rule, covers, make_rule

__all__ = [
    "STAGES",
    "BeamSearch",
    "Certificate",
    "Certifier",
    "GuidedParams",
    "GuidedSearch",
    "ProxyParams",
    "ProxyProposal",
    "RoundTrace",
    "Rule",
    "RuleStats",
    "SampleRequest",
    "Samples",
    "Search",
    "SearchParams",
    "SearchResult",
    "compute_beta",
    "covers",
    "credit",
    "kl_bernoulli",
    "kl_bounds",
    "kl_lower_bound",
    "kl_upper_bound",
    "lucb",
    "make_rule",
    "proxy_search",
    "run_sync",
    "share_of",
]
