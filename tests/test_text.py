import numpy as np
import pytest

from llm_anchors import ConfigError, InvalidInputError, TextSampler
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.samplers import TextInstance

ODD = [
    "the rock is destined to be the 21st century's new \" conan \" and  that he's going .",
    "  Leading spaces,\ttabs\nand newlines -- kept!  ",
    "jean-claud van damme's co-writer/director (2002)",
    "Ça marche très bien, naïve café.",
]


@pytest.mark.parametrize("text", ODD)
def test_render_with_every_word_kept_is_the_original(text):
    inst = TextInstance.parse(text)
    assert inst.render(np.ones(len(inst.words), dtype=bool), "UNK") == text


def test_round_trip_on_rt_polarity():
    texts, _ = load_rt_polarity()
    for text in texts[:2000]:
        inst = TextInstance.parse(text)
        assert inst.render(np.ones(len(inst.words), dtype=bool), "UNK") == text


def test_words_and_masking_keep_punctuation_and_spacing():
    inst = TextInstance.parse("a good,  great movie!")
    assert inst.words == ("a", "good", "great", "movie")
    assert inst.render(np.array([True, False, True, False]), "UNK") == "a UNK,  great UNK!"
    assert TextInstance.parse("century's jean-claud").words == ("century's", "jean-claud")


def test_rule_words_always_kept_others_half_the_time():
    sampler = TextSampler()
    inst = sampler.features("one two three four five six seven eight")
    present = sampler.sample_present(inst, frozenset({1, 6}), 20_000, np.random.default_rng(0))
    assert present[:, [1, 6]].all()
    free = present[:, [0, 2, 3, 4, 5, 7]].mean(axis=0)
    assert np.all(np.abs(free - 0.5) < 0.02)


def test_sample_renders_what_the_matrix_says():
    sampler = TextSampler(mask="[MASK]")
    inst = sampler.features("alpha beta gamma")
    texts, present = sampler.sample(inst, frozenset({0}), 50, np.random.default_rng(1))
    for text, row in zip(texts, present, strict=True):
        words = text.split()
        assert words[0] == "alpha"
        assert [w != "[MASK]" for w in words] == row.tolist()


def test_the_generator_alone_decides_the_samples():
    sampler = TextSampler()
    inst = sampler.features("alpha beta gamma delta epsilon zeta")
    a = sampler.sample(inst, frozenset(), 30, np.random.default_rng(5))
    b = sampler.sample(inst, frozenset(), 30, np.random.default_rng(5))
    c = sampler.sample(inst, frozenset(), 30, np.random.default_rng(6))
    assert a[0] == b[0] and np.array_equal(a[1], b[1])  # same seed, same samples
    assert a[0] != c[0] and not np.array_equal(a[1], c[1])  # another seed, others: the generator is used


@pytest.mark.parametrize("bad", ["", "   \n\t", "!!! ... ???", None, 42, b"bytes", ["a", "list"]])
def test_bad_input_is_a_typed_error(bad):
    with pytest.raises(InvalidInputError):
        TextSampler().features(bad)


def test_word_limit():
    sampler = TextSampler(max_words=5)
    sampler.features("one two three four five")
    with pytest.raises(InvalidInputError, match="max_words"):
        sampler.features("one two three four five six")


@pytest.mark.parametrize(
    "kwargs",
    [{"mode": "bert"}, {"p_hide": 0.0}, {"p_hide": "0.5"}, {"max_words": 0}, {"mask": ""}, {"mask": None}],
)
def test_bad_sampler_settings(kwargs):
    with pytest.raises(ConfigError):
        TextSampler(**kwargs)
