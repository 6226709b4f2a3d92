"""`Surrogate`: a logistic model of the explained model, learned from its own labels (issue 71's replay,
`benchmarks.control_variate`).

Two layers, both logistic models of "the perturbation keeps the input's
label" on which features it keeps:

- across inputs, per label, one weight per feature key (a lower-cased word,
  a predicate), learned by AdaGrad from every sample the model labelled for
  earlier inputs (`Surrogate.learn`);
- per input, that model's score as one feature beside each of the input's
  own features, fitted to this input's labelled samples (the root sample
  first) with a ridge penalty that pulls it toward the first layer
  (`Surrogate.fit`).

Numpy only; it costs no query. It was the engine's proxy proposer until it was measured not to pay, as a
proposer (docs/guide.md) or as a control variate (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from llm_anchors._logistic import ridge_logistic, sigmoid

__all__ = ["Surrogate", "SurrogateFit"]


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
    """The cross-input layer for one label: AdaGrad weights per key, and the bias."""

    weights: dict[str, float] = field(default_factory=dict)
    squares: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0


class Surrogate:
    """Logistic surrogates, one per input, sharing what earlier inputs taught.

    ``L2``: how strongly an input's own fit is pulled toward the shared layer (larger: trust earlier
    inputs more than this input's few samples); ``BIAS_L2`` the same for its bias (smaller: inputs differ
    most in their base rate). ``RATE`` and ``PASSES``: AdaGrad's step and passes over each input's
    samples when the shared layer learns from them; ``BIAS_RATE`` the plain gradient step of the shared
    bias. ``ITERATIONS``: the per-input fit's Newton steps. (The engine's proxy proposer's defaults.)
    """

    L2, BIAS_L2, RATE, BIAS_RATE, PASSES, ITERATIONS = 1.0, 0.1, 0.5, 0.1, 2, 15

    def __init__(self) -> None:
        self._shared: dict[str, _Shared] = {}

    def shared(self, keys: Sequence[str], label: Hashable) -> tuple[np.ndarray, float]:
        """The cross-input weight of each key (0 for a key never seen) and the bias, for ``label``."""
        s = self._shared.get(repr(label))
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
        reg = np.full(len(prior), self.L2)
        reg[-1] = self.BIAS_L2
        theta = ridge_logistic(design, kept.astype(float), prior, reg, self.ITERATIONS)
        return SurrogateFit(w0, b0, float(theta[0]), theta[1:-1], float(theta[-1]))

    def learn(self, keys: Sequence[str], present: np.ndarray, kept: np.ndarray, label: Hashable) -> None:
        """Teach the shared layer of ``label`` this input's labelled samples."""
        if not len(kept) or not len(keys):
            return
        s = self._shared.setdefault(repr(label), _Shared())
        names = sorted(set(keys))
        column = {k: i for i, k in enumerate(names)}
        where = np.array([column[k] for k in keys])
        weights = np.array([s.weights.get(k, 0.0) for k in names])
        squares = np.array([s.squares.get(k, 1e-8) for k in names])
        x, y = present.astype(float), kept.astype(float)
        for _ in range(self.PASSES):
            error = sigmoid(x @ weights[where] + s.bias) - y
            grad = np.bincount(where, weights=x.T @ error / len(y), minlength=len(names))
            squares += grad**2
            weights -= self.RATE * grad / np.sqrt(squares)
            s.bias -= self.BIAS_RATE * float(error.mean())
        for k, i in column.items():
            s.weights[k], s.squares[k] = float(weights[i]), float(squares[i])
