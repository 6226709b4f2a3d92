import numpy as np
import pytest

from llm_anchors._logistic import newton_step, ridge_logistic


@pytest.mark.parametrize("n,features", [(40, 400), (120, 2000), (9, 10), (300, 200)])
def test_a_newton_step_is_the_direct_solve_whatever_the_shape(n, features):
    rng = np.random.default_rng(n)
    x = (rng.random((n, features)) > 0.5).astype(float)
    weights = rng.random(n) * 0.25
    weights[0] = 0.0  # a saturated sample
    diagonal, grad = rng.random(features) + 0.5, rng.normal(size=features)
    direct = np.linalg.solve((x * weights[:, None]).T @ x + np.diag(diagonal), grad)
    assert np.allclose(newton_step(x, weights, diagonal, grad), direct, atol=1e-9)


def test_a_fit_with_more_words_than_samples_finds_the_word_that_decides():
    rng = np.random.default_rng(0)
    x = (rng.random((80, 1500)) >= 0.5).astype(float)
    y = x[:, 321]  # the label follows word 321
    theta = ridge_logistic(x, y, np.zeros(1500), np.full(1500, 1.0), iterations=8)
    assert int(np.argmax(theta)) == 321


def _loss(x, y, prior, reg, theta):
    s = x @ theta
    return float(np.sum(np.logaddexp(0, s) - y * s) + 0.5 * np.sum(reg * (theta - prior) ** 2))


@pytest.mark.parametrize("scale", [1.0, 5.0, 20.0])
def test_a_fit_from_a_saturated_start_lowers_its_loss_and_stays_bounded(scale):
    """The surrogate's fit starts from the cross-input layer: a score column of large values, weight 1. A full
    Newton step from where every probability is near 0 or 1 overshot (a scale of −51 on a tuning input); each
    step is now halved until the penalised loss does not grow."""
    rng = np.random.default_rng(1)
    words = (rng.random((100, 24)) >= 0.5).astype(float)
    score = scale * (words @ rng.uniform(0, 1.2, 24) + 0.5)  # the shared layer's score: all far above 0
    x = np.hstack([score[:, None], words, np.ones((100, 1))])
    y = (rng.random(100) < 0.9).astype(float)
    prior = np.zeros(x.shape[1])
    prior[0] = 1.0
    reg = np.full(x.shape[1], 1.0)
    reg[-1] = 0.1
    theta = ridge_logistic(x, y, prior, reg, iterations=15)
    assert _loss(x, y, prior, reg, theta) < _loss(x, y, prior, reg, prior)
    assert np.abs(theta).max() < 10
