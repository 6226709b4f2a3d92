"""benchmarks.control_variate: the cell bet's projection is an e-variable for the whole null, and the
replay of a logged search gives back the verdicts the search gave."""

import numpy as np
import pytest

from benchmarks.control_variate import Replayed, projection, replay
from benchmarks.search_trace import Tracer, bits, row, save
from llm_anchors import FunctionClassifier, MAnchorsExplainer


@pytest.mark.parametrize(
    ("p", "mu", "bound"),
    [
        ([0.99, 0.2], [0.95, 0.05], 0.9),  # the surrogate separates the flips: a near-τ rule
        ([0.97, 0.9], [0.5, 0.5], 0.9),  # it does not
        ([0.999, 0.5, 0.05], [0.8, 0.15, 0.05], 0.95),  # three bins
        ([0.5, 0.4], [0.6, 0.4], 0.9),  # the estimate is inside the null: no bet
    ],
)
def test_the_projection_is_on_the_null_and_no_law_of_the_null_expects_the_factor_above_one(p, mu, bound):
    p, mu = np.array(p), np.array(mu)
    q = projection(p, mu, bound)
    if mu @ p <= bound:
        assert np.allclose(q, p)
    assert mu @ q <= bound + 1e-9
    rng = np.random.default_rng(0)
    for _ in range(500):  # any rates of the cells whose mean, at these shares, is at most the bound
        r = rng.uniform(0, 1, len(p))
        r = r * min(1.0, bound / (mu @ r))
        expected = mu @ (r * p / q + (1 - r) * (1 - p) / (1 - q))
        assert expected <= 1 + 1e-9


def test_a_logged_search_replays_to_the_verdicts_it_gave(tmp_path):
    words = "the film was good and the cast was great but the plot was thin and slow".split()

    def model(texts):
        return ["pos" if "good" in t.split() and ("great" in t.split() or len(t) % 7 > 0) else "neg" for t in texts]

    explainer = MAnchorsExplainer(FunctionClassifier(model, name="noisy"), memory=None, seed=3)
    with Tracer().installed() as tracer:
        explainer.explain_sync(" ".join(words))
    explainer.close()
    (search,) = tracer.searches
    assert search["words"] == words and len(search["kept"]) == len(search["present"])
    tested = [r for r in search["rules"] if r["kept"]]
    assert tested and all(r["verdict"] in ("certified", "refused") for r in tested)
    save(tmp_path / "t.json.gz", [], tracer.searches)
    result = replay(tmp_path / "t.json.gz", Replayed(draws=2_000))
    assert [r["logged"] for r in result["rows"]] == [r["verdict"] for r in tested]
    assert all(r["verdict"] == r["logged"] for r in result["rows"])  # today's bet, replayed sample by sample
    assert all(r["paid_n"] <= r["n"] for r in result["rows"])


@pytest.mark.parametrize("n", [1, 24, 63, 64, 95, 400])
def test_a_perturbation_of_any_length_is_logged_and_read_back_whole(n):
    kept = np.random.default_rng(n).random(n) < 0.5
    kept[-1] = True  # the last feature kept: the highest bit
    assert np.array_equal(row(bits(kept), n), kept)
