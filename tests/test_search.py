import numpy as np
import pytest

from llm_anchors import ConfigError
from llm_anchors.search import BeamSearch, SearchParams
from tests.conftest import pool, run_search

F = 12


def conj(*features):
    return lambda present: present[:, list(features)].all(axis=1)


def search(params=None, start=None, n_features=F):
    return BeamSearch(n_features, pool(n_features), params or SearchParams(), start)


def test_recovers_two_word_conjunction():
    result, _ = run_search(search(), conj(3, 7))
    assert result.rule == {3, 7}
    assert result.success
    assert result.stats.precision == 1.0
    assert 0.2 < result.stats.coverage < 0.3  # both words kept: 1/4 of perturbations


@pytest.mark.parametrize("seed", range(5))
def test_recovers_three_word_conjunction(seed):
    result, _ = run_search(search(), conj(1, 4, 10), seed=seed)
    assert result.rule == {1, 4, 10}
    assert result.success


def test_empty_rule_when_label_never_changes():
    result, batches = run_search(search(), lambda present: np.ones(len(present), dtype=bool))
    assert result.rule == frozenset()
    assert result.success
    assert result.stats.coverage == 1.0
    assert all(r.rule == frozenset() for batch in batches for r in batch)


def test_disjunction_needs_one_word():
    # Label holds if word 2 or word 5 is kept: either alone is a valid anchor.
    result, _ = run_search(search(), lambda p: p[:, 2] | p[:, 5])
    assert result.rule in ({2}, {5})


REFERENCE = SearchParams(min_samples_start=1, max_arms=None)


def test_all_requests_of_a_round_come_in_one_batch():
    _, batches = run_search(search(REFERENCE), conj(3, 7))
    # Every KL-LUCB round pulls its two arms (two different rules) together, in one batch.
    rounds = [b for b in batches if b[0].stage.startswith("round-")]
    later = [b for b in rounds if all(r.n > 1 for r in b)]
    assert len(later) > 5 and all(len(b) == 2 and b[0].rule != b[1].rule for b in later)
    assert all(len({r.rule for r in b}) == len(b) for b in rounds)


def test_beam_size_is_honoured():
    result, _ = run_search(search(SearchParams(beam_size=3)), conj(3, 7))
    assert result.rule == {3, 7}
    assert all(len(r.beam) == 3 for r in result.rounds)


def test_stored_samples_seed_new_candidates():
    result, _ = run_search(search(), conj(3, 7))
    first, second = result.rounds[0], result.rounds[1]
    assert second.beam[0].n_samples > 0
    # The winner of round 2 started from samples of its parent drawn in round 1.
    assert second.beam[0].n_samples >= first.beam[0].positives // 2


def test_no_valid_anchor_gives_best_precision_rule():
    # Parity of kept words: no rule of <= 2 words reaches 0.95.
    parity = lambda p: p.sum(axis=1) % 2 == 0  # noqa: E731
    result, _ = run_search(search(SearchParams(max_anchor_size=2)), parity)
    assert not result.success
    assert 1 <= len(result.rule) <= 2
    assert result.stats.precision < 0.95


def test_path_and_intermediate_rule():
    # P(label) = 1 with words 0 and 1; with word 0 alone 0.875 (word 1 or 2 or 3 kept).
    def label(p):
        return p[:, 0] & (p[:, 1] | (p[:, 2] & p[:, 3]) | (p[:, 4] & p[:, 5] & p[:, 6]))

    result, _ = run_search(search(), label)
    assert result.success
    assert [len(s.rule) for s in result.path] == list(range(len(result.rule) + 1))
    assert result.path[-1] == result.stats
    mid = result.intermediate(0.6)
    assert 0 < len(mid.rule) < len(result.rule)
    assert mid.precision >= 0.6
    assert result.intermediate(0.99).rule == result.stats.rule


def test_resume_from_start_rule():
    fresh, _ = run_search(search(), conj(1, 4, 10))
    resumed, batches = run_search(search(start=frozenset({4})), conj(1, 4, 10))
    assert resumed.rule == {1, 4, 10}
    assert batches[0][0].rule == {4}  # the start rule is checked first
    assert resumed.path[0].rule == (4,)
    assert resumed.samples_used < fresh.samples_used


def test_valid_start_rule_is_returned_at_once():
    result, batches = run_search(search(start=frozenset({3, 7})), conj(3, 7))
    assert result.rule == {3, 7}
    assert result.success
    assert all(r.rule == {3, 7} for b in batches for r in b)


def test_invalid_start_rule_is_refined_or_replaced():
    result, _ = run_search(search(start=frozenset({0})), conj(3, 7))
    # The start word stays (VT only adds words) and the two that decide the label join it.
    assert result.rule == {0, 3, 7} and result.success


@pytest.mark.parametrize(
    "kwargs",
    [{"threshold": 1.0}, {"delta": 0}, {"epsilon": 1.5}, {"batch_size": 0}, {"beam_size": 0}, {"max_anchor_size": 0}],
)
def test_bad_parameters_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        SearchParams(**kwargs)


def test_bad_start_or_pool_raise_config_error():
    with pytest.raises(ConfigError):
        BeamSearch(F, pool(F), start=frozenset({F}))
    with pytest.raises(ConfigError):
        BeamSearch(F, pool(F + 1))
    with pytest.raises(ConfigError):
        BeamSearch(0, pool(0))


def test_search_rejects_wrongly_shaped_answers():
    from llm_anchors.search import Samples

    gen = search().run()
    requests = next(gen)
    with pytest.raises(ValueError):
        gen.send([Samples(np.ones((requests[0].n + 1, F), dtype=bool), np.ones(requests[0].n + 1, dtype=bool))])


def test_best_so_far_before_and_during_the_search():
    s = search()
    early = s.best_so_far()
    assert early.rule == frozenset() and not early.success
    gen = s.run()
    rng = np.random.default_rng(0)
    requests = next(gen)
    from llm_anchors.search import Samples

    for _ in range(6):  # a few rounds, then stop as if the budget ran out
        answers = []
        for r in requests:
            present = rng.random((r.n, F)) >= 0.5
            present[:, sorted(r.rule)] = True
            answers.append(Samples(present, present[:, [3, 7]].all(axis=1)))
        requests = gen.send(answers)
    partial = s.best_so_far()
    assert partial.rule and partial.stats.n_samples > 0
    assert 0.0 <= partial.lower <= partial.stats.precision <= partial.upper <= 1.0


@pytest.mark.parametrize("seed", range(3))
def test_reference_settings_recover_the_conjunction_too(seed):
    result, _ = run_search(search(REFERENCE), conj(1, 4, 10), seed=seed)
    assert result.rule == {1, 4, 10} and result.success


def test_lucb_runs_over_the_best_arms_only():
    # Words 3 and 7 both needed; the other words do nothing.
    _, batches = run_search(search(SearchParams(max_arms=2)), conj(3, 7))
    rounds = [b for b in batches if b and b[0].stage.startswith("round-")]
    for stage in {r.stage for b in rounds for r in b}:
        arms = {r.rule for b in rounds for r in b if r.stage == stage}
        assert len(arms) <= 2, (stage, arms)
    # Every candidate is considered by KL-LUCB when max_arms is None.
    _, batches = run_search(search(REFERENCE), conj(3, 7))
    first = {r.rule for b in batches for r in b if r.stage == "round-1"}
    assert len(first) == F


def test_the_root_sample_ranks_the_arms():
    # Word 5 alone keeps the label 90% of the time, the others 50%: ranked first, it wins.
    rng = np.random.default_rng(3)

    def label(present):
        return present[:, 5] & (rng.random(len(present)) < 0.97) | (rng.random(len(present)) < 0.02)

    result, batches = run_search(search(SearchParams(max_arms=1)), label)
    assert result.rule == {5}
    assert {r.rule for b in batches for r in b if r.stage == "round-1"} <= {frozenset({5})}


def test_stages_name_every_request():
    _, batches = run_search(search(), conj(3, 7))
    stages = [r.stage for b in batches for r in b]
    assert stages[0] == "root" and all(stages)
    assert {s.split("-")[0] for s in stages} <= {"root", "round", "certify"}


def test_bad_max_arms():
    for bad in (0, -1, 1.5):
        with pytest.raises(ConfigError):
            SearchParams(max_arms=bad)


@pytest.mark.parametrize(
    "bad",
    [{"threshold": "0.9"}, {"threshold": float("nan")}, {"delta": 1}, {"batch_size": True}, {"beam_size": 0},
     {"coverage_samples": 2.5}, {"max_anchor_size": "3"}],
)  # fmt: skip
def test_bad_search_parameters_are_config_errors(bad):
    with pytest.raises(ConfigError):
        SearchParams(**bad)


async def test_a_round_records_its_candidates_and_the_arms_kl_lucb_ran_over():
    from llm_anchors import AnchorsExplainer, FunctionClassifier

    def model(texts):
        return [int("alpha" in t and "beta" in t) for t in texts]

    async with AnchorsExplainer(FunctionClassifier(model, name="ab"), seed=0) as explainer:
        exp = await explainer.explain("alpha beta c d e f g h i j")
    first = exp.data.rounds[0]
    assert (first.size, first.n_candidates, first.n_arms) == (1, 10, 3)


async def test_plausible_arms_drop_only_the_candidates_that_cannot_be_the_best():
    import hashlib

    from llm_anchors import AnchorsExplainer, FunctionClassifier

    sentence = "key " + " ".join(f"w{i}" for i in range(9))

    def clear(texts):  # {key} holds always, any other word half of the time: nine arms are clearly worse
        return [int("key" in t.split() or hashlib.sha256(t.encode()).digest()[0] < 128) for t in texts]

    def close(texts):  # {key} 0.96, every other word 0.88 (the empty rule too, below the bound): none ruled out
        coin = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") / 2**64 for t in texts]
        return [
            int(t == sentence or c < (0.96 if "key" in t.split() else 0.80)) for t, c in zip(texts, coin, strict=True)
        ]

    async with AnchorsExplainer(
        FunctionClassifier(clear, name="clear"), seed=0, search=SearchParams(arms="plausible")
    ) as e:
        first = (await e.explain(sentence)).data.rounds[0]
    assert (first.n_candidates, first.n_arms) == (10, 1)
    async with AnchorsExplainer(
        FunctionClassifier(close, name="close"), seed=0, search=SearchParams(arms="plausible")
    ) as e:
        first = (await e.explain(sentence)).data.rounds[0]
    assert first.n_candidates == 10 and first.n_arms > 1  # the root's samples rule none of the close ones out


def test_arms_is_top_or_plausible():
    with pytest.raises(ConfigError, match="arms"):
        SearchParams(arms="all")


def test_two_searches_sharing_a_certifier_share_one_delta():
    from llm_anchors.propose import GuidedSearch
    from llm_anchors.search import Certifier, share_of

    params = SearchParams()
    certifier = Certifier(params)
    first, _ = run_search(BeamSearch(F, pool(F), params, certifier=certifier), conj(3, 7))
    after_first = certifier.chosen
    second, _ = run_search(GuidedSearch(6, pool(6), params, certifier=certifier), conj(2), seed=1)
    assert first.rule == {3, 7} and second.rule == {2} and first.success and second.success
    assert first.tested == after_first and second.tested == certifier.chosen > after_first  # ranks go on
    assert second.certificate is not None and second.certificate.rank > after_first
    spent = sum(share_of(params.delta, m, params.empty_share) for m in range(1, certifier.chosen + 1))
    assert spent <= params.delta  # one δ for both: the union bound covers both anchors


def test_a_shared_certifier_must_hold_the_search_s_own_parameters():
    from llm_anchors.search import Certifier

    with pytest.raises(ConfigError, match="shared certifier"):
        BeamSearch(F, pool(F), SearchParams(), certifier=Certifier(SearchParams(delta=0.05)))


@pytest.mark.parametrize("kind", ["beam", "guided"])
def test_context_features_are_perturbed_but_never_in_a_rule_and_max_size_bounds_the_rule(kind):
    from llm_anchors.propose import GuidedSearch

    def make(**kw):
        if kind == "beam":
            return BeamSearch(F, pool(F), SearchParams(), **kw)
        return GuidedSearch(F, pool(F), SearchParams(), **kw)

    # The label needs 3 and 7; 7 is context: the best rule without it must do, or no rule is certified.
    result, batches = run_search(make(context=(7,)), conj(3, 7))
    assert all(7 not in r.rule for batch in batches for r in batch) and 7 not in result.rule
    assert not result.success
    free, _ = run_search(make(context=(0, 1)), conj(3, 7))
    assert free.rule == {3, 7} and free.success
    capped, batches = run_search(make(max_size=1), conj(3, 7))
    assert all(len(r.rule) <= 1 for batch in batches for r in batch) and not capped.success
    with pytest.raises(ConfigError, match="context"):
        make(context=tuple(range(F)))


def test_a_rate_drawn_per_sample_weighs_a_sub_rule_s_samples_to_be_the_rule_s():
    """Coarse to fine, a document's sentences are hidden at a rate drawn per sample: a sample of the empty
    rule that keeps sentence 0 keeps 2/3 of the others, not 1/2; weighed, its samples are the rule's."""
    from llm_anchors.explain.explaining import scope
    from llm_anchors.samplers import TextSampler
    from llm_anchors.search.rules import covers
    from llm_anchors.search.samples import Samples, SampleStore

    document = TextSampler().features("The film is good. The plot is thin. The cast is fine. It ends well.")
    assert document.p_hide == "uniform" and scope(document)[2]
    assert not scope(TextSampler().features("a good film"))[2]  # a fixed rate: reused as drawn
    rng = np.random.default_rng(0)
    present = rng.random((40_000, 6)) >= rng.random((40_000, 1))  # the empty rule's samples, a rate each
    for rule in (frozenset({0}), frozenset({0, 1}), frozenset({0, 1, 2})):
        rest = [f for f in range(6) if f not in rule]
        holds = present[:, rest].sum(axis=1) >= len(rest) / 2  # a model whose label needs half the rest kept
        rows_kept = covers(rule, present)
        truth = (rng.random((40_000, len(rest))) >= rng.random((40_000, 1))).sum(axis=1) >= len(rest) / 2
        for per_sample, near in ((False, False), (True, True)):
            store = SampleStore(6, rate_per_sample=per_sample)
            store.add(frozenset(), Samples(present, holds))
            rows = store.reusable(rule)
            assert len(rows) == rows_kept.sum()
            n, kept = store.counts(rule, rows)
            assert (abs(kept / n - truth.mean()) < 0.02) == near, (rule, per_sample, kept / n, truth.mean())
            assert (n < len(rows)) == per_sample  # weighed samples are worth fewer
