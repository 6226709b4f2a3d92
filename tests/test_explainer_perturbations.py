"""Each perturbation, a second opinion and infill's filler; certificates on documents; draws that never
depend on order."""

import asyncio
import random

import pytest

from llm_anchors import (
    AnchorsExplainer,
    ConfigError,
    FunctionClassifier,
    MAnchorsExplainer,
    TextSampler,
)
from tests.conftest import needs_all
from tests.test_explainer import ARTICLE, SENTENCE, explainer, sport_if_scored


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
