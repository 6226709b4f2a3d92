"""The proxy of MAnchors' guided strategy: it searches for free, the model only certifies.

A `Proxy` ranks rules on labels that cost the explained model nothing, and
hands `GuidedSearch` the best few as proposals; the model tests each on
samples of its own (a cheap probe, then Anchors' verification) and
nothing the proxy labelled ever counts toward an anchor. Two kinds:

- ``"surrogate"`` (`Surrogate`, proposing as a `SurrogateProposer`): a
  logistic model learned from the explained model's own labels, on this
  input's samples already labelled (the root sample) and, as a prior, on
  every earlier input;
- a `Classifier` the user names (a small local or hosted model for a large
  one, a distilled scikit-learn model): its labels of perturbations are
  compared with the explained model's label of the input, and its rules are
  `Proposals`. Its calls go through an engine of its own (own cache),
  reserve against the explainer's budget (a cap is on all spend) and are
  reported apart, in ``meta.proxy``.

Trust follows the record: the share of earlier inputs whose anchor was one
of the proxy's proposals (from a prior, `ProxyParams`) sets how many it may
propose (at least one). The surrogate learns from the inputs in the order
this explainer explains them (on Ray, each worker's from its own).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._exceptions import BudgetExceeded
from ..models.classifier import Classifier, as_classifier
from ..money.budget import SpendCap
from ..query.cost import Cost
from ..query.engine import QueryEngine, QueryStats
from ..samplers.base import Instance, Sampler, draw
from ..search.base import SampleRequest, Samples, SearchResult
from ..search.drive import drive
from ..search.rules import Rule
from .search import ProxyParams, ProxyProposal, proxy_search
from .surrogate import Surrogate, SurrogateProposer
from .use import ProxyUse

__all__ = ["Proxy", "ProxyRun"]

Search = Generator[list[SampleRequest], list[Samples], list[ProxyProposal]]


@dataclass
class ProxyRun:
    """The proxy's part of one explanation: its samples, a proxy classifier's calls, its proposals."""

    samples: int = 0
    stats: QueryStats = field(default_factory=QueryStats)
    proposals: list[Rule] = field(default_factory=list)
    refused: BudgetExceeded | None = None
    """What a cap said when it refused one of the proxy classifier's calls (its search ended there)."""


class Proxy:
    """Searches on free labels and proposes rules for the explained model to certify.

    ``proxy``: "surrogate" or a `Classifier`; ``params``: `ProxyParams`.
    """

    def __init__(self, proxy: Any, params: ProxyParams | None = None, *, max_concurrency: int = 8) -> None:
        self.params = params or ProxyParams()
        p = self.params
        self.surrogate = Surrogate(
            l2=p.surrogate_l2, bias_l2=p.surrogate_bias_l2, rate=p.surrogate_rate, bias_rate=p.surrogate_bias_rate,
            passes=p.surrogate_passes, iterations=p.surrogate_iterations,
        )  # fmt: skip
        self.classifier: Classifier | None = None if isinstance(proxy, str) else as_classifier(proxy)
        self.kind = "surrogate" if self.classifier is None else self.classifier.identity
        self.engine = QueryEngine(self.classifier, max_concurrency=max_concurrency) if self.classifier else None
        self.tried = 0
        self.certified = 0

    @property
    def trust(self) -> float:
        """Of the earlier inputs where the proxy proposed a rule or an anchor was found, the share whose
        anchor the proxy had proposed (from ``trust_prior``, worth ``trust_weight`` inputs; an empty
        anchor counts against it)."""
        p = self.params
        return (self.certified + p.trust_prior * p.trust_weight) / (self.tried + p.trust_weight)

    def allowance(self) -> int:
        """How many rules the proxy may propose now: ``params.proposals`` scaled by trust, at least 1."""
        return max(1, math.ceil(self.params.proposals * self.trust))

    def search(self, n_features: int, max_size: int) -> Search:
        p = self.params
        return proxy_search(
            n_features, threshold=p.threshold, max_size=max_size, max_proposals=self.allowance(), samples=p.samples,
            beam=p.beam,
        )  # fmt: skip

    async def by_classifier(
        self, sampler: Sampler, instance: Instance, target: Any, rng: np.random.Generator, max_size: int, *,
        budget: SpendCap | None, cap: SpendCap | None,
    ) -> ProxyRun:  # fmt: skip
        """The proxy classifier's search, before the model samples anything: its run, whose ``proposals``
        the guided search tests. Its calls reserve against this explanation's ``cap``, else the
        explainer's ``budget``; a call refused ends its search without proposals (``refused``)."""
        engine = self.engine
        assert engine is not None
        run = ProxyRun(stats=QueryStats(budget=cap if cap is not None else budget))

        async def answer(requests: list[SampleRequest]) -> list[Samples]:
            drawn = await draw(sampler, instance, requests, rng)
            labels = await engine.classify([t for batch, _ in drawn for t in batch], run.stats)
            kept = iter([label == target for label in labels])
            run.samples += len(labels)
            return [Samples(present, np.fromiter(kept, bool, len(batch))) for batch, present in drawn]

        try:
            run.proposals = [p.rule for p in await drive(self.search(len(instance.features), max_size), answer)]
        except BudgetExceeded as refused:
            run.refused = refused
        return run

    def surrogate_proposer(
        self, sampler: Sampler, instance: Instance, keys: Sequence[str], target: Any, rng: np.random.Generator,
        max_size: int,
    ) -> SurrogateProposer:  # fmt: skip
        """The surrogate as the guided search's proposer for this input (its rules: `SurrogateProposer`)."""
        return SurrogateProposer(self.surrogate, sampler, instance, _keys(keys, len(instance.features)), target, rng,
                                 self.params, max_size, self.allowance())  # fmt: skip

    def learn(
        self, run: ProxyRun, instance: Instance, keys: Sequence[str], labelled: tuple[np.ndarray, np.ndarray],
        target: Any, result: SearchResult,
    ) -> ProxyUse:  # fmt: skip
        """Record the outcome (trust) and teach the surrogate this input's samples; the meta entry."""
        certified = result.success and result.rule in run.proposals
        if run.proposals or result.success:
            self.tried += 1
            self.certified += int(certified)
        if self.classifier is None and keys:
            self.surrogate.learn(_keys(keys, len(instance.features)), *labelled, target)
        s = run.stats
        cost = Cost.of(s) if self.classifier else None
        return ProxyUse(
            kind=self.kind,
            samples=run.samples,
            queries=s.queries,
            cost=cost,
            proposals=tuple(tuple(instance.features[p] for p in sorted(rule)) for rule in run.proposals),
            certified=certified,
            trust=self.trust,
        )


def _keys(keys: Sequence[str], n_features: int) -> list[str]:
    """The surrogate's key per feature: the features' own (words, predicates), or none to share."""
    return list(keys) if len(keys) == n_features else [f"\x00{i}" for i in range(n_features)]
