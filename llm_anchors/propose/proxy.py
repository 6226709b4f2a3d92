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

With ``ProxyParams.first`` the surrogate proposes before an input's first
sample, from what earlier inputs taught it alone (a memory of the model);
whether it is asked is its record's (`ProposerRecord`: a seeded control arm
of the inputs it could have been asked for). Its shared layer and record are
saved beside the memory (`Proxy.save`, `Proxy.load`), for the same model and
perturbation only.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._exceptions import BudgetExceeded, ConfigError
from ..memory.store import DamagedMemoryError
from ..models.classifier import Classifier, as_classifier
from ..money.budget import SpendCap
from ..query.cost import Cost
from ..query.engine import QueryEngine, QueryStats
from ..samplers.base import Instance, Sampler, draw
from ..search.base import SearchResult
from ..search.drive import drive
from ..search.rules import Rule
from ..search.samples import SampleRequest, Samples
from .proxy_search import ProxyParams, ProxyProposal, proxy_search
from .record import ProposerRecord
from .surrogate import Surrogate, SurrogateProposer
from .use import ProxyUse

__all__ = ["Proxy", "ProxyRun"]

SAVED = "surrogate.json"
"""The file, in a memory's directory, that keeps the surrogate's shared layer and record."""

ProxyRounds = Generator[list[SampleRequest], list[Samples], list[ProxyProposal]]
"""The proxy's free search, as a generator of rounds (`proxy_search`)."""


@dataclass
class ProxyRun:
    """The proxy's part of one explanation: its samples, a proxy classifier's calls, its proposals."""

    samples: int = 0
    stats: QueryStats = field(default_factory=QueryStats)
    proposals: list[Rule] = field(default_factory=list)
    refused: BudgetExceeded | None = None
    """What a cap said when it refused one of the proxy classifier's calls (its search ended there)."""
    asked: bool | None = None
    """``first``: whether its record asked the surrogate before the input's first sample (None: it could
    not be asked: too few earlier inputs of the label, or mostly empty anchors)."""


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
        self.record = ProposerRecord()
        """``first``: the record of the surrogate asked before an input's first sample, against growth alone."""
        self.foreseen = 0
        """``first``: the inputs it was asked for and proposed a rule for (``record.certified`` of them
        had it as their anchor)."""

    @property
    def first_share(self) -> float:
        """The fraction of δ the surrogate's rule, proposed before the first sample, is given: how often
        such a rule was the anchor so far (Laplace's rule), within [0.05, 0.95]."""
        return min(max((self.record.certified + 1) / (self.foreseen + 2), 0.05), 0.95)

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

    def search(self, n_features: int, max_size: int) -> ProxyRounds:
        p = self.params
        return proxy_search(
            n_features, threshold=p.threshold, max_size=max_size, max_proposals=self.allowance(), samples=p.samples,
            beam=p.beam,
        )  # fmt: skip

    async def by_classifier(
        self, sampler: Sampler, instance: Instance, target: Any, rng: np.random.Generator, max_size: int, *,
        cap: SpendCap | None,
    ) -> ProxyRun:  # fmt: skip
        """The proxy classifier's search, before the model samples anything: its run, whose ``proposals``
        the guided search tests. Its calls reserve against this explanation's ``cap``; a call refused
        ends its search without proposals (``refused``)."""
        engine = self.engine
        assert engine is not None
        run = ProxyRun()

        async def answer(requests: list[SampleRequest]) -> list[Samples]:
            drawn = await draw(sampler, instance, requests, rng)
            labels = await engine.classify([t for batch, _ in drawn for t in batch], run.stats, cap=cap)
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
        max_size: int, seed: int,
    ) -> tuple[SurrogateProposer | None, bool | None]:  # fmt: skip
        """The surrogate as the guided search's proposer for this input (its rules: `SurrogateProposer`),
        and, ``first``, whether its record asked it (None: it could not be; False: the control arm, no
        proposer)."""
        first = self.params.first
        asked = None
        if first and self.surrogate.foresees(target):
            asked = self.record.ask(self.params.record, seed, str(instance.query))
        if first and not asked:
            return None, asked
        made = SurrogateProposer(self.surrogate, sampler, instance, _keys(keys, len(instance.features)), target, rng,
                                 self.params, max_size, self.allowance(), first=first,
                                 share=self.first_share if first else None)  # fmt: skip
        return made, asked

    def learn(
        self, run: ProxyRun, instance: Instance, keys: Sequence[str], labelled: tuple[np.ndarray, np.ndarray],
        target: Any, result: SearchResult, queries: int,
    ) -> ProxyUse:  # fmt: skip
        """Record the outcome (trust; ``first``, the record with the input's paid ``queries``) and teach
        the surrogate this input's samples; the meta entry."""
        certified = result.success and result.rule in run.proposals
        if run.proposals or result.success:
            self.tried += 1
            self.certified += int(certified)
        if run.asked is not None:
            self.record.add(run.asked, queries, certified)
            self.foreseen += int(run.asked and bool(run.proposals))
        if self.classifier is None and keys:
            empty = result.success and not result.rule
            self.surrogate.learn(_keys(keys, len(instance.features)), *labelled, target, empty=empty)
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
            asked=run.asked,
        )

    def save(self, directory: str | os.PathLike[str], scope: str) -> None:
        """Write the surrogate's shared layer and record to ``directory`` (atomically), for ``scope``: the
        model and perturbation it learned. A write that fails (a full disk) is a `ConfigError`, and the
        file saved before stays as it was."""
        root = Path(directory)
        saved = {"scope": scope, "shared": self.surrogate.state(), "record": asdict(self.record),
                 "trust": [self.tried, self.certified], "foreseen": self.foreseen}  # fmt: skip
        temporary = root / f"{SAVED}.tmp"
        try:
            root.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(saved))
            os.replace(temporary, root / SAVED)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise ConfigError(
                f"cannot save the surrogate to {root / SAVED}: {exc}; the file saved before is kept"
            ) from exc

    def load(self, directory: str | os.PathLike[str], scope: str) -> bool:
        """Take the shared layer and record saved in ``directory`` (whether there were any); a
        `ConfigError` when they were learned for another scope, `DamagedMemoryError` when unreadable."""
        path = Path(directory) / SAVED
        if not path.exists():
            return False
        try:
            saved = json.loads(path.read_text())
            if saved["scope"] != scope:
                raise ConfigError(f"{path} was learned for another model: {saved['scope']!r}, not {scope!r}")
            self.surrogate.restore(saved["shared"])
            self.record = ProposerRecord(**saved["record"])
            self.tried, self.certified = (int(n) for n in saved["trust"])
            self.foreseen = int(saved["foreseen"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedMemoryError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from exc
        return True


def _keys(keys: Sequence[str], n_features: int) -> list[str]:
    """The surrogate's key per feature: the features' own (words, predicates), or none to share."""
    return list(keys) if len(keys) == n_features else [f"\x00{i}" for i in range(n_features)]
