import numpy as np
import pytest

from llm_anchors import ConfigError, InvalidInputError, TextSampler
from llm_anchors.datasets import load_rt_polarity
from llm_anchors.samplers import TextInstance
from llm_anchors.samplers.text_instance import sentence_spans

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
    [
        {"perturbation": "bert"},
        {"p_hide": 0.0},
        {"p_hide": "0.5"},
        {"p_hide": "beta"},
        {"max_words": 0},
        {"mask": ""},
        {"mask": None},
        {"unit": "paragraph"},
    ],
)
def test_bad_sampler_settings(kwargs):
    with pytest.raises(ConfigError):
        TextSampler(**kwargs)


def sentences(text):
    return [text[a:b] for a, b in sentence_spans(text)]


def test_sentences_end_at_stops_before_a_capital_and_at_line_breaks():
    text = 'He said "Go." Then 3.5 million left! Mr. Smith and J. R. Ewing stayed? yes.\nA title\n\nLast one'
    assert sentences(text) == [
        'He said "Go."',
        "Then 3.5 million left!",
        "Mr. Smith and J. R. Ewing stayed? yes.",
        "A title",
        "Last one",
    ]
    assert sentences("  -- . \n ok") == ["ok"]  # no word, no sentence


def test_sentences_as_features_are_hidden_whole_and_the_rest_kept_verbatim():
    sampler = TextSampler(unit="sentence", mask="[X]")
    text = "First one here.  Second, with a comma!\nThird"
    inst = sampler.features(text)
    assert inst.features == ("First one here.", "Second, with a comma!", "Third")
    assert inst.render(np.array([True, False, True]), "[X]") == "First one here.  [X]\nThird"
    assert inst.render(np.ones(3, dtype=bool), "[X]") == text


def test_sentences_of_every_bbc_article_render_back_to_it():
    import csv

    from llm_anchors.datasets import data_dir

    with open(data_dir() / "bbc-news" / "val.csv", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f)]
    for text in texts:
        inst = TextInstance.parse(text, "sentence")
        assert len(inst.features) >= 2
        assert inst.render(np.ones(len(inst.features), dtype=bool), "UNK") == text


def test_a_drawn_rate_keeps_a_uniform_share_of_the_text():
    sampler = TextSampler(p_hide="uniform")
    inst = sampler.features(" ".join(f"w{i}" for i in range(40)))
    present = sampler.sample_present(inst, frozenset({3}), 20_000, np.random.default_rng(0))
    assert present[:, 3].all()
    share = np.delete(present, 3, axis=1).mean(axis=1)  # each sample's kept share: U(0, 1), not 0.5 always
    assert abs(share.mean() - 0.5) < 0.01
    assert 0.08 < (share < 0.1).mean() < 0.12 and 0.08 < (share > 0.9).mean() < 0.12


def test_the_distribution_is_named_in_the_settings_and_for_each_input():
    assert TextSampler(unit="word", p_hide=0.5).settings()["distribution"] == (
        "each word outside the anchor replaced by 'UNK' with probability 0.5, independently"
    )
    named = TextSampler(unit="sentence", p_hide="uniform").settings()
    assert named["unit"] == "sentence" and named["p_hide"] == "uniform"
    assert "each sentence" in str(named["distribution"]) and "U(0, 1)" in str(named["distribution"])
    auto = TextSampler()
    assert str(auto.settings()["distribution"]).startswith("auto: a text of 3+ sentences")
    assert auto.describe(auto.features("a short one")) == (
        "each word outside the anchor replaced by 'UNK' with probability 0.5, independently"
    )
    assert "each sentence" in auto.describe(auto.features(DOCUMENT)) and "U(0, 1)" in auto.describe(
        auto.features(DOCUMENT)
    )


DOCUMENT = "The match ended late. Fans sang for an hour!\nThe striker scored twice, said the coach. Rain fell."


def test_auto_searches_a_text_of_three_sentences_or_more_by_sentences_at_a_drawn_rate():
    sampler = TextSampler()
    long, short = sampler.features(DOCUMENT), sampler.features("One sentence. And a second one.")
    assert (long.unit, long.p_hide, len(long.features)) == ("sentence", "uniform", 4)
    assert (short.unit, short.p_hide, short.features[0]) == ("word", 0.5, "One")
    assert TextSampler(sentences_from=5).features(DOCUMENT).unit == "word"


def test_refining_a_sentence_anchor_gives_its_words_and_the_other_sentences_as_context():
    sampler = TextSampler()
    coarse = sampler.features(DOCUMENT)
    fine = sampler.refine(coarse, frozenset({2}))
    assert fine is not None and fine.unit == "word in sentence"
    assert fine.features == (
        "The match ended late.", "Fans sang for an hour!", "The", "striker", "scored", "twice", "said", "the",
        "coach", "Rain fell.",
    )  # fmt: skip
    assert fine.context == (0, 1, 9)
    assert fine.render(np.ones(10, dtype=bool), "UNK") == DOCUMENT
    kept = np.array([False, True, False, True, False, False, False, False, False, False])
    assert fine.render(kept, "UNK") == "UNK Fans sang for an hour!\nUNK striker UNK UNK, UNK UNK UNK. UNK"
    assert sampler.refine(coarse, frozenset()) is None  # an empty anchor: nothing finer
    assert TextSampler(unit="sentence").refine(coarse, frozenset({2})) is None  # sentences asked for: no finer


def test_pinned_parts_are_never_features_and_always_kept():
    sampler = TextSampler(unit="word")
    text = "Subject: refund now\nplease send my money back"
    inst = sampler.features({"text": text, "pinned": ["Subject: refund now"]})
    assert inst.features == ("please", "send", "my", "money", "back")
    assert inst.render(np.zeros(5, dtype=bool), "UNK") == "Subject: refund now\nUNK UNK UNK UNK UNK"
    by_offsets = sampler.features({"text": text, "pinned": [[0, 8]]})
    assert by_offsets.features[:2] == ("refund", "now")
    sentences = TextSampler(unit="sentence").features({"text": DOCUMENT, "pinned": ["Fans sang"]})
    assert "Fans sang" not in " ".join(sentences.features) and "for an hour!" in sentences.features


@pytest.mark.parametrize("pinned", [["oo"], [[1, 3]], ["go"], ["ood fi"]])
def test_a_pinned_part_of_a_word_pins_the_whole_word(pinned):
    inst = TextSampler(unit="word").features({"text": "a good film", "pinned": pinned})
    assert "good" not in inst.features and not {"g", "d", "od", "ood"} & set(inst.features)  # it was "g" and "d"
    assert inst.render(np.zeros(len(inst.features), dtype=bool), "UNK").split()[1] == "good"


@pytest.mark.parametrize(
    "x, why",
    [
        ({"text": "a b", "pinned": ["zzz"]}, "not in the text"),
        ({"text": "a b", "pinned": [[2, 9]]}, "neither a non-empty substring"),
        ({"text": "a b", "pinned": "a"}, "must be a list"),
        ({"text": "a b", "pinned": ["a b"]}, "every word of the text is pinned"),
        ({"body": "a b"}, "got keys ['body']"),
    ],
)
def test_bad_pinned_parts_are_refused_by_name(x, why):
    with pytest.raises(InvalidInputError, match=why.replace("[", r"\[").replace("]", r"\]")):
        TextSampler().features(x)


def test_delete_removes_words_and_leaves_readable_spacing():
    inst = TextInstance.parse("a good film , really. Not bad!")
    keep = lambda *kept: np.array([i in kept for i in range(6)])  # noqa: E731
    assert inst.render(keep(0, 2, 3, 4, 5), None) == "a film , really. Not bad!"
    assert inst.render(keep(0, 1, 3, 4, 5), None) == "a good, really. Not bad!"
    assert inst.render(keep(0, 1, 2, 3, 4), None) == "a good film , really. Not!"
    assert inst.render(keep(*range(6)), None) == "a good film , really. Not bad!"
    sampler = TextSampler(perturbation="delete", unit="word")
    texts, present = sampler.sample(
        sampler.features("a charming and funny film"), frozenset({1}), 50, np.random.default_rng(0)
    )
    assert all("charming" in t and "UNK" not in t and "  " not in t and t == t.strip() for t in texts)
    assert "deleted" in sampler.describe(sampler.features("a film"))


def test_similar_replaces_hidden_words_by_near_words_drawn_by_the_seed():
    sampler = TextSampler(perturbation="similar", unit="word")
    inst = sampler.features("A funny movie")
    pools = sampler.stand_ins_of(inst)
    assert pools[0] is not None and "An" in pools[0][0]  # capitalised as the word is
    names, probabilities = pools[1]
    assert "hilarious" in names and "funny" not in names and abs(probabilities.sum() - 1) < 1e-9
    assert pools[2] is not None and "film" in pools[2][0]
    draw = lambda seed: sampler.sample(inst, frozenset({1}), 40, np.random.default_rng(seed))[0]  # noqa: E731
    texts = draw(0)
    assert texts == draw(0) and texts != draw(1)
    assert all(t.split()[1] == "funny" for t in texts)
    hidden = {t.split()[2] for t in texts} - {"movie"}
    assert hidden and hidden <= set(pools[2][0])  # each hidden "movie" became one of its neighbours
    assert TextSampler(perturbation="similar").stand_ins_of(TextInstance.parse("Zzqxv film"))[0] is None  # fallback
    assert "nearest words" in sampler.describe(inst) and sampler.settings()["similar"]["neighbours"] == 20


def test_an_unknown_perturbation_is_refused_by_name():
    with pytest.raises(ConfigError, match="unknown perturbation 'bert'; available: unk, delete, similar"):
        TextSampler(perturbation="bert")


def test_a_user_anchor_is_found_at_the_level_an_explanation_would_give_it():
    sampler = TextSampler()
    positions, coarse, inst = sampler.rule_of(DOCUMENT, "striker twice")
    assert coarse == (2,) and [inst.features[p] for p in positions] == ["striker", "twice"]
    positions, coarse, inst = sampler.rule_of("a film, a GOOD film", "good film")
    assert coarse is None and positions == (3, 4)  # the phrase, before the first "film"
    with pytest.raises(InvalidInputError, match="'great' is not in the text"):
        sampler.rule_of("a good film", "great")
    with pytest.raises(InvalidInputError, match="names no words this sampler can search"):
        sampler.rule_of(DOCUMENT, "goalkeeper")  # in no sentence
    with pytest.raises(InvalidInputError, match="names no words this sampler can search"):
        TextSampler(unit="sentence").rule_of(DOCUMENT, "striker")  # whole sentences are its features


@pytest.mark.parametrize("kwargs", [{"neighbours": 0}, {"min_similarity": 1.5}, {"temperature": 0}, {"fallback": "x"}])
def test_bad_similar_settings(kwargs):
    from llm_anchors.samplers.similar import Similar

    with pytest.raises(ConfigError):
        Similar(**kwargs)


def test_a_filler_answer_becomes_a_pool_without_the_word_itself():
    from llm_anchors.extend import MockBackend
    from llm_anchors.models.backend import Completion
    from llm_anchors.samplers.infill import Filler, fill_prompt, fillable, pool_of

    filler = Filler(MockBackend(lambda prompt: "great"))
    answer = filler.answer(Completion(" great", {" great": -0.5, " Funny": -1.5, " ,": -2.5, " funny": -3.0}))[0]
    assert answer == "great=-0.5000\tFunny=-1.5000\tfunny=-3.0000"
    names, p = pool_of(answer, "Funny")
    assert names == ("Great",) and p.tolist() == [1.0]  # the word itself left out, capitalised as it
    names, p = pool_of(answer, "dull")
    assert names == ("great", "funny") and p[0] > p[1] and abs(p.sum() - 1) < 1e-12
    assert pool_of("<unparsed>", "dull") is None and filler.identity.startswith("infill:")
    assert fill_prompt("a dull film", (2, 6)) == "a ___ film"
    assert fillable(["a", "dull", "film", "The", "and"]) == [1, 2]


def test_a_pool_cached_with_numbers_that_are_not_numbers_draws_from_the_rest():
    from llm_anchors.samplers.infill import pool_of

    names, p = pool_of("superb=nan\tgreat=-inf\tfine=-0.5000\tfair=x", "good")  # as an older build cached it
    assert names == ("fine",) and p.tolist() == [1.0]
    assert pool_of("superb=nan\tgreat=-inf", "good") is None  # no fill: the word takes the fallback


def test_a_sampler_under_another_perturbation_is_made_once_and_keeps_every_other_setting():
    sampler = TextSampler(unit="word", p_hide=0.3, mask="[X]", max_words=50)
    similar = sampler.with_perturbation("similar")
    assert sampler.with_perturbation("similar") is similar and sampler.with_perturbation("unk") is sampler
    assert (similar.perturbation, similar.unit, similar.p_hide, similar.mask, similar.max_words) == (
        "similar",
        "word",
        0.3,
        "[X]",
        50,
    )
