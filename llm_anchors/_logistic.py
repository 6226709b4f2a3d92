"""Ridge-penalised logistic regression, fitted by Newton's method (numpy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["newton_step", "ridge_logistic", "sigmoid"]


def ridge_logistic(x: np.ndarray, y: np.ndarray, prior: np.ndarray, reg: np.ndarray, iterations: int) -> np.ndarray:
    """The θ minimising logistic loss of ``y`` (0/1 or probabilities) on ``x`` + ½ Σ reg (θ − prior)², by
    Newton steps halved until the loss does not grow (a full step from a saturated start overshoots)."""
    theta = prior.astype(float).copy()
    loss = _loss(x, y, prior, reg, theta)
    for _ in range(iterations):
        p = sigmoid(x @ theta)
        grad = x.T @ (p - y) + reg * (theta - prior)
        step = newton_step(x, p * (1 - p), reg + 1e-6, grad)
        for _ in range(30):
            tried = _loss(x, y, prior, reg, theta - step)
            if tried <= loss + 1e-12 * abs(loss):
                break
            step = step / 2
        theta, loss = theta - step, tried
        if np.abs(step).max() < 1e-6:
            break
    return theta


def _loss(x: np.ndarray, y: np.ndarray, prior: np.ndarray, reg: np.ndarray, theta: np.ndarray) -> float:
    scores = x @ theta
    return float(np.sum(np.logaddexp(0.0, scores) - y * scores) + 0.5 * np.sum(reg * (theta - prior) ** 2))


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
