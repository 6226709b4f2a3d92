"""The proxy: a surrogate learned from the model's labels, the proxy's search, and a classifier proxy."""

import json
import math

import numpy as np
import pytest

from llm_anchors import Explanation, FunctionClassifier, MAnchorsExplainer
from llm_anchors.propose import Surrogate, proxy_search
from llm_anchors.samplers import SentenceEmbedder
from llm_anchors.search import Samples, fewest_agreeing


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder()


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


def drive(search, proxy_labels, seed=0):
    rng = np.random.default_rng(seed)
    try:
        requests = next(search)
        while True:
            answers = []
            for r in requests:
                present = rng.random((r.n, 5)) >= 0.5
                present[:, sorted(r.rule)] = True
                answers.append(Samples(present, proxy_labels(present)))
            requests = search.send(answers)
    except StopIteration as stop:
        return stop.value


def test_the_proxy_search_ranks_shortest_then_most_precise():
    proposals = drive(proxy_search(5, threshold=0.9, max_size=5, max_proposals=3), lambda p: kept_by(p).astype(float))
    assert [set(p.rule) for p in proposals[:2]] in ([{1}, {3}], [{3}, {1}])
    assert all(p.precision >= 0.9 for p in proposals)


def test_the_proxy_search_takes_probabilities_and_stops_at_its_size():
    proposals = drive(proxy_search(5, threshold=0.99, max_size=1), lambda p: np.full(len(p), 0.5))
    assert proposals == []


def needs_good(texts):
    return ["pos" if "good" in t.split() else "neg" for t in texts]


async def test_a_classifier_proxy_searches_on_its_own_queries_and_the_model_certifies(embedder):
    proxy = FunctionClassifier(needs_good, name="proxy-good")
    model = FunctionClassifier(needs_good, name="model-good")
    m = MAnchorsExplainer(model, proxy=proxy, seed=0, embedder=embedder)
    exp = await m.explain("a good and fine movie")
    assert exp.data.anchor == ("good",) and exp.data.success
    assert exp.meta.proxy.kind == "function:proxy-good" and exp.meta.proxy.certified
    assert exp.meta.proxy.proposals[0] == ("good",)
    assert exp.meta.proxy.queries > 0 and exp.meta.proxy.samples >= exp.meta.proxy.queries
    # The model paid only for the root, the probe and the certification: never for the proxy's search.
    assert set(exp.meta.stages) <= {"root", "proxy-probe", "proxy"}
    assert exp.meta.samples < exp.meta.proxy.samples
    assert exp.data.certified_samples >= fewest_agreeing(math.log(1 / m.params.delta), m.params.bound)
    assert "drawn after it was chosen" in exp.claim
    again = Explanation.from_json(exp.to_json())
    assert again.meta.proxy == exp.meta.proxy and json.loads(again.to_json()) == json.loads(exp.to_json())


async def test_a_wrong_proxy_costs_the_model_nothing_and_the_model_finds_its_own_anchor(embedder):
    proxy = FunctionClassifier(lambda texts: ["pos" if "fine" in t.split() else "neg" for t in texts], name="fine")
    m = MAnchorsExplainer(FunctionClassifier(needs_good, name="model-good"), proxy=proxy, seed=0, embedder=embedder)
    exp = await m.explain("a good and fine movie")
    assert exp.data.anchor == ("good",) and not exp.meta.proxy.certified
    assert exp.meta.proxy.proposals == (("fine",), ("a", "fine"))  # it proposed, and was heard
    # Both were refused by the model's samples they reuse: no query of the model was spent on them.
    assert "root" in exp.meta.stages and set(exp.meta.stages) <= {"root", "growth-0", "growth-1"}
    assert m.proxy.trust < 0.5


async def test_no_proxy_and_a_miss_grows_the_rule(embedder):
    m = MAnchorsExplainer(FunctionClassifier(needs_good, name="g"), proxy=None, seed=0, embedder=embedder)
    exp = await m.explain("a good and fine movie")
    assert exp.meta.proxy is None and exp.data.anchor == ("good",)
    assert not any(s.startswith(("proxy", "memory", "round")) for s in exp.meta.stages)
    assert any(s.startswith("growth") for s in exp.meta.stages)


@pytest.mark.parametrize("bad", [{"samples": 0}, {"beam": -1}, {"threshold": 1.5}, {"surrogate_iterations": 0}])
def test_bad_proxy_arguments(bad, embedder):
    from llm_anchors import ConfigError
    from llm_anchors.propose import ProxyParams

    with pytest.raises(ConfigError):
        MAnchorsExplainer(FunctionClassifier(needs_good, name="g"), embedder=embedder, proxy_params=ProxyParams(**bad))
    with pytest.raises(ConfigError):
        MAnchorsExplainer(FunctionClassifier(needs_good, name="g"), embedder=embedder, proxy="llm")


async def test_a_proxy_classifier_spends_under_the_explainers_cap(embedder):
    from llm_anchors import Budget, BudgetExceeded

    text = "a good and fine movie with a plot"
    alone = await MAnchorsExplainer(FunctionClassifier(needs_good, name="m"), seed=0, embedder=embedder).explain(text)
    # A cap the explained model alone stays under: the proxy's queries are what pass it.
    budget = Budget(max_queries=alone.meta.queries + 50)
    proxy = FunctionClassifier(needs_good, name="proxy-good")
    model = FunctionClassifier(needs_good, name="m")
    m = MAnchorsExplainer(model, proxy=proxy, seed=0, embedder=embedder, budget=budget)
    with pytest.raises(BudgetExceeded):
        await m.explain(text)
    assert budget.report().passed == ""


async def test_a_proxy_classifier_under_a_spent_cap_ends_the_stream_without_losing_what_was_explained(embedder):
    from llm_anchors import Budget

    texts = [f"a good and fine movie number {i} with a plot" for i in range(24)]
    model, proxy = FunctionClassifier(needs_good, name="m"), FunctionClassifier(needs_good, name="proxy-good")
    m = MAnchorsExplainer(model, proxy=proxy, seed=0, embedder=embedder, budget=Budget(max_queries=3000),
                          on_budget="return")  # fmt: skip
    done = [exp async for exp in m.explain_stream(texts)]  # the cap runs out: the stream ends, it does not raise
    assert 0 < len(done) < len(texts) and all(isinstance(e, Explanation) for e in done)
    assert done[-1].meta.budget_exhausted or m.budget.report().refused > 0
    again = MAnchorsExplainer(model, proxy=proxy, seed=0, embedder=embedder, budget=Budget(max_queries=3000),
                              on_budget="return")  # fmt: skip
    assert 0 < len(await again.explain_many(texts)) < len(texts)  # the explanations paid for are returned


async def test_a_proxy_classifier_s_connections_close_with_the_explainer(embedder):
    from llm_anchors import LLMClassifier
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
    from tests.fault_server import FaultServer

    async with FaultServer(answer=lambda p: "positive" if "good" in p.split() else "negative") as server:
        backend = OpenAICompatibleBackend(server.base_url, "proxy-model")
        proxy = LLMClassifier(backend, "Review: {text}\nSentiment:", ["negative", "positive"])
        async with MAnchorsExplainer(FunctionClassifier(needs_good, name="m"), proxy=proxy, seed=0,
                                     embedder=embedder) as m:  # fmt: skip
            exp = await m.explain("a good and fine movie with a plot")
            assert exp.meta.proxy.queries > 0 and backend._transport is not None
        assert backend._transport is None  # closed with the explainer


GOOD = [
    "a good and fine movie",
    "the good cast saves it",
    "good pacing and a plot",
    "one good scene in the middle",
    "good enough for a rainy day",
    "a long but good film",
    "the music is good here",
    "good fun for the kids",
    "it is good to see him",
    "a good script well played",
    "the ending is good too",
    "good jokes and sharp lines",
    "a good turn by the lead",
    "surprisingly good in parts",
]


async def test_the_surrogate_asked_first_proposes_what_earlier_inputs_taught_and_its_record_keeps_a_control_arm(
    embedder,
):
    from llm_anchors.propose import ProxyParams

    model = FunctionClassifier(needs_good, name="model-good")
    m = MAnchorsExplainer(model, proxy="surrogate", proxy_params=ProxyParams(first=True), memory=None, seed=0,
                          embedder=embedder)  # fmt: skip
    explained = [await m.explain(text) for text in GOOD]
    uses = [e.meta.proxy for e in explained]
    assert [u.asked for u in uses[:3]] == [None] * 3  # nothing learned yet: it cannot be asked
    asked = [e for e in explained[3:] if e.meta.proxy.asked]
    control = [e for e in explained[3:] if e.meta.proxy.asked is False]
    assert asked and control and len(asked) + len(control) == len(GOOD) - 3
    # Once the shared layer predicts a rule holding "good" keeps the label at the threshold, it is proposed
    # before the first sample, certified and final: no empty rule, no growth; until then, nothing is proposed.
    proposed = [e for e in asked if e.meta.proxy.proposals]
    assert proposed and all(e.meta.proxy.certified for e in proposed)
    assert all("good" in rule for e in proposed for rule in e.meta.proxy.proposals)
    assert all("good" in e.data.anchor and set(e.meta.stages) == {"proxy"} for e in proposed)
    for e in control:  # growth alone, the empty rule first
        assert e.data.anchor == ("good",) and "root" in e.meta.stages and "proxy" not in e.meta.stages
    mean = [sum(e.meta.queries for e in arm) / len(arm) for arm in (proposed, control)]
    assert mean[0] < mean[1]  # what it learned paid, on average
    assert m.proxy.record.asked == len(asked) and m.proxy.record.control == len(control)
    assert m.proxy.foreseen == m.proxy.record.certified == len(proposed) and m.proxy.first_share > 0.5


async def test_a_label_whose_anchors_are_mostly_empty_is_never_proposed_for_first(embedder):
    from llm_anchors.propose import ProxyParams

    always = FunctionClassifier(lambda texts: ["neg"] * len(texts), name="always-neg")
    m = MAnchorsExplainer(always, proxy="surrogate", proxy_params=ProxyParams(first=True), memory=None, seed=0,
                          embedder=embedder)  # fmt: skip
    explained = [await m.explain(text) for text in GOOD[:6]]
    assert all(e.data.anchor == () and e.meta.proxy.asked is None for e in explained)
    assert all("proxy" not in e.meta.stages for e in explained)


async def test_what_the_surrogate_learned_is_saved_with_the_memory_for_the_same_model_only(embedder, tmp_path):
    from llm_anchors import ConfigError
    from llm_anchors.memory.store import DamagedMemoryError
    from llm_anchors.propose import ProxyParams

    def explainer(name):
        model = FunctionClassifier(needs_good, name=name)
        return MAnchorsExplainer(model, proxy="surrogate", proxy_params=ProxyParams(first=True), seed=0,
                                 embedder=embedder)  # fmt: skip

    m = explainer("model-good")
    for text in GOOD[:6]:
        await m.explain(text)
    m.save(tmp_path)
    again = explainer("model-good")
    again.load(tmp_path)
    assert again.proxy.surrogate.state() == m.proxy.surrogate.state()
    assert again.proxy.record == m.proxy.record and again.proxy.foreseen == m.proxy.foreseen
    # A second run of the stream starts knowing: its first input may be proposed for at once.
    assert again.proxy.surrogate.foresees("pos")
    with pytest.raises(ConfigError, match="another model"):
        other = explainer("another-model")
        other.proxy.load(tmp_path, other._scope())
    (tmp_path / "surrogate.json").write_text('{"scope": "x"')
    with pytest.raises(DamagedMemoryError, match="surrogate.json"):
        explainer("model-good").proxy.load(tmp_path, again._scope())


async def test_a_surrogate_that_cannot_be_saved_is_a_config_error_and_keeps_the_file_before(tmp_path, monkeypatch):
    import errno
    import pathlib

    from llm_anchors import ConfigError
    from llm_anchors.propose import ProxyParams

    m = MAnchorsExplainer(FunctionClassifier(needs_good, name="model-good"), proxy="surrogate",
                          proxy_params=ProxyParams(first=True), memory=None, seed=0)  # fmt: skip
    await m.explain(GOOD[0])
    m.proxy.save(tmp_path, m._scope())
    before = (tmp_path / "surrogate.json").read_text()
    for text in GOOD[1:4]:
        await m.explain(text)
    written = pathlib.Path.write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".tmp"):
            written(self, "{")  # a part written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return written(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    with pytest.raises(ConfigError, match="No space left.*kept"):
        m.proxy.save(tmp_path, m._scope())
    monkeypatch.undo()
    assert (tmp_path / "surrogate.json").read_text() == before
    assert not list(tmp_path.glob("*.tmp"))
