import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_anchors.search import compute_beta, kl_bernoulli, kl_lower_bound, kl_upper_bound, lucb

GRID = np.linspace(0.0, 1.0, 200_001)  # step 5e-6


def brute_upper(p: float, level: float) -> float:
    ok = [q for q in GRID[GRID >= p] if kl_bernoulli(p, q) <= level]
    return max(ok)


def brute_lower(p: float, level: float) -> float:
    ok = [q for q in GRID[GRID <= p] if kl_bernoulli(p, q) <= level]
    return min(ok)


def test_kl_bernoulli_known_values():
    assert kl_bernoulli(0.5, 0.5) == 0.0
    assert kl_bernoulli(0.3, 0.6) == pytest.approx(0.3 * math.log(0.5) + 0.7 * math.log(0.7 / 0.4))
    assert kl_bernoulli(1.0, 0.5) == pytest.approx(math.log(2))
    assert kl_bernoulli(0.0, 0.25) == pytest.approx(math.log(4 / 3))
    assert kl_bernoulli(0.5, 1.0) == math.inf
    assert kl_bernoulli(0.5, 0.0) == math.inf


@pytest.mark.parametrize("p", [0.0, 0.01, 0.2, 0.5, 0.8, 0.95, 0.999, 1.0])
@pytest.mark.parametrize("level", [1e-4, 0.01, 0.1, 1.0, 5.0])
def test_bounds_match_brute_force(p, level):
    step = GRID[1] - GRID[0]
    assert abs(kl_upper_bound(p, level) - brute_upper(p, level)) <= step
    assert abs(kl_lower_bound(p, level) - brute_lower(p, level)) <= step


@settings(max_examples=300, deadline=None)
@given(p=st.floats(0.0, 1.0), level=st.floats(1e-6, 20.0))
def test_bounds_are_tight_to_full_precision(p, level):
    ub, lb = kl_upper_bound(p, level), kl_lower_bound(p, level)
    assert lb <= p <= ub
    # Just past the bound the divergence exceeds the level, just inside it does not.
    if ub < 1.0:
        assert kl_bernoulli(p, ub) >= level * (1 - 1e-9)
        assert kl_bernoulli(p, max(p, ub - 1e-12)) <= level * (1 + 1e-9)
    if lb > 0.0:
        assert kl_bernoulli(p, lb) >= level * (1 - 1e-9)
        assert kl_bernoulli(p, min(p, lb + 1e-12)) <= level * (1 + 1e-9)


def test_one_bisection_step_would_be_loose():
    # The reference code's single halving returns a bound far from the truth.
    p, level = 0.9, 0.01
    lm, um = p, min(1.0, p + math.sqrt(level / 2))
    qm = (lm + um) / 2
    one_step = qm if kl_bernoulli(p, qm) > level else um
    assert abs(one_step - brute_upper(p, level)) > 0.005
    assert abs(kl_upper_bound(p, level) - brute_upper(p, level)) < 1e-5


def test_bounds_reject_bad_arguments():
    with pytest.raises(ValueError):
        kl_upper_bound(1.5, 0.1)
    with pytest.raises(ValueError):
        kl_lower_bound(0.5, -1.0)


def test_compute_beta_formula():
    temp = math.log(405.5 * 7 * 3**1.1 / 0.1)
    assert compute_beta(7, 3, 0.1) == pytest.approx(temp + math.log(temp))
    assert compute_beta(7, 4, 0.1) > compute_beta(7, 3, 0.1)


def run_lucb(means, top_n, seed=0, start=None, **kw):
    rng = np.random.default_rng(seed)
    n0 = start or [0] * len(means)
    gen = lucb(n0, [0] * len(means), top_n=top_n, epsilon=kw.get("epsilon", 0.1), delta=0.1, batch_size=10)
    pulls_seen = []
    try:
        pulls = next(gen)
        while True:
            pulls_seen.append(pulls)
            pulls = gen.send([int((rng.random(k) < means[a]).sum()) for a, k in pulls])
    except StopIteration as stop:
        return stop.value, pulls_seen


def test_lucb_finds_the_best_arms():
    chosen, pulls = run_lucb([0.2, 0.9, 0.5, 0.3, 0.85], top_n=2)
    assert sorted(chosen) == [1, 4]
    assert pulls[0] == [(a, 1) for a in range(5)]  # every unseen arm once, in one round
    assert all(len(p) == 2 for p in pulls[1:])  # then two arms per round


def test_lucb_returns_all_when_top_n_covers_every_arm():
    chosen, pulls = run_lucb([0.1, 0.7], top_n=2)
    assert sorted(chosen) == [0, 1]
    assert len(pulls) == 1


def test_lucb_rejects_bad_top_n():
    with pytest.raises(ValueError):
        next(lucb([1, 1], [0, 1], top_n=3, epsilon=0.1, delta=0.1, batch_size=10))
