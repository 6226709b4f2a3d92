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
