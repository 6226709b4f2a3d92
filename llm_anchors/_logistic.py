"""Ridge-penalised logistic regression, fitted by Newton's method (numpy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["newton_step", "ridge_logistic", "sigmoid"]


def ridge_logistic(x: np.ndarray, y: np.ndarray, prior: np.ndarray, reg: np.ndarray, iterations: int) -> np.ndarray:
    """The θ minimising logistic loss of ``y`` (0/1 or probabilities) on ``x`` + ½ Σ reg (θ − prior)², by
    Newton steps halved until the loss does not grow (a full step from a saturated start overshoots)."""
    theta = prior.astype(float).copy()
    scores = x @ theta
    loss = _loss(scores, y, reg * (theta - prior) ** 2)
    for _ in range(iterations):
        p = sigmoid(scores)
        grad = x.T @ (p - y) + reg * (theta - prior)
        step = newton_step(x, p * (1 - p), reg + 1e-6, grad)
        for _ in range(30):
            tried = theta - step
            tried_scores = x @ tried
            tried_loss = _loss(tried_scores, y, reg * (tried - prior) ** 2)
            if tried_loss <= loss + 1e-12 * abs(loss):
                break
            step = step / 2
        theta, scores, loss = tried, tried_scores, tried_loss
        if np.abs(step).max() < 1e-6:
            break
    return theta


def _loss(scores: np.ndarray, y: np.ndarray, penalty: np.ndarray) -> float:
    """The logistic loss of ``y`` at ``scores``, plus half the ``penalty`` terms."""
    return float(np.sum(np.logaddexp(0.0, scores) - y * scores) + 0.5 * np.sum(penalty))


def newton_step(x: np.ndarray, weights: np.ndarray, diagonal: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """(xᵀ diag(weights) x + diag(diagonal))⁻¹ grad. With fewer rows than columns (a long input's first
    samples: hundreds of rows, thousands of words) through the rows' n × n system (Woodbury), in O(n²·F)
    rather than O(F³)."""
    n, features = x.shape
    if n >= features:
        return np.linalg.solve((x * weights[:, None]).T @ x + np.diag(diagonal), grad)
    u = grad / diagonal
    root = np.sqrt(weights)
    inner = (x / diagonal) @ x.T  # x D⁻¹ xᵀ, n × n
    system = np.eye(n) + root[:, None] * inner * root[None, :]
    z = root * np.linalg.solve(system, root * (x @ u))
    out: np.ndarray = u - (x.T @ z) / diagonal
    return out


def sigmoid(scores: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(scores, -30.0, 30.0)))
    return out
