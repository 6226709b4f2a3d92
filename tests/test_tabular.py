"""Tabular sampler, explainer and MAnchors on synthetic data with a known anchor."""

import json

import numpy as np
import pytest

from llm_anchors import (
    ConfigError,
    InvalidInputError,
    MAnchorsExplainer,
    TabularClassifier,
    TabularExplainer,
    TabularSampler,
)
from llm_anchors.search import make_rule

NAMES = ("age", "colour", "noise")
COLOURS = ("red", "green", "blue")


def synthetic(n=4000, seed=0):
    """age uniform 0–100, colour a category, noise uniform: the model needs colour = blue AND age > q75."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(0, 100, n), rng.integers(0, 3, n), rng.normal(0, 1, n)])


def predict(rows):
    rows = np.asarray(rows)
    return ((rows[:, 1] == 2) & (rows[:, 0] > 75)).astype(int)


@pytest.fixture(scope="module")
def sampler():
    return TabularSampler(synthetic(), NAMES, {1: COLOURS})


def test_numeric_features_are_cut_at_the_training_quartiles(sampler):
    expected = np.percentile(sampler.train[:, 0], [25, 50, 75])
    assert np.allclose(sampler.edges[0], expected)
    assert 1 not in sampler.edges  # categorical: its codes are its bins
    instance = sampler.features([90.0, "blue", 0.3])
    assert instance.features[0] == f"age > {expected[2]:.2f}"
    assert instance.features[1] == "colour = blue"
    assert instance.features[2].endswith(f"< noise <= {sampler.edges[2][2]:.2f}")
    assert sampler.features({"age": 10, "colour": 0, "noise": 0.0}).features[:2] == (
        f"age <= {expected[0]:.2f}",
        "colour = red",
    )


def test_rows_round_trip_through_query_strings(sampler):
    rows = sampler.train[:50]
    texts = sampler.encode(rows)
    assert json.loads(texts[0])["colour"] in COLOURS
    assert np.array_equal(sampler.decode(texts), rows)


def test_perturbations_keep_the_rule_and_report_their_bins(sampler):
    instance = sampler.features([90.0, "blue", 0.3])
    rule = make_rule([0, 1])
    texts, present = sampler.sample(instance, rule, 500, np.random.default_rng(1))
    rows = sampler.decode(texts)
    assert present[:, [0, 1]].all()
    assert (rows[:, 1] == 2).all() and (rows[:, 0] > sampler.edges[0][2]).all()
    assert np.array_equal(present, sampler.discretize(rows) == instance.bins)
    assert 0.15 < present[:, 2].mean() < 0.35  # a free feature stays in its bin ~1/4 of the time
    again, _ = sampler.sample(instance, rule, 500, np.random.default_rng(1))
    assert again == texts


def test_coverage_pool_is_the_training_distribution(sampler):
    instance = sampler.features([90.0, "blue", 0.3])
    present = sampler.sample_present(instance, frozenset(), 20_000, np.random.default_rng(2))
    share = (sampler.train_bins[:, 1] == 2).mean()
    assert present[:, 1].mean() == pytest.approx(share, abs=0.02)


@pytest.mark.parametrize(
    "row",
    [[1.0, 2.0], [1.0, "purple", 0.0], [1.0, 7, 0.0], [float("nan"), 1, 0.0], "age=3", {"age": 3, "colour": 1}],
)
def test_bad_rows_get_a_typed_error(sampler, row):
    with pytest.raises(InvalidInputError):
        sampler.features(row)


def test_bad_training_data_is_a_config_error():
    with pytest.raises(ConfigError, match="feature names"):
        TabularSampler(synthetic(100), NAMES[:2])
    with pytest.raises(ConfigError, match="categorical"):
        TabularSampler(synthetic(100), NAMES, {1: ("a", "b")})
    with pytest.raises(ConfigError, match="not one of"):
        TabularSampler(synthetic(100), NAMES, {5: COLOURS})
    with pytest.raises(ConfigError, match="NaN"):
        TabularSampler(np.full((3, 3), np.nan), NAMES)


async def test_the_known_anchor_is_recovered_with_fresh_precision(sampler):
    explainer = TabularExplainer(predict, sampler, seed=0)
    row = [90.0, "blue", 0.3]
    exp = await explainer.explain(row)
    assert exp.data.label == 1
    assert set(exp.data.positions) == {0, 1}
    assert str(exp).startswith(f"age > {sampler.edges[0][2]:.2f} AND colour = blue -> 1")
    assert await explainer.estimate_precision(row, exp.data.positions, n=1000) >= 0.95
    assert exp.data.coverage == pytest.approx(
        ((sampler.train[:, 1] == 2) & (sampler.train[:, 0] > sampler.edges[0][2])).mean(), abs=0.02
    )
    negative = await explainer.explain([20.0, "blue", 0.3])
    assert negative.data.label == 0 and negative.data.positions == (0,)  # age <= q25 alone decides


async def test_manchors_reuses_the_rule_on_the_same_features(sampler, tmp_path):
    m = MAnchorsExplainer(TabularClassifier(predict, sampler, name="age-colour"), sampler=sampler, seed=0)
    first = await m.explain([90.0, "blue", 0.3])
    assert first.meta.memory_hit is False and len(m.store) == 1
    entry = m.store.entries[0]
    assert entry.rule_vectors and len(entry.rule_vectors) == len(entry.rule_positions)
    second = await m.explain([95.0, "blue", 1.9])  # same bins but noise: similarity 2/3
    assert second.meta.memory_hit is True
    assert second.meta.memory.similarity == pytest.approx(2 / 3, abs=1e-5)
    assert set(second.data.positions) == {0, 1}
    assert await m.estimate_precision([95.0, "blue", 1.9], second.data.positions) >= 0.95
    m.save(tmp_path)
    again = MAnchorsExplainer(TabularClassifier(predict, sampler, name="age-colour"), sampler=sampler, seed=0)
    again.load(tmp_path)
    assert again.store.entries == m.store.entries
