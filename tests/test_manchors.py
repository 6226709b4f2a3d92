import math
from dataclasses import fields, replace

import pytest

from llm_anchors import (
    AnchorsExplainer,
    ConfigError,
    Explanation,
    FunctionClassifier,
    MAnchorsExplainer,
    SearchParams,
)
from llm_anchors.explain import Stage
from llm_anchors.propose import GrowthParams, GuidedParams, MemoryParams
from llm_anchors.samplers import SentenceEmbedder, TextInstance
from llm_anchors.search import fewest_agreeing
from tests.conftest import needs_all

STREAM = [
    "this is a good and great movie with a fine plot overall",
    "this is a good and great film with a fine cast overall",
    "the movie was good and the acting was great , truly",
    "the film was good and the music was great , honestly",
    "this is a good and great show with a fine script overall",
    "the story was good and the ending was great , truly",
    "this is a good and great drama with a fine score overall",
    "the plot was good and the cast was great , really",
]


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder()


def clf():
    return FunctionClassifier(needs_all("good", "great"), name="good-and-great")


def manchors(embedder, **kw):
    """MAnchors on ``clf()``; a `MemoryParams` field among ``kw`` goes into its ``memory``."""
    memory = {k: kw.pop(k) for k in [k for k in kw if k in {f.name for f in fields(MemoryParams)}]}
    return MAnchorsExplainer(clf(), seed=0, embedder=embedder, **{"memory": MemoryParams(**memory), **kw})


STRATEGIES = ["guided", "paper"]


def test_ht_maps_rule_words_onto_the_same_words(embedder):
    m = manchors(embedder)
    instance = TextInstance.parse("the plot was good and the acting great")
    assert [instance.words[p] for p in m.horizontal(["good", "great"], instance)] == ["good", "great"]


def test_ht_maps_onto_the_most_similar_unused_word(embedder):
    m = manchors(embedder)
    instance = TextInstance.parse("a horrible and dull film")
    assert [instance.words[p] for p in m.horizontal(["terrible", "boring"], instance)] == ["horrible", "dull"]
    # Each word of the new input is used once.
    instance = TextInstance.parse("a horrible film")
    assert len(set(m.horizontal(["terrible", "awful"], instance))) == 2


async def test_paper_miss_then_hit(embedder):
    m = manchors(embedder, strategy="paper")
    first = await m.explain(STREAM[0])
    assert first.meta.memory_hit is False and len(m.store) == 1
    entry = m.store.entries[0]
    assert set(entry.rule_features) <= {"good", "great"} and entry.rule_positions
    second = await m.explain(STREAM[1])
    assert second.meta.memory_hit is True
    assert second.meta.memory.similarity >= 0.6
    assert second.meta.memory.source == STREAM[0]
    assert set(second.meta.memory.ht_rule) <= {"good", "great"}
    assert second.data.anchor == ("good", "great")
    assert len(m.store) == 1  # hits are not stored (Algorithm 1)
    assert AnchorsExplainer.name != second.meta.explainer
    assert "prune" in second.meta.stages and "memory" not in second.meta.stages


async def test_paper_pruning_weighs_every_word_of_the_ht_rule_against_the_rule_without_it(embedder):
    # "good" is needed (the label needs both words): kept. A one-word rule is weighed against the empty
    # rule: a word the input needs not is dropped, and VT starts from the empty rule (plain Anchors).
    from llm_anchors.explain import paper

    async def pruned(m, positions):
        run = m._start("the plot was good and the cast was great", 0)
        await m._label_target(run)
        return await paper._prune(m, m.memory_proposer, run, positions)

    assert await pruned(manchors(embedder, strategy="paper"), [3]) == [3]
    always = FunctionClassifier(lambda texts: ["pos"] * len(texts), name="always")
    assert await pruned(MAnchorsExplainer(always, seed=0, embedder=embedder, strategy="paper"), [3]) == []
    # A margin keeps only the words whose removal costs more precision than it (here 0.5 → 0.25).
    m = manchors(embedder, strategy="paper", prune_margin=0.4)
    assert await pruned(m, [3]) == [] and m.settings().manchors.memory.prune_margin == 0.4


async def test_guided_miss_then_hit_certifies_the_remembered_anchor(embedder):
    m = manchors(embedder)
    first = await m.explain(STREAM[0])
    assert first.meta.memory_hit is False and len(m.store) == 1
    entry = m.store.entries[0]
    assert entry.anchor_features == first.data.anchor == ("good", "great") and entry.anchor_keys == ("good", "great")
    second = await m.explain(STREAM[1])
    assert second.meta.memory_hit is True and second.meta.memory.source == STREAM[0]
    assert second.meta.memory.proposals[0] == ("good", "great")
    assert second.data.anchor == ("good", "great") and second.data.success
    # No KL-LUCB round: the proposal is certified, and a shorter rule looked for greedily.
    assert "memory" in second.meta.stages and not any(s.startswith("round") for s in second.meta.stages)
    plain = await AnchorsExplainer(clf(), seed=0).explain(STREAM[1])
    assert second.meta.samples < plain.meta.samples / 2
    assert len(m.store) == 2  # hits are remembered too


async def test_guided_wrong_proposal_is_rejected_and_the_search_goes_on(embedder):
    m = MAnchorsExplainer(FunctionClassifier(needs_all("great"), name="great"), seed=0, embedder=embedder)
    await m.explain("a great movie with a good plot")
    assert m.store.entries[0].anchor_features == ("great",)
    # Same label, similar sentence, but the word that anchored before is absent: HT maps it elsewhere.
    exp = await m.explain("a great film with a fine plot")
    assert exp.meta.memory_hit and exp.data.anchor == ("great",)
    m2 = MAnchorsExplainer(  # seed 1: the record's seeded coin asks the memory on this input (0 keeps it as control)
        FunctionClassifier(needs_all("plot"), name="plot"), seed=1, embedder=embedder
    )
    m2.store.add(replace(m.store.entries[0], label=1), m2.features.embed([TextInstance.parse(STREAM[0])])[0])
    exp = await m2.explain("a great movie with a good plot")
    assert exp.meta.memory_hit and ("great",) in exp.meta.memory.proposals
    # The wrong proposal costs at most a probe (the root's samples that keep "great" count towards it).
    assert exp.data.anchor == ("plot",) and exp.data.success
    assert exp.meta.stages.get("memory-probe", Stage()).samples + exp.meta.stages.get("memory", Stage()).samples <= 25


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_stream_costs_at_most_half_the_samples_and_keeps_precision(embedder, strategy):
    plain = AnchorsExplainer(clf(), seed=0)
    m = manchors(embedder, strategy=strategy)
    a = [await plain.explain(t) for t in STREAM]
    b = await m.explain_many(STREAM)
    assert [x.data.query for x in b] == STREAM
    samples_a = sum(x.meta.samples for x in a)
    samples_b = sum(x.meta.samples for x in b)
    assert samples_b <= samples_a / 2, (samples_a, samples_b)
    assert sum(x.meta.memory_hit for x in b) >= len(STREAM) // 2

    async def holds(explainer, exps):
        fresh = [await explainer.estimate_precision(x.data.query, x.data.positions, n=1000, seed=5) for x in exps]
        return sum(p >= 0.95 for p in fresh)

    assert await holds(m, b) >= await holds(plain, a)


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_save_load_round_trip_gives_identical_later_explanations(embedder, tmp_path, strategy):
    m = manchors(embedder, strategy=strategy)
    await m.explain_many(STREAM[:3])
    m.save(tmp_path / "memory")
    again = manchors(embedder, strategy=strategy)
    again.load(tmp_path / "memory")
    assert again.store.entries == m.store.entries
    for text in STREAM[3:5]:
        x, y = await m.explain(text), await again.explain(text)
        assert x.data == y.data and x.meta.samples == y.meta.samples and x.meta.memory_hit == y.meta.memory_hit


async def test_memory_of_another_classifier_is_refused(embedder, tmp_path):
    m = manchors(embedder)
    await m.explain(STREAM[0])
    m.save(tmp_path / "memory")
    other = MAnchorsExplainer(FunctionClassifier(needs_all("good"), name="other"), embedder=embedder)
    with pytest.raises(ConfigError, match="another model"):
        other.load(tmp_path / "memory")


async def test_explain_many_with_concurrency_and_progress(embedder):
    m = manchors(embedder)
    seen = []
    out = await m.explain_many(STREAM[:5], concurrent_inputs=3, progress=seen.append)
    assert [x.data.query for x in out] == STREAM[:5]
    assert [(p.done, p.total) for p in seen] == [(i, 5) for i in range(1, 6)]
    assert {p.explanation.data.query for p in seen} == set(STREAM[:5])
    assert all(x.data.anchor == ("good", "great") or x.data.anchor == ("great", "good") for x in out)
    with pytest.raises(ConfigError, match="concurrent_inputs"):
        await m.explain_many(STREAM, concurrent_inputs=0)


def test_every_async_method_has_a_sync_twin_on_one_loop(embedder):
    with manchors(embedder) as m:
        many = m.explain_many_sync(STREAM[:2])
        one = m.explain_sync(STREAM[2])
        fresh = m.estimate_precision_sync(STREAM[2], one.data.positions, n=50, seed=3)
        loop = m._sync._loop
        assert m.explain_sync(STREAM[3]).meta.memory_hit and m._sync._loop is loop
    assert [e.data.query for e in many] == STREAM[:2] and fresh == 1.0
    assert m._sync._loop is None  # closed with the block


async def test_growth_settings_reach_the_search_and_the_record(embedder):
    settings, growth = GuidedParams(probe=10), GrowthParams(lookahead=None, parent_samples=40, per_feature=2)
    m = manchors(embedder, guided=settings, growth=growth, search=SearchParams(patience=6.0))
    exp = await m.explain(STREAM[0])
    assert set(exp.data.anchor) == {"good", "great"} and exp.data.success
    memory, search = exp.meta.settings.manchors, exp.meta.settings.search
    assert memory.guided == settings and memory.growth == growth and search.patience == 6.0  # recorded whole
    again = Explanation.from_json(exp.to_json()).meta.settings.manchors
    assert again.guided == settings and again.growth == growth
    # Certified on at least the fewest all-agreeing fresh samples that could certify a rule at all of δ.
    assert exp.data.certified_samples >= fewest_agreeing(math.log(1 / 0.1), 0.9) == 22


async def test_the_memory_is_on_by_default_and_off_the_guided_search_grows_alone(embedder):
    on = MAnchorsExplainer(clf(), seed=0, embedder=embedder)  # as it comes: it looks up, and remembers
    assert (await on.explain(STREAM[0])).meta.settings.manchors.memory is not None and len(on.store) == 1
    m = MAnchorsExplainer(clf(), seed=0, embedder=embedder, memory=None)
    first, second = await m.explain_many(STREAM[:2])
    assert first.meta.memory_hit is None and second.meta.memory_hit is None
    assert m.memory is None and m.memory_proposer is None and m.repeats is None and m.features is None  # none exists
    assert first.meta.settings.manchors.memory is None and first.data.success
    assert all(s == "root" or s.startswith("growth") for s in first.meta.stages)  # growth alone


def test_bad_settings(embedder):
    for bad in (
        {"tau_mid": 0},
        {"tau_sim": 2},
        {"strategy": "fast"},
        {"k_nearest": -1},
        {"search": "strict"},
        {"max_proposals": -1},
        {"memory": "yes"},
        {"strategy": "paper", "memory": None},
        {"strategy": "paper", "tau_first": 0.5},  # "paper" refuses what it would ignore
        {"strategy": "paper", "growth": GrowthParams(lookahead=0.9)},
        {"strategy": "paper", "proposers": [lambda instance, label: None]},
        {"prune_margin": 0.3},  # and "guided" the paper's pruning
    ):
        with pytest.raises(ConfigError):
            manchors(embedder, **bad)


async def test_sentence_pooling_and_its_memory_are_distinct(embedder, tmp_path):
    sentence = SentenceEmbedder(pooling="sentence")
    vectors = sentence.embed(STREAM[:2])
    assert vectors.shape == (2, 384) and abs(float(vectors[0] @ vectors[0]) - 1) < 1e-5
    assert sentence.identity != embedder.identity
    m = manchors(sentence)
    await m.explain(STREAM[0])
    m.save(tmp_path / "memory")
    with pytest.raises(ConfigError, match="built with"):
        manchors(embedder).load(tmp_path / "memory")
    with pytest.raises(ConfigError):
        SentenceEmbedder(pooling="max")


# -- exact repeats ---------------------------------------------------------------


async def test_an_exact_repeat_is_the_explanation_already_made_at_no_query(embedder):
    from llm_anchors.extend import Charge

    m = manchors(embedder)
    first = await m.explain(STREAM[0])
    again = await m.explain(STREAM[0], seed=5)  # whatever the seed: the explanation already certified
    assert first.meta.queries > 0 and not first.meta.memory.repeat
    assert again.data == first.data and again.claim == first.claim and again.meta.seed == first.meta.seed
    assert (again.meta.queries, again.meta.samples, again.meta.cost.settled) == (0, 0, Charge())
    assert again.meta.memory_hit and again.meta.memory.repeat and again.meta.stages == {}
    assert Explanation.from_json(again.to_json()) == again
    other = await m.explain(STREAM[1])  # not a repeat: another text
    assert other.meta.queries > 0 and not other.meta.memory.repeat
    off = MAnchorsExplainer(clf(), seed=0, embedder=embedder, memory=None)
    await off.explain(STREAM[0])
    searched = await off.explain(STREAM[0])  # without the memory it searches again (its labels cached)
    assert searched.meta.memory is None or not searched.meta.memory.repeat


async def test_a_repeat_in_flight_waits_for_the_first_and_settings_that_shape_it_make_it_another(embedder):
    m = manchors(embedder)
    a, b, c = await m.explain_many([STREAM[2], STREAM[2], STREAM[3]], concurrent_inputs=3)
    assert b.data == a.data and b.meta.queries == 0 and b.meta.memory.repeat and c.meta.queries > 0
    stricter = manchors(embedder, search=SearchParams(threshold=0.99))
    stricter.recall([(STREAM[2], a)])  # made under other settings: no repeat of it here
    assert (await stricter.explain(STREAM[2])).meta.queries > 0


async def test_a_run_pays_for_each_distinct_text_once_even_when_resumed(tmp_path, embedder):
    from llm_anchors.run import ResultsFile, explain_resumable, read_results

    texts = [STREAM[0], STREAM[1], STREAM[0], STREAM[4], STREAM[1], STREAM[0]]
    with ResultsFile(tmp_path / "r.jsonl") as results:
        async with manchors(embedder) as m:
            await explain_resumable(m, texts[:4], results)
    with ResultsFile(tmp_path / "r.jsonl") as results:  # a new process: the file's explanations answer repeats
        async with manchors(embedder) as m:
            await explain_resumable(m, texts, results)
    records = read_results(tmp_path / "r.jsonl")
    paid = {i: r["explanation"]["meta"]["queries"] for i, r in records.items()}
    assert [i for i in paid if paid[i]] == [0, 1, 3]  # each distinct text once
    assert all(records[i]["explanation"]["meta"]["memory"]["repeat"] for i in (2, 4, 5))
    assert records[5]["explanation"]["data"] == records[0]["explanation"]["data"]


def test_every_memory_setting_is_recorded_whole(embedder):
    from llm_anchors.propose import RecordParams

    m = manchors(embedder, record=RecordParams(explore=0.2), max_repeats=5, tau_first=0.5)
    settings = m.settings().manchors
    recorded = settings.memory
    assert recorded == MemoryParams(tau_sim=0.4, record=RecordParams(explore=0.2), max_repeats=5, tau_first=0.5)
    assert settings.index == {"ef": 64, "m": 16, "per_key": 64}
    with pytest.raises(ConfigError):
        manchors(embedder, max_repeats=-1)


async def test_an_input_left_to_growth_by_the_record_names_no_proposal(embedder):
    m = manchors(embedder)
    await m.explain(STREAM[0])
    exps = [await m.explain(text) for text in STREAM[1:]]
    control = [e for e in exps if e.meta.memory.asked is False]
    asked = [e for e in exps if e.meta.memory.asked]
    assert control and asked  # half of each while the record warms up
    assert all(e.meta.memory.proposals == () and not e.meta.memory.certified for e in control)
    assert all(e.meta.memory.proposals for e in asked)


async def test_a_users_proposer_runs_inside_the_engine_and_is_recorded(embedder):
    """The guide's lexicon: its rule is judged like any other (paid through the engine, counted under its
    name among the explanation's queries), and the settings name the proposer."""
    from llm_anchors.extend import Proposals

    def lexicon(instance, label):
        cues = [i for i, word in enumerate(instance.features) if word in {"good", "great"}]
        return Proposals("lexicon", [frozenset(cues)]) if cues else None

    text = "a good and great film with a plot that runs long"
    helped = MAnchorsExplainer(clf(), seed=0, embedder=embedder, memory=None, proposers=[lexicon])
    alone = MAnchorsExplainer(clf(), seed=0, embedder=embedder, memory=None)
    told, grown = await helped.explain(text), await alone.explain(text)
    assert sorted(told.data.anchor) == sorted(grown.data.anchor) == ["good", "great"]
    assert told.meta.stages["lexicon"].queries > 0 and "lexicon" not in grown.meta.stages
    assert sum(stage.queries for stage in told.meta.stages.values()) + 1 == told.meta.queries  # + the input
    assert told.meta.settings.manchors.proposers == (f"{__name__}.{lexicon.__qualname__}",)
    with pytest.raises(ConfigError, match="callables"):
        MAnchorsExplainer(clf(), embedder=embedder, proposers=[Proposals("x", [])])
    wrong = MAnchorsExplainer(clf(), embedder=embedder, memory=None, proposers=[lambda instance, label: [0, 1]])
    with pytest.raises(ConfigError, match="not a Proposer"):
        await wrong.explain(text)
    assert wrong.engine.billed_calls == 1  # the input's own label only: refused before its search sampled


def test_a_store_made_for_another_model_is_refused_at_its_one_door(embedder):
    from llm_anchors.memory import RuleMemory

    m = manchors(embedder)
    dim, embedder_id, scope = m.memory_proposer.identity
    with pytest.raises(ConfigError, match="made for"):
        m.memory_proposer.use(RuleMemory(dim, embedder_id, "function:another-model"))
    with pytest.raises(ConfigError, match="made for"):
        MAnchorsExplainer(clf(), embedder=embedder, memory_store=RuleMemory(dim + 1, embedder_id, scope))
    own = RuleMemory(dim, embedder_id, scope)
    m.memory_proposer.use(own)
    assert m.store is own


async def test_a_text_explained_again_draws_afresh_when_its_claim_or_the_memory_differs(tmp_path):
    """The input's seed is derived from what decides its draws (issue 68): the settings (the claim among
    them) and the rules the memory proposes, so a remembered anchor is never re-judged on the masks that
    chose it; the same everything draws the same."""
    text = STREAM[0]

    async def explained(certify="default", load=None, save=None):
        async with MAnchorsExplainer(clf(), seed=7, search=SearchParams(certify=certify)) as explainer:
            if load is not None:
                explainer.load(load)
            exp = await explainer.explain(text)
            if save is not None:
                explainer.save(save)
        return exp

    first = await explained(save=tmp_path / "memory")
    assert (await explained()).meta.input_seed == first.meta.input_seed  # determinism
    assert (await explained(certify="strict")).meta.input_seed != first.meta.input_seed
    again = await explained(load=tmp_path / "memory")  # a second explainer sharing the memory: not a repeat
    assert again.meta.memory is not None and not again.meta.memory.repeat
    assert again.meta.input_seed != first.meta.input_seed
