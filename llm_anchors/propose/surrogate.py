"""`Surrogate`: a free proxy of the explained model, learned online from its own labels; its `Proposer`.

Two layers, both logistic models of "the perturbation keeps the input's
label" on which features it keeps:

- across inputs, per label, one weight per feature key (a lower-cased word,
  a predicate), learned by AdaGrad from every sample the model labelled for
  earlier inputs (`Surrogate.learn`);
- per input, that model's score as one feature beside each of the input's
  own features, fitted to this input's labelled samples (the root sample
  first) with a ridge penalty that pulls it toward the first layer
  (`Surrogate.fit`).

Numpy only; it costs no query. Keys let a word teach every later input
that has it; features without keys (superpixels) learn per input only.
`SurrogateProposer` is the surrogate as a proposer of the guided search:
after the empty rule (fitted to this input's samples too), or, ``first``,
before this input's first sample, from the cross-input layer alone (what
the stream has taught about the model), its one rule final when certified.
The cross-input layer is kept across runs by `Surrogate.state` and
`Surrogate.restore`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .._checks import check_int, check_number
from .._logistic import ridge_logistic, sigmoid
from ..samplers.base import Instance, Sampler
from ..search.base import run_sync
from ..search.rules import Rule
from ..search.samples import SampleRequest, Samples
from .base import Guide, Judge, Proposals
from .proxy_search import ProxyParams, proxy_search

__all__ = ["Surrogate", "SurrogateFit", "SurrogateProposer"]


@dataclass(frozen=True)
class SurrogateFit:
    """One input's fitted surrogate: P(label kept) = σ(scale · shared score + present · weights + bias)."""

    shared: np.ndarray
    """Per feature, the cross-input weight of its key."""
    shared_bias: float
    scale: float
    weights: np.ndarray
    bias: float

    def __call__(self, present: np.ndarray) -> np.ndarray:
        x = present.astype(float)
        return sigmoid(self.scale * (x @ self.shared + self.shared_bias) + x @ self.weights + self.bias)


@dataclass
class _Shared:
    """The cross-input layer for one label: AdaGrad weights per key, and the bias; the inputs it learned
    from, and how many of them had an empty anchor."""

    weights: dict[str, float] = field(default_factory=dict)
    squares: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    inputs: int = 0
    empty: int = 0


class Surrogate:
    """Logistic surrogates, one per input, sharing what earlier inputs taught.

    ``l2``: how strongly an input's own fit is pulled toward the shared
    layer (larger: trust earlier inputs more than this input's few
    samples); ``bias_l2`` the same for its bias (smaller: inputs differ most
    in their base rate). ``rate`` and ``passes``: AdaGrad's step and passes
    over each input's samples when the shared layer learns from them;
    ``bias_rate`` the plain gradient step of the shared bias.
    ``iterations``: the per-input fit's Newton steps.
    """

    def __init__(
        self,
        *,
        l2: float = 1.0,
        bias_l2: float = 0.1,
        rate: float = 0.5,
        bias_rate: float = 0.1,
        passes: int = 2,
        iterations: int = 15,
    ) -> None:
        for name, value in (("l2", l2), ("bias_l2", bias_l2), ("rate", rate), ("bias_rate", bias_rate)):
            check_number(name, value)
        check_int("passes", passes)
        check_int("iterations", iterations)
        self.l2, self.bias_l2, self.rate, self.bias_rate = l2, bias_l2, rate, bias_rate
        self.passes, self.iterations = passes, iterations
        self._shared: dict[Hashable, _Shared] = {}

    def shared(self, keys: Sequence[str], label: Hashable) -> tuple[np.ndarray, float]:
        """The cross-input weight of each key (0 for a key never seen) and the bias, for ``label``."""
        s = self._shared.get(_hashable(label))
        if s is None:
            return np.zeros(len(keys)), 0.0
        return np.array([s.weights.get(k, 0.0) for k in keys]), s.bias

    def fit(self, keys: Sequence[str], present: np.ndarray, kept: np.ndarray, label: Hashable) -> SurrogateFit:
        """This input's surrogate, from the samples the model labelled (``kept``: label kept)."""
        w0, b0 = self.shared(keys, label)
        x = present.astype(float)
        design = np.hstack([(x @ w0 + b0)[:, None], x, np.ones((len(x), 1))])
        prior = np.zeros(design.shape[1])
        prior[0] = 1.0
        reg = np.full(len(prior), self.l2)
        reg[-1] = self.bias_l2
        theta = ridge_logistic(design, kept.astype(float), prior, reg, self.iterations)
        return SurrogateFit(w0, b0, float(theta[0]), theta[1:-1], float(theta[-1]))

    def foresees(self, label: Hashable) -> bool:
        """Whether the shared layer of ``label`` may propose before an input's first sample: it learned
        from at least `FORESEE_AFTER` inputs, and fewer than half of them had an empty anchor (where the
        empty rule mostly suffices, a rule tested before it would replace the empty anchor)."""
        s = self._shared.get(_hashable(label))
        return s is not None and s.inputs >= FORESEE_AFTER and 2 * s.empty < s.inputs

    def learn(
        self, keys: Sequence[str], present: np.ndarray, kept: np.ndarray, label: Hashable, *, empty: bool = False
    ) -> None:
        """Teach the shared layer of ``label`` this input's labelled samples (``empty``: its anchor was
        the empty rule)."""
        if not len(kept) or not len(keys):
            return
        s = self._shared.setdefault(_hashable(label), _Shared())
        s.empty += int(empty)
        names = sorted(set(keys))
        column = {k: i for i, k in enumerate(names)}
        where = np.array([column[k] for k in keys])
        weights = np.array([s.weights.get(k, 0.0) for k in names])
        squares = np.array([s.squares.get(k, 1e-8) for k in names])
        x, y = present.astype(float), kept.astype(float)
        for _ in range(self.passes):
            error = sigmoid(x @ weights[where] + s.bias) - y
            grad = np.bincount(where, weights=x.T @ error / len(y), minlength=len(names))
            squares += grad**2
            weights -= self.rate * grad / np.sqrt(squares)
            s.bias -= self.bias_rate * float(error.mean())
        for k, i in column.items():
            s.weights[k], s.squares[k] = float(weights[i]), float(squares[i])
        s.inputs += 1

    def state(self) -> list[dict[str, Any]]:
        """The shared layer, per label, as JSON-ready data (`restore` reads it back)."""
        return [{"label": label, **asdict(s)} for label, s in self._shared.items()]

    def restore(self, state: Sequence[dict[str, Any]]) -> None:
        """Take the shared layer ``state`` holds (from `state`) as this surrogate's."""
        shared = {}
        for raw in state:
            item = dict(raw)
            label = item.pop("label")
            shared[_hashable(tuple(label) if isinstance(label, list) else label)] = _Shared(**item)
        self._shared = shared


FORESEE_AFTER = 3
"""Inputs of a label the shared layer learns from before it proposes for one before its first sample."""


@dataclass
class SurrogateProposer:
    """The surrogate as a `Proposer`: when first asked, fitted to every sample the model labelled so far
    and searched on for free (`proxy_search`, at most ``max_proposals`` rules); then its rules, tested
    like `Proposals`. ``first``: asked before the empty rule, it searches the cross-input layer alone
    (`Surrogate.shared`) for one rule, final when certified, and proposes none when that layer
    predicts the empty rule reaches the threshold. ``keys``: the surrogate's key per feature. What it
    did is its own: ``samples`` (labelled by the fit, free) and ``proposals``."""

    surrogate: Surrogate
    sampler: Sampler
    instance: Instance
    keys: Sequence[str]
    target: Any
    rng: np.random.Generator
    params: ProxyParams
    max_size: int
    max_proposals: int
    name: str = "proxy"
    first: bool = False
    share: float | None = None
    """``first``: the fraction of δ its rule is given (`Certifier.split`): how often its rule was the
    anchor on earlier inputs."""
    samples: int = 0
    proposals: list[Rule] = field(default_factory=list)
    _rules: Proposals | None = field(default=None, init=False, repr=False)

    def propose(self, guide: Guide) -> Judge | None:
        if self._rules is None:
            if self.first:
                self.proposals = self._foreseen()
                self._rules = Proposals(self.name, self.proposals, first=True, final=frozenset(self.proposals),
                                        share=self.share)  # fmt: skip
            else:
                fit = self.surrogate.fit(self.keys, *guide.labelled(), self.target)
                self.proposals = self._search(fit, self.max_proposals)
                self._rules = Proposals(self.name, self.proposals)
        return self._rules.propose(guide)

    def _foreseen(self) -> list[Rule]:
        """The rule the cross-input layer alone predicts (at most one); none when it predicts the empty
        rule reaches the threshold."""
        shared, bias = self.surrogate.shared(self.keys, self.target)
        fit = SurrogateFit(shared, bias, 1.0, np.zeros(len(shared)), 0.0)
        root = self.sampler.sample_present(self.instance, frozenset(), self.params.samples, self.rng)
        self.samples += len(root)
        if float(fit(root).mean()) >= self.params.threshold:
            return []
        return self._search(fit, 1)

    def _search(self, fit: SurrogateFit, most: int) -> list[Rule]:
        """At most ``most`` rules whose precision on ``fit``'s labels reaches the threshold (`proxy_search`)."""

        def answer(requests: list[SampleRequest]) -> list[Samples]:
            drawn = [self.sampler.sample_present(self.instance, r.rule, r.n, self.rng) for r in requests]
            self.samples += sum(r.n for r in requests)
            return [Samples(rows, fit(rows)) for rows in drawn]

        p = self.params
        search = proxy_search(len(self.instance.features), threshold=p.threshold, max_size=self.max_size,
                              max_proposals=most, samples=p.samples, beam=p.beam)  # fmt: skip
        return [found.rule for found in run_sync(search, answer)]


def _hashable(label: Hashable) -> Hashable:
    return label if isinstance(label, str | int | float | bool | tuple) or label is None else repr(label)
