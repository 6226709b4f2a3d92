"""The proxy's search: rank rules on a free proxy, for the explained model to certify.

`proxy_search` is a generator like `BeamSearch.run` (it yields
`SampleRequest` lists and is sent `Samples` back), but its samples are
labelled by a proxy, not by the explained model, so it may draw as many as
it likes: every candidate of every round gets ``samples`` of its own. The
labels it is sent may be probabilities (a surrogate's) as well as 0/1. It
returns the rules whose precision on the proxy reaches ``threshold``,
shortest first and, within a length, most precise first. Nothing it
returns is an anchor: the model certifies them on samples of its own
(`GuidedSearch`), never on these.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from .base import SampleRequest, Samples
from .rules import Rule

__all__ = ["ProxyProposal", "proxy_search"]


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
