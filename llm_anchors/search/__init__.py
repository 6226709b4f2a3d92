"""The search, pure: rules, KL bounds and LUCB, the certifier, what every search shares, Anchors' beam
search (MAnchors' guided search is `llm_anchors.propose`'s, beside the proposers it asks).

Generators that yield sample requests and receive labels; no I/O, no event loop. The searches choose
rules; the `Certifier` (one per search, one δ per explanation) says which are anchors.
"""

from .bandit import compute_beta, kl_bernoulli, kl_bounds, kl_lower_bound, kl_upper_bound, lucb
from .base import Candidate, RoundTrace, RuleStats, Search, SearchResult, run_sync
from .beam import BeamSearch
from .certify import Certificate, Certifier, Trial, fewest_agreeing, share_of
from .params import SearchParams
from .rules import Rule, covers, make_rule
from .samples import STAGES, SampleRequest, Samples

__all__ = [
    "STAGES",
    "BeamSearch",
    "Candidate",
    "Certificate",
    "Certifier",
    "RoundTrace",
    "Rule",
    "RuleStats",
    "SampleRequest",
    "Samples",
    "Search",
    "SearchParams",
    "SearchResult",
    "Trial",
    "compute_beta",
    "covers",
    "fewest_agreeing",
    "kl_bernoulli",
    "kl_bounds",
    "kl_lower_bound",
    "kl_upper_bound",
    "lucb",
    "make_rule",
    "run_sync",
    "share_of",
]
