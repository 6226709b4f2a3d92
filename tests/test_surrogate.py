"""benchmarks.surrogate: the logistic model of the explained model that issue 71's replay bets with."""

import numpy as np

from benchmarks.surrogate import Surrogate

KEYS = ["a", "good", "and", "great", "movie"]


def kept_by(present, words=(1, 3)):
    """The model keeps its label when "good" or "great" is kept."""
    return present[:, list(words)].any(axis=1)


def draws(n, f=5, seed=0):
    return np.random.default_rng(seed).random((n, f)) >= 0.5


def test_the_surrogate_fits_an_input_from_its_samples():
    present = draws(400)
    fit = Surrogate().fit(KEYS, present, kept_by(present), "pos")
    probe = draws(400, seed=1)
    assert ((fit(probe) >= 0.5) == kept_by(probe)).mean() > 0.9


def test_what_one_input_teaches_starts_the_next_with_those_words():
    s = Surrogate()
    for seed in range(5):
        present = draws(300, seed=seed)
        s.learn(KEYS, present, kept_by(present), "pos")
    weights, _ = s.shared(["great", "movie", "unseen"], "pos")
    assert weights[0] > weights[1] and weights[2] == 0.0
    # Another label learns apart.
    assert not s.shared(["great"], "neg")[0].any()
    # From 10 samples only, the shared layer carries the fit.
    present = draws(10, seed=9)
    fit = s.fit(["great", "movie"], present[:, 3:], present[:, 3], "pos")
    assert fit(np.array([[True, False]]))[0] > fit(np.array([[False, True]]))[0]
