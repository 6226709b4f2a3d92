"""Ridge-penalised logistic regression, fitted by Newton's method (numpy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["ridge_logistic", "sigmoid"]


def ridge_logistic(x: np.ndarray, y: np.ndarray, prior: np.ndarray, reg: np.ndarray, iterations: int) -> np.ndarray:
    """The θ minimising logistic loss of ``y`` (0/1 or probabilities) on ``x`` + ½ Σ reg (θ − prior)²."""
    theta = prior.astype(float).copy()
    for _ in range(iterations):
        p = sigmoid(x @ theta)
        grad = x.T @ (p - y) + reg * (theta - prior)
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(reg + 1e-6)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-6:
            break
    return theta


def sigmoid(scores: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(scores, -30.0, 30.0)))
    return out
