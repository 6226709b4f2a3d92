"""The proxy's search: rank rules on a free proxy, for the explained model to certify.

`proxy_search` is a generator like `BeamSearch.run` (it yields
`SampleRequest` lists and is sent `Samples` back), but its samples are
labelled by a proxy, not by the explained model, so it may draw as many as
it likes: every candidate of every round gets ``samples`` of its own. The
labels it is sent may be probabilities (a surrogate's) as well as 0/1. It
returns the rules whose precision on the proxy reaches ``threshold``,
shortest first and, within a length, most precise first. Nothing it
returns is an anchor: the model certifies them on samples of its own
(`GuidedSearch`), never on these. Its settings, and the proxy's, are `ProxyParams`.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

from .._checks import check_int, check_number
from .._exceptions import ConfigError
from ..search.rules import Rule
from ..search.samples import SampleRequest, Samples
from .record import RecordParams

__all__ = ["ProxyParams", "ProxyProposal", "proxy_search"]


@dataclass(frozen=True)
class ProxyParams:
    """The proxy's settings, recorded whole in each explanation.

    samples: the proxy's samples per candidate rule; beam: rules of one length extended; proposals: most
    rules proposed per input (fewer while trust is low); trust_prior, trust_weight: the trust the proxy
    starts with, and how many inputs that prior counts as (trust: the share of inputs whose anchor it
    proposed, ``(certified + trust_prior · trust_weight) / (tried + trust_weight)``); threshold: the
    precision on the proxy a rule needs to be proposed; surrogate_l2, surrogate_bias_l2, surrogate_rate,
    surrogate_bias_rate, surrogate_passes, surrogate_iterations: the surrogate's (`Surrogate`); first: the
    surrogate proposes before each input's first sample, from what earlier inputs taught it alone, one
    rule final when certified (`SurrogateProposer`), on the inputs its record asks it for; record: how
    that record decides (`RecordParams`).
    """

    samples: int = 200
    beam: int = 3
    proposals: int = 3
    trust_prior: float = 0.5
    trust_weight: float = 2.0
    threshold: float = 0.9
    surrogate_l2: float = 1.0
    surrogate_bias_l2: float = 0.1
    surrogate_rate: float = 0.5
    surrogate_bias_rate: float = 0.1
    surrogate_passes: int = 2
    surrogate_iterations: int = 15
    first: bool = False
    record: RecordParams = field(default_factory=RecordParams)

    def __post_init__(self) -> None:
        if not isinstance(self.first, bool):
            raise ConfigError(f"first must be True or False, got {self.first!r}")
        if not isinstance(self.record, RecordParams):
            raise ConfigError(f"record must be a RecordParams, got {type(self.record).__name__}")
        for name in ("samples", "beam", "proposals", "surrogate_passes", "surrogate_iterations"):
            check_int(name, getattr(self, name))
        check_number("threshold", self.threshold, high=1.0, open_high=False)
        check_number("trust_prior", self.trust_prior, high=1.0, open_low=False, open_high=False)
        check_number("trust_weight", self.trust_weight, high=math.inf)
        for name in ("surrogate_l2", "surrogate_bias_l2", "surrogate_rate", "surrogate_bias_rate"):
            check_number(name, getattr(self, name))


@dataclass(frozen=True)
class ProxyProposal:
    """A rule the proxy proposes, with its precision on the proxy's samples."""

    rule: Rule
    precision: float


def proxy_search(
    n_features: int,
    *,
    threshold: float,
    max_size: int,
    max_proposals: int = 3,
    samples: int = 200,
    beam: int = 3,
) -> Generator[list[SampleRequest], list[Samples], list[ProxyProposal]]:
    """Beam search on the proxy: every extension of the ``beam`` best rules of the last length is
    sampled ``samples`` times; rules whose proxy precision reaches ``threshold`` are proposals and
    are not extended. Stops at ``max_proposals`` proposals or ``max_size`` features."""
    found: list[ProxyProposal] = []
    frontier: list[Rule] = [frozenset()]
    for _ in range(min(max_size, n_features)):
        cands = sorted({r | {f} for r in frontier for f in range(n_features) if f not in r}, key=sorted)
        if not cands:
            break
        answers = yield [SampleRequest(rule, samples, "proxy-search") for rule in cands]
        scored = sorted(
            ((float(got.labels.mean()), rule) for rule, got in zip(cands, answers, strict=True)),
            key=lambda pair: (-pair[0], sorted(pair[1])),
        )
        found += [ProxyProposal(rule, p) for p, rule in scored if p >= threshold]
        if len(found) >= max_proposals:
            break
        frontier = [rule for p, rule in scored if p < threshold][:beam]
        if not frontier:
            break
    return found[:max_proposals]
