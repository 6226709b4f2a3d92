import asyncio
import threading

import pytest

from llm_anchors import (
    AnchorsExplainer,
    ClassifierError,
    ConfigError,
    FunctionClassifier,
    InvalidInputError,
    MAnchorsExplainer,
    QueryCache,
    SearchParams,
    TextSampler,
)
from tests.conftest import needs_all

SENTENCE = "this is a good and great movie with a fine plot overall"


def explainer(fn, **kw):
    kw.setdefault("seed", 0)
    return AnchorsExplainer(FunctionClassifier(fn), **kw)


async def test_good_and_great():
    exp = await explainer(needs_all("good", "great")).explain(SENTENCE)
    assert exp.data.anchor == ("good", "great")
    assert exp.data.positions == (3, 5)
    assert exp.data.label == 1
    assert exp.data.success
    assert exp.data.precision >= 0.95


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_three_word_conjunction(seed):
    text = "honestly this is not a bad film for a rainy day"
    exp = await explainer(needs_all("not", "bad", "film"), seed=seed).explain(text)
    assert exp.data.anchor == ("not", "bad", "film")


async def test_empty_anchor_when_nothing_matters():
    exp = await explainer(lambda texts: ["pos"] * len(texts)).explain(SENTENCE)
    assert exp.data.anchor == ()
    assert exp.data.coverage == 1.0
    assert exp.data.success


async def test_negative_label_is_explained_too():
    # Label 0 (not both words) is kept as long as "awful" is there and "great" is not... use a
    # classifier whose label for this text is 0 iff "bad" is kept.
    exp = await explainer(lambda ts: [int("bad" not in t.split()) for t in ts]).explain("a bad and boring film")
    assert exp.data.label == 0
    assert exp.data.anchor == ("bad",)


async def test_precision_holds_on_fresh_samples():
    e = explainer(needs_all("good", "great"))
    exp = await e.explain(SENTENCE)
    fresh = await e.estimate_precision(SENTENCE, exp.data.positions, n=1000)
    assert fresh >= 0.95
    # A rule missing a word of the conjunction fails on fresh samples.
    assert await e.estimate_precision(SENTENCE, (3,), n=1000) < 0.7


async def test_counts_samples_queries_and_cache_hits():
    e = explainer(needs_all("good", "great"))
    exp = await e.explain(SENTENCE)
    m = exp.meta
    # 12 words: at most 2**12 distinct perturbations (+ the input itself).
    assert m.queries <= 2**12 + 1
    assert m.samples + 1 == m.queries + m.cost.cache_hits
    assert m.samples > m.queries
    # Across explanations the cache answers every perturbation seen before.
    again = await e.explain(SENTENCE)
    assert again.meta.queries == 0
    assert again.data == exp.data


async def test_cache_can_be_shared_between_explainers():
    cache = QueryCache()
    clf = FunctionClassifier(needs_all("good", "great"), name="shared")
    first = await AnchorsExplainer(clf, seed=0, cache=cache).explain(SENTENCE)
    second = await AnchorsExplainer(clf, seed=0, cache=cache).explain(SENTENCE)
    assert first.meta.queries > 0 and second.meta.queries == 0


async def test_same_seed_same_explanation_whatever_the_response_order():
    base = needs_all("good", "great")
    calm = await explainer(base, seed=7, request_size=5).explain(SENTENCE)
    waiting: list[asyncio.Future] = []
    reversed_rounds = []

    async def answer_last_first():
        """Once every call of a round has arrived (the loop has nothing else to run), answer them in reverse."""
        while True:
            seen = -1
            while seen != len(waiting):
                seen = len(waiting)
                for _ in range(5):
                    await asyncio.sleep(0)
            if len(waiting) > 1:
                reversed_rounds.append(len(waiting))
            for future in reversed(waiting):
                future.set_result(None)
            waiting.clear()
            await asyncio.sleep(0)

    async def reversed_order(texts):
        future = asyncio.get_running_loop().create_future()
        waiting.append(future)
        await future
        return base(texts)

    releaser = asyncio.ensure_future(answer_last_first())
    try:
        noisy = await explainer(reversed_order, seed=7, request_size=5, max_concurrency=64).explain(SENTENCE)
    finally:
        releaser.cancel()
    assert reversed_rounds  # rounds of several calls were answered last first
    assert noisy.data == calm.data
    assert (noisy.meta.samples, noisy.meta.queries) == (calm.meta.samples, calm.meta.queries)
    other_seed = await explainer(base, seed=8).explain(SENTENCE)
    assert other_seed.data.examples_covered_true != calm.data.examples_covered_true


async def test_seed_is_recorded_when_not_given():
    exp = await AnchorsExplainer(FunctionClassifier(needs_all("good", "great"))).explain(SENTENCE)
    replay = await explainer(needs_all("good", "great"), seed=exp.meta.seed).explain(SENTENCE)
    assert replay.data == exp.data


async def test_examples_are_consistent_with_the_anchor():
    exp = await explainer(needs_all("good", "great")).explain(SENTENCE)
    assert exp.data.examples_covered_true
    for text in exp.data.examples_covered_true:
        assert "good" in text.split() and "great" in text.split()


async def test_concurrent_explanations_share_the_engine():
    e = explainer(needs_all("good", "great"))
    texts = [SENTENCE, "good and great", "a great yet good day for it"]
    results = await asyncio.gather(*(e.explain(t) for t in texts))
    assert [r.data.anchor for r in results] == [("good", "great"), ("good", "great"), ("great", "good")]


@pytest.mark.parametrize("bad", ["", "  \t ", None, 12, "?!"])
async def test_bad_text(bad):
    with pytest.raises(InvalidInputError):
        await explainer(needs_all("good")).explain(bad)


async def test_text_over_word_limit():
    with pytest.raises(InvalidInputError, match="max_words"):
        await explainer(needs_all("good"), sampler=TextSampler(max_words=5)).explain(SENTENCE)


async def test_raising_classifier_loses_nothing():
    state = {"calls": 0, "fail_at": 20}
    base = needs_all("good", "great")

    def flaky(texts):
        state["calls"] += 1
        if state["calls"] == state["fail_at"]:
            raise ConnectionError("model server went away")
        return base(texts)

    e = AnchorsExplainer(FunctionClassifier(flaky), seed=0)
    with pytest.raises(ClassifierError, match="flaky.*went away"):
        await e.explain(SENTENCE)
    cached = len(e.cache)
    assert cached > 0
    state["fail_at"] = -1
    exp = await e.explain(SENTENCE)
    reference = await explainer(base).explain(SENTENCE)
    assert exp.data == reference.data
    assert exp.meta.queries == reference.meta.queries - cached


async def test_wrong_number_of_labels():
    with pytest.raises(ClassifierError, match="returned 1 labels for"):
        await explainer(lambda texts: [1]).explain(SENTENCE)


def test_bad_configuration():
    with pytest.raises(ConfigError):
        AnchorsExplainer(lambda texts: texts)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        explainer(needs_all("good"), search=SearchParams(threshold=1.5))
    with pytest.raises(ConfigError):
        explainer(needs_all("good"), seed=-1)
    for bad in (
        {"seed": True},
        {"request_size": 0},
        {"max_concurrency": 2.5},
        {"search": {"threshold": 0.9}},
        {"n_examples": -1},
    ):
        with pytest.raises(ConfigError):
            explainer(needs_all("good"), **bad)


async def test_a_cancelled_explanation_leaves_the_explainer_working():
    calls = 0
    third_call = asyncio.Event()
    gate = asyncio.Event()

    async def gated(texts):  # the third call waits until the gate opens: the explanation is cancelled there
        nonlocal calls
        calls += 1
        if calls == 3:
            third_call.set()
            await gate.wait()
        return needs_all("good", "great")(texts)

    e = explainer(gated)
    task = asyncio.ensure_future(e.explain(SENTENCE, seed=1))
    await asyncio.wait_for(third_call.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gate.set()
    # The same explanation again needs the texts the cancelled one had in flight.
    again = await asyncio.wait_for(e.explain(SENTENCE, seed=1), 60)
    assert set(again.data.anchor) == {"good", "great"}
    assert e.engine._inflight == {}


def test_explain_sync_outside_and_inside_a_loop():
    e = explainer(needs_all("good", "great"))
    assert e.explain_sync(SENTENCE).data.anchor == ("good", "great")

    async def inside():
        return e.explain_sync(SENTENCE)

    assert asyncio.run(inside()).data.anchor == ("good", "great")


async def test_meta_records_parameters():
    exp = await explainer(needs_all("good", "great"), search=SearchParams(beam_size=2, threshold=0.9)).explain(SENTENCE)
    assert exp.meta.settings.search.beam_size == 2
    assert exp.meta.settings.search.threshold == 0.9
    assert exp.meta.settings.sampler["mask"] == "UNK"
    assert exp.meta.explainer == "AnchorsExplainer"
    assert exp.meta.classifier.startswith("function:")


@pytest.fixture(scope="module")
def text_rf():
    from benchmarks._models import train_text_rf

    model, texts, _ = train_text_rf()
    return model, texts


async def test_real_text_rf_anchors_hold_on_fresh_samples(text_rf):
    model, texts = text_rf
    e = AnchorsExplainer(FunctionClassifier(model.predict, name="rf"), seed=0)
    fresh = []
    for text in texts[:8]:
        exp = await e.explain(text)
        assert exp.data.success
        assert all(text.split().count(w) or w in text for w in exp.data.anchor)
        fresh.append(await e.estimate_precision(text, exp.data.positions, n=1000, seed=12345))
    # Each anchor is >= tau - epsilon_stop with probability >= 1 - delta; on average above tau.
    assert min(fresh) >= 0.9
    assert sum(fresh) / len(fresh) >= 0.95


async def test_verify_determinism_catches_a_model_that_changes_its_mind():
    import itertools
    import warnings

    from llm_anchors import NondeterminismWarning

    steady = explainer(needs_all("good", "great"), verify_determinism=20)
    exp = await steady.explain(SENTENCE)
    assert (exp.meta.determinism.rechecked, exp.meta.determinism.changed) == (20, 0)
    again = await explainer(needs_all("good", "great")).explain(SENTENCE)
    assert again.data == exp.data and again.meta.determinism is None  # the check never changes the explanation
    assert exp.meta.queries == again.meta.queries + 20  # the rechecks are paid queries

    flips = itertools.count()

    def moody(texts):  # every 7th answer flipped
        return [int(all(w in t.split() for w in ("good", "great"))) ^ (next(flips) % 7 == 0) for t in texts]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp = await explainer(moody, verify_determinism=50).explain(SENTENCE)
    assert exp.meta.determinism.changed > 0
    assert any(issubclass(w.category, NondeterminismWarning) for w in caught)


class _Watching(TextSampler):
    """A sampler that records whether each draw ran on the event loop's thread."""

    def __init__(self, loop_thread, **kw):
        super().__init__(**kw)
        self.loop_thread, self.on_loop = loop_thread, []

    def sample_present(self, *args, **kwargs):
        self.on_loop.append(threading.current_thread() is self.loop_thread)
        return super().sample_present(*args, **kwargs)


@pytest.mark.parametrize("kind", [AnchorsExplainer, MAnchorsExplainer])
async def test_the_search_and_the_draws_run_off_the_event_loop(kind):
    """A long input's search steps and renderings take CPU; the loop must stay free to serve signals."""
    from llm_anchors.search.drive import drive

    loop_thread = threading.current_thread()
    sampler = _Watching(loop_thread)
    clf = FunctionClassifier(lambda texts: ["pos" if "good" in t.split() else "neg" for t in texts], name="kw")
    exp = await kind(clf, sampler=sampler, seed=0).explain("a good movie with a plot and some acting")
    assert exp.data.anchor == ("good",)
    assert sampler.on_loop and not any(sampler.on_loop)  # coverage pool and every round's samples: off the loop

    steps = []

    def search():
        steps.append(threading.current_thread() is loop_thread)
        yield []
        steps.append(threading.current_thread() is loop_thread)
        return "done"

    async def answer(requests):
        return []

    assert await drive(search(), answer) == "done" and steps == [False, False]


async def test_a_sentence_anchor_is_marked_as_the_sentence_it_is():
    from llm_anchors.cli import render

    text = "The weather was mild. The striker scored twice! Fans went home."
    clf = FunctionClassifier(lambda texts: ["sport" if "scored" in t else "other" for t in texts], name="kw")
    sampler = TextSampler(unit="sentence", p_hide="uniform")
    exp = await AnchorsExplainer(clf, sampler=sampler, seed=0).explain(text)
    assert exp.data.anchor == ("The striker scored twice!",) and exp.data.positions == (1,)
    assert "The weather was mild. [The striker scored twice!] Fans went home." in render(exp)
    assert (
        exp.marked_html(lambda w: f"<b>{w}</b>")
        == "The weather was mild. <b>The striker scored twice!</b> Fans went home."
    )
    assert "each sentence outside the anchor" in exp.claim
    again = type(exp).from_json(exp.to_json())
    assert again.marked_html(lambda w: f"<b>{w}</b>") == exp.marked_html(lambda w: f"<b>{w}</b>")


ARTICLE = (
    "The weather was mild all day. Fans queued at the gates early! The striker scored twice before the break. "
    "Ticket prices were discussed later. The coach thanked the crowd."
)


def sport_if_scored(texts):
    return ["sport" if "scored" in t.split() else "other" for t in texts]


@pytest.mark.parametrize("kind", [AnchorsExplainer, MAnchorsExplainer])
async def test_a_document_is_searched_coarse_to_fine_sentences_then_the_words_inside(kind):
    from llm_anchors.cli import render

    clf = FunctionClassifier(sport_if_scored, name="kw")
    e = kind(clf, seed=0)
    exp = await e.explain(ARTICLE)
    d = exp.data
    assert d.coarse is not None and d.coarse.anchor == ("The striker scored twice before the break.",)
    assert d.coarse.positions == (2,) and ARTICLE[slice(*d.coarse.spans[0])] == d.coarse.anchor[0]
    assert d.anchor == ("scored",) and d.features[d.positions[0]] == "scored"
    assert ARTICLE[slice(*d.spans[d.positions[0]])] == "scored"
    assert "each word of the anchor's sentences and each other sentence" in exp.claim
    assert "U(0, 1)" in d.perturbation
    assert d.tested > 1  # one certifier for both levels: the words' rules took their shares after the sentences'
    assert "{The striker [scored] twice before the break.}" in render(exp)
    html = exp.marked_html(lambda w: f"<b>{w}</b>", lambda s: f"<u>{s}</u>")
    assert "<u>The striker <b>scored</b> twice before the break.</u>" in html
    again = type(exp).from_json(exp.to_json())
    assert again == exp
    fresh = await e.estimate_precision(ARTICLE, d.positions, coarse=d.coarse.positions, n=300)
    assert fresh == 1.0
    with pytest.raises(ConfigError, match="not all among"):
        await e.estimate_precision(ARTICLE, (len(d.features) - 1,))  # a word's position, at the sentences' level


async def test_a_word_rule_that_cannot_be_certified_leaves_the_sentence_anchor():
    # The label needs the whole sentence: hiding any word of it (or two) breaks it only sometimes, so no
    # short rule of words holds; the search returns the sentence, certified at its level.
    sentence = "The striker scored twice before the break."
    clf = FunctionClassifier(lambda ts: ["sport" if sentence in t else "other" for t in ts], name="whole")
    exp = await AnchorsExplainer(clf, seed=0, search=SearchParams(max_anchor_size=2)).explain(ARTICLE)
    assert exp.data.success and exp.data.coarse is None
    assert exp.data.anchor == (sentence,) and "each sentence outside" in exp.claim


async def test_pinned_parts_of_an_input_stay_in_every_perturbation():
    seen = []

    def clf(texts):
        seen.extend(texts)
        return needs_all("good")(texts)

    x = {"text": "Subject: a good movie\nthe plot was fine and the cast was good", "pinned": ["Subject: a good movie"]}
    exp = await explainer(clf).explain(x)
    assert exp.data.anchor == ()  # the pinned "good" is in every perturbation: no word is needed
    assert all(t.startswith("Subject: a good movie\n") for t in seen)
    assert exp.data.query == x["text"] and "Subject" not in exp.data.features


async def test_an_empty_finer_anchor_leaves_the_sentence_anchor():
    # Any one of the 40 words of the second sentence keeps the label: hidden whole, the sentence is needed;
    # its words hidden one by one, a few stay in almost every sample, so the empty rule of words would pass.
    goals = " ".join(f"goal{i}" for i in range(40))
    text = f"It rained all day. Then {goals}. The crowd went home. Tickets were cheap."
    clf = FunctionClassifier(lambda ts: ["sport" if "goal" in t else "other" for t in ts], name="any-goal")
    # Where the word search finds one goal word it keeps it (a finer anchor); where it finds only the empty
    # rule, the sentence is the anchor: never an empty anchor for a label that needs the sentence.
    found = [(await MAnchorsExplainer(clf, seed=seed).explain(text)).data for seed in range(4)]
    for data in found:
        assert data.success and data.anchor != ()
        assert data.anchor == (f"Then {goals}.",) if data.coarse is None else data.anchor[0].startswith("goal")
    assert any(data.coarse is None for data in found)
