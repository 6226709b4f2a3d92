import asyncio
import random
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


def thrown_by_unk(texts):
    """A model that knows "good" and is thrown by a mask: the label is 1 with "good" and no UNK."""
    return [int("good" in t.split() and "UNK" not in t) for t in texts]


@pytest.mark.parametrize("perturbation", ["unk", "delete", "similar"])
async def test_every_perturbation_explains_and_is_named_in_the_claim_and_settings(perturbation):
    exp = await explainer(needs_all("good", "great"), perturbation=perturbation).explain(SENTENCE)
    assert exp.data.anchor == ("good", "great") and exp.data.success
    assert exp.meta.settings.sampler["perturbation"] == perturbation
    said = {"unk": "replaced by 'UNK'", "delete": "deleted", "similar": "nearest words"}[perturbation]
    assert said in exp.claim and said in exp.data.perturbation


async def test_a_second_opinion_measures_the_same_rule_under_another_perturbation():
    e = explainer(thrown_by_unk)
    text = "a good and pleasant film"
    under_unk = await e.estimate_precision(text, (1,), n=300)
    under_delete = await e.estimate_precision(text, (1,), perturbation="delete", n=300)
    assert under_unk < 0.2 and under_delete == 1.0  # the mask, not the words, moved the label
    assert await e.estimate_coverage(text, (1,)) == pytest.approx(0.5, abs=0.02)
    for estimate in (e.estimate_precision, e.estimate_coverage):
        with pytest.raises(ConfigError, match="n must be an integer >= 1"):
            await estimate(text, (1,), n=0)  # no samples: refused, not a nan
    with pytest.raises(ConfigError, match="not beside it"):
        explainer(thrown_by_unk, sampler=TextSampler(), perturbation="delete")


def good_and_long(texts):
    """A model that needs "good" and at least 4 words: a mask keeps the length, deletion does not."""
    return [int("good" in t.split() and len(t.split()) >= 4) for t in texts]


async def test_an_explainer_asked_for_a_second_opinion_records_it_paid_and_apart_from_the_search():
    from llm_anchors import Explanation
    from llm_anchors.cli import render
    from llm_anchors.explain import SecondOpinion

    text = "a good and pleasant film"
    plain = await explainer(good_and_long).explain(text)
    asked = await explainer(good_and_long, second_opinion=SecondOpinion("delete", samples=300)).explain(text)
    assert plain.data.anchor == ("good",) and plain.data.success
    assert asked.data.anchor == plain.data.anchor and asked.data.precision == plain.data.precision  # same search
    o = asked.data.second_opinion
    assert o is not None and o.perturbation == "delete" and o.samples == 300 and "deleted" in o.perturbed_as
    assert o.precision is not None and o.interval is not None and plain.data.second_opinion is None
    assert 0.2 < o.precision < 0.45  # ≥ 3 of the 4 others kept: 5/16
    assert 0.2 < o.interval[0] < o.precision < o.interval[1] < 0.5  # a 95% interval of 300 samples
    stage = asked.meta.stages["second opinion"]
    assert stage.samples == 300 and asked.meta.samples == plain.meta.samples + 300
    assert asked.meta.queries == plain.meta.queries + stage.queries and stage.queries > 0
    assert asked.meta.settings.second_opinion == SecondOpinion("delete", 300)
    assert Explanation.from_json(asked.to_json()) == asked
    assert f"2nd opinion {o.precision:.3f}  (95% interval {o.interval[0]:.3f}–" in render(asked)
    assert "2nd opinion" not in render(plain)
    for strategy in ("guided", "paper"):  # MAnchors' searches, memory hit or not, ask it as well
        clf = FunctionClassifier(good_and_long)
        m = MAnchorsExplainer(clf, seed=0, strategy=strategy, second_opinion=SecondOpinion("delete", samples=300))
        first, second = [await m.explain(t) for t in (text, "a good and lovely film")]
        assert second.meta.memory_hit and all(e.data.second_opinion is not None for e in (first, second))
    with pytest.raises(ConfigError, match="this explainer's own"):
        explainer(good_and_long, second_opinion=SecondOpinion("unk"))
    with pytest.raises(ConfigError, match="perturbation must be one of"):
        SecondOpinion("garble")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="samples must be an integer"):
        SecondOpinion("delete", samples=0)


async def test_a_second_opinion_the_cap_refuses_leaves_the_anchor_and_marks_the_cap():
    from llm_anchors import Budget, BudgetExceeded, Explanation
    from llm_anchors.cli import render
    from llm_anchors.explain import SecondOpinion

    text = "a good and pleasant film"
    plain = await explainer(good_and_long).explain(text)
    second = SecondOpinion("delete", samples=300)
    cap = lambda: Budget(max_queries=plain.meta.queries + 5)  # noqa: E731  (the search fits; the opinion not)
    exp = await explainer(good_and_long, second_opinion=second, budget=cap(), on_budget="return").explain(text)
    assert exp.data.anchor == plain.data.anchor and exp.meta.budget_exhausted
    o = exp.data.second_opinion
    assert o is not None and o.precision is None and o.interval is None and o.missing.startswith("the cap refused it")
    assert "2nd opinion none under delete: the cap refused it" in render(exp)
    assert Explanation.from_json(exp.to_json()) == exp
    with pytest.raises(BudgetExceeded):
        await explainer(good_and_long, second_opinion=second, budget=cap()).explain(text)


def test_the_memory_is_kept_per_perturbation():
    clf = FunctionClassifier(needs_all("good"), name="kw")
    unk, delete = (MAnchorsExplainer(clf, perturbation=p) for p in ("unk", "delete"))
    scope = unk.memory_proposer.scope
    assert scope != delete.memory_proposer.scope and scope.endswith("perturbation:unk")
    assert unk.store.scope == scope and unk.memory_proposer.identity[2] == scope


def fill_or_sentiment(prompt: str) -> str:
    """A fake LLM: the blank's word ("superb") when asked to fill one, else the review's sentiment."""
    if prompt.startswith("Fill in the blank"):
        return "superb"
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words else "negative"


async def test_infill_asks_the_filler_once_per_content_word_and_reports_its_cost_apart():
    from llm_anchors import Budget, LLMClassifier
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
    from llm_anchors.extend import FREE
    from tests.fault_server import FaultServer

    text = "a good and pleasant film overall"
    async with FaultServer(answer=fill_or_sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "m", endpoint="completions", max_request_size=8)
        clf = LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"], price=FREE)
        async with AnchorsExplainer(clf, seed=0, perturbation="infill", budget=Budget(max_queries=10_000)) as e:
            exp = await e.explain(text)
            fills = [p for p in server.prompts if p.startswith("Fill in the blank")]
            assert sorted(f.split("Text: ")[-1].split("\n")[0] for f in fills) == sorted(
                text.replace(w, "___") for w in ("good", "pleasant", "film", "overall")
            )  # one blank per content word, stop words left to the mask, each asked once
            assert exp.data.anchor == ("good",) and exp.meta.infill is not None
            assert exp.meta.infill.settled.queries == 4 and exp.meta.queries == len(server.prompts) - 4
            assert "filler model" in exp.claim
            assert e.budget.settled.queries == exp.meta.queries + 4  # both reserve against the one cap
            served = server.prompts_served
            again = await e.explain(text)  # the pool is cached: the same fills cost nothing again
            assert again.meta.infill.settled.queries == 0 and server.prompts_served == served
    with pytest.raises(ConfigError, match="infill needs a filler"):
        explainer(needs_all("good"), perturbation="infill")
    with pytest.raises(ConfigError, match="infill needs a filler"):  # a second opinion's filler: refused up front
        from llm_anchors.explain import SecondOpinion

        explainer(needs_all("good"), second_opinion=SecondOpinion("infill"))


async def test_a_cap_that_refuses_the_finer_level_s_fills_leaves_the_sentence_anchor():
    from decimal import Decimal

    from llm_anchors import Budget, BudgetExceeded
    from llm_anchors.extend import Charge, MockBackend
    from llm_anchors.samplers import Filler

    class DearFiller(Filler):
        async def quote(self, texts):  # every fill would cost more than the whole cap
            return Charge(len(texts), usd=Decimal(100))

    filler = DearFiller(MockBackend(lambda prompt: "superb"))
    sampler = TextSampler(perturbation="infill", filler=filler)
    clf = FunctionClassifier(sport_if_scored, name="kw")
    refused = AnchorsExplainer(clf, seed=0, sampler=sampler, budget=Budget(max_usd=1), on_budget="return")
    exp = await refused.explain(ARTICLE)  # the sentences ask the filler nothing; their words would
    assert exp.meta.budget_exhausted and exp.data.success and exp.data.coarse is None
    assert exp.data.anchor == ("The striker scored twice before the break.",)
    assert exp.meta.infill is not None and exp.meta.infill.settled.queries == 0
    raising = AnchorsExplainer(clf, seed=0, sampler=sampler, budget=Budget(max_usd=1))
    with pytest.raises(BudgetExceeded):
        await raising.explain(ARTICLE)


def test_the_default_filler_is_priced_and_counted_as_the_explained_model():
    from decimal import Decimal

    from llm_anchors import LLMClassifier
    from llm_anchors.extend import MockBackend, Price

    price = Price(input=Decimal(1), output=Decimal(2))
    clf = LLMClassifier(MockBackend(lambda p: "positive"), "Review: {text}\nSentiment:", ["negative", "positive"],
                        price=price)  # fmt: skip
    e = AnchorsExplainer(clf, perturbation="infill")
    (engine,) = e._fillers.engines.values()
    assert engine.classifier.price == clf.price and engine.classifier.token_counter is clf.token_counter
    assert not hasattr(engine, "budget") and engine.cache is e.cache  # the cap travels with each explanation


@pytest.mark.parametrize("explainer_kind", [AnchorsExplainer, MAnchorsExplainer])
async def test_the_precision_shown_is_that_of_the_samples_that_certified_the_anchor(explainer_kind):
    """It pooled the samples that chose the rule with those that certified it: 0.03-0.09 too high at the edge."""
    noisy = random.Random(7)

    def mostly_good(texts):  # "good" holds the label 96% of the time: near τ, where pooling shows
        return [int("good" in t.split() and noisy.random() < 0.96) for t in texts]

    shown = 0
    for seed in range(6):
        clf = FunctionClassifier(mostly_good)
        exp = await explainer_kind(clf, seed=seed).explain("a good film with a plot and some actors in it")
        d = exp.data
        if not d.certified_samples:
            continue
        shown += 1
        kept = d.precision * d.certified_samples
        assert abs(kept - round(kept)) < 1e-9  # a share of the certifying samples
        assert d.precision_bounds[0] <= d.precision <= d.precision_bounds[1]
    assert shown >= 3


async def test_a_document_whose_word_level_fails_counts_every_rule_that_shared_delta():
    """The sentence anchor stands, and its claim counts the word level's rules too (it said 2 of 13)."""
    from llm_anchors import TextSampler

    words = [f"w{i}" for i in range(30)]
    document = " ".join(words) + ". The weather was mild today. Nothing else happened here."

    def most_of_the_first_sentence(texts):  # no ten of its words hold the label: the word level fails
        return [int(sum(w in t.split() for w in words) >= 25) for t in texts]

    clf = FunctionClassifier(most_of_the_first_sentence, name="m")
    sentences = await AnchorsExplainer(clf, seed=0, sampler=TextSampler(unit="sentence")).explain(document)
    both = await AnchorsExplainer(clf, seed=0).explain(document)
    assert both.data.anchor == sentences.data.anchor and both.data.coarse is None and both.data.success
    assert "round-1" in both.meta.stages and both.data.tested > sentences.data.tested  # the words' rules counted
    assert f"δ shared among the {both.data.tested:,} rules tested" in both.claim


async def test_two_inputs_of_one_length_never_draw_the_same_masks():
    seen: dict[str, list[tuple[bool, ...]]] = {}
    texts = ["a good and great film here", "a dull and boring plot there"]  # six words each

    def masks(batch):
        for t in batch:
            for source in texts:
                words = source.split()
                said = t.split()
                if len(said) == len(words) and all(s in (w, "UNK") for s, w in zip(said, words, strict=True)):
                    seen.setdefault(source, []).append(tuple(s == "UNK" for s in said))
        return [int("good" in t.split()) for t in batch]

    async with AnchorsExplainer(FunctionClassifier(masks, name="masks"), seed=0) as explainer:
        first, second = [await explainer.explain(t) for t in texts]
    assert first.meta.seed == second.meta.seed == 0 and first.meta.input_seed != second.meta.input_seed
    assert "SeedSequence" in first.meta.seeding
    a, b = seen[texts[0]][1:41], seen[texts[1]][1:41]  # the first forty perturbations of each
    assert len(a) == len(b) == 40 and a != b


async def test_the_same_inputs_give_the_same_explanations_in_any_order_they_finish():
    import random

    texts = [f"a good and great film number {i} with a plot" for i in range(6)] + ["a dull film", "a good one"]

    async def slow(batch):  # answers arrive in another order every time
        await asyncio.sleep(random.random() / 50)
        return needs_all("good", "great")(batch)

    def shape(e):  # which input pays for a text both ask depends on timing (the cache): not its queries
        return (e.data.anchor, e.data.precision, e.data.coverage, e.meta.samples, e.meta.input_seed)

    async with AnchorsExplainer(FunctionClassifier(needs_all("good", "great"), name="g"), seed=3) as one:
        alone = [await one.explain(t) for t in reversed(texts)][::-1]
    async with AnchorsExplainer(FunctionClassifier(slow, name="g"), seed=3, max_concurrency=4) as many:
        together = await many.explain_many(texts, concurrent_inputs=4)
    assert [shape(e) for e in together] == [shape(e) for e in alone]
    assert sum(e.meta.queries for e in together) == sum(e.meta.queries for e in alone)  # each text paid once
