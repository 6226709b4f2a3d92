from pathlib import Path

import numpy as np
import pytest

from llm_anchors import ConfigError
from llm_anchors.datasets import ADULT_FEATURES, data_dir, load_adult, load_rt_polarity, shuffled


def test_the_tests_read_the_excerpts_the_repository_ships():
    from tests.conftest import FIXTURES

    assert data_dir() == Path(FIXTURES) and Path(FIXTURES).is_relative_to(Path(__file__).parent)


def test_rt_polarity_has_both_classes():
    texts, labels = load_rt_polarity()
    assert len(texts) == len(labels) == 600
    assert labels[:300].tolist() == [1] * 300 and labels[300:].tolist() == [0] * 300
    assert all(t and t == t.strip() for t in texts)


def test_adult_is_numbers_with_named_categories():
    adult = load_adult()
    assert adult.train.shape == (len(adult.train_labels), len(ADULT_FEATURES)) == (300, len(ADULT_FEATURES))
    assert adult.test.shape == (150, len(ADULT_FEATURES))
    assert set(np.unique(adult.train_labels)) == {0, 1} and 0.1 < adult.test_labels.mean() < 0.4
    sex = ADULT_FEATURES.index("sex")
    assert adult.categorical_names[sex] == ("Female", "Male")
    assert set(np.unique(adult.train[:, sex])) == {0.0, 1.0}


def test_missing_files_are_a_config_error_that_says_where(tmp_path):
    with pytest.raises(ConfigError, match="rt-polarity.pos"):
        load_rt_polarity(tmp_path)
    with pytest.raises(ConfigError, match=str(tmp_path)):
        load_adult(tmp_path)


def test_data_dir_prefers_the_argument_then_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ANCHORS_DATA", str(tmp_path / "env"))
    assert data_dir(tmp_path) == tmp_path and data_dir() == tmp_path / "env"


def test_shuffled_is_a_seeded_permutation():
    order = shuffled(100, seed=42)
    assert sorted(order.tolist()) == list(range(100))
    assert order.tolist() == shuffled(100, seed=42).tolist() != shuffled(100, seed=7).tolist()


def test_the_youtube_spam_comments_load_by_video_with_their_labels():
    from llm_anchors.datasets import YOUTUBE_VIDEOS, load_youtube_spam

    texts, labels = load_youtube_spam()
    assert len(texts) == 300 and int(labels.sum()) == 145 and set(labels.tolist()) == {0, 1}
    lmfao, _ = load_youtube_spam(("LMFAO",))
    assert len(lmfao) == 60 and all("\n" not in t and t == t.strip() for t in lmfao)
    assert len(set(texts)) < len(texts)  # templated: exact repeats
    with pytest.raises(ConfigError, match="no video 'Gangnam'"):
        load_youtube_spam(("Gangnam",))
    assert YOUTUBE_VIDEOS[0] == "Psy"
