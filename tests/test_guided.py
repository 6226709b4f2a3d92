import numpy as np
import pytest

from llm_anchors import ConfigError
from llm_anchors.propose import (
    Draw,
    Growth,
    GrowthParams,
    GuidedParams,
    GuidedSearch,
    Judge,
    Proposals,
    Proposer,
    credit,
)
from llm_anchors.search import BeamSearch, SearchParams
from tests.conftest import bet_certifies_at, pool, run_search

F = 12


def conj(*features):
    return lambda present: present[:, list(features)].all(axis=1)


def guided(proposals=(), proposer=None, **kw):
    proposers = [Proposals("memory", tuple(frozenset(r) for r in proposals))] if proposals else []
    if proposer is not None:
        proposers.append(proposer)
    own = {k: kw.pop(k) for k in list(kw) if k in GuidedParams.__dataclass_fields__}
    proposers.append(Growth(GrowthParams(**kw)))
    return GuidedSearch(F, pool(F), SearchParams(), guided=GuidedParams(**own), proposers=proposers)


class Proxy:
    """A proxy that proposes, when first asked, what a function of the samples labelled so far says."""

    name = "proxy"
    first = False

    def __init__(self, rules_of):
        self.rules_of = rules_of
        self.rules = None

    def propose(self, guide):
        if self.rules is None:
            self.rules = Proposals(self.name, [frozenset(r) for r in self.rules_of(*guide.labelled())])
        return self.rules.propose(guide)


def samples(batches):
    return sum(r.n for b in batches for r in b)


@pytest.mark.parametrize("seed", range(5))
def test_grows_the_conjunction_without_proposals(seed):
    result, batches = run_search(guided(), conj(1, 4, 10), seed=seed)
    assert result.rule == {1, 4, 10} and result.success
    assert {r.stage.split("-")[0] for b in batches for r in b} <= {"root", "growth"}


def test_growth_adds_only_words_the_model_weighs():
    # 30 words, 8 of which add evidence (label kept when about 5 of them are): each extension reuses
    # ~half its parent's samples, so the most precise on those is often a word the model ignores;
    # the logistic credit over every sample picks among the 8 only.
    weights = np.zeros(30)
    weights[:8] = 0.5
    for seed in range(5):
        noise = np.random.default_rng(seed + 100)

        def label(present, noise=noise):
            return present @ weights + noise.normal(0, 0.2, len(present)) > 2.2

        result, _ = run_search(GuidedSearch(30, pool(30), SearchParams()), label, seed=seed)
        assert result.success and result.rule <= set(range(8)), seed


def test_credit_weighs_the_feature_that_keeps_the_label_most():
    rng = np.random.default_rng(0)
    present = rng.random((300, 6)) >= 0.5
    kept = present[:, 4] | (present[:, 1] & (rng.random(300) < 0.5))
    weights, _ = credit(present, kept)
    assert weights.argmax() == 4 and weights[1] > max(weights[[0, 2, 3, 5]])


def test_a_right_proposal_is_certified_at_a_fraction_of_the_cost():
    plain, plain_batches = run_search(BeamSearch(F, pool(F), SearchParams()), conj(3, 7))
    result, batches = run_search(guided([{3, 7}]), conj(3, 7))
    assert result.rule == plain.rule == {3, 7} and result.success
    assert samples(batches) < samples(plain_batches) / 2
    assert {r.stage for b in batches for r in b} <= {"root", "memory", "growth-0", "growth-1"}


def test_wrong_proposals_cost_a_probe_at_most_and_the_search_goes_on():
    result, batches = run_search(guided([{0}, {2, 5}, {3, 8}]), conj(3, 7))
    assert result.rule == {3, 7} and result.success
    assert sum(r.n for b in batches for r in b if r.stage.startswith("memory")) <= 3 * 25


def test_a_shorter_anchor_than_the_proposal_is_found():
    # Word 3 alone keeps the label: proposal {3, 9} holds, but {3} is shorter and is returned.
    result, _ = run_search(guided([{3, 9}]), conj(3))
    assert result.rule == {3}


def test_empty_rule_when_the_label_never_changes():
    result, batches = run_search(guided([{3}]), lambda present: np.ones(len(present), dtype=bool))
    assert result.rule == frozenset() and result.success
    assert all(r.stage == "root" for b in batches for r in b)


def test_the_empty_rule_is_tested_as_every_rule_is():
    # The first rule chosen (a share of empty_share · δ = 0.02), every sample keeping the label: drawn
    # a probe (20) at a time up to where the bet could reach 1/0.02 at the soonest, and certified there.
    params = SearchParams()
    soonest = bet_certifies_at([True] * 500, params, 0.02)
    result, batches = run_search(guided(), lambda present: np.ones(len(present), dtype=bool))
    assert result.rule == frozenset() and result.success
    assert [r.n for b in batches for r in b] == [min(20, soonest - k) for k in range(0, soonest, 20)]
    assert (result.certificate.n, result.certificate.kept, result.certificate.rank) == (soonest, soonest, 1)
    assert result.tested == 1  # every sample of the empty rule was drawn after it was chosen
    # One miss first: the bet loses that stake and makes it up on more samples.
    labels = [False] + [True] * 199
    flips = iter(labels)
    result, batches = run_search(guided(), lambda present: [next(flips) for _ in present])
    assert result.rule == frozenset() and result.success
    assert result.certificate.n == bet_certifies_at(labels, params, 0.02) > soonest + 10
    # Ten misses in the first 20: refuted there (its KL upper bound at refute = 0.99 is below τ).
    flips = iter([False] * 10 + [True] * 199)
    result, batches = run_search(guided(), lambda present: [next(flips) for _ in present])
    assert result.rule != frozenset() and batches[0][0].n == 20 and batches[1][0].stage != "root"


def test_growth_adds_at_once_the_words_its_fit_says_the_rule_needs():
    # The label holds only with words 1, 4 and 10: after the root, the fit predicts {1} and {1, 4}
    # far below a lookahead of 0.8, so {1, 4, 10} is the first rule tested; word by word, all three are.
    jumped, batches = run_search(guided(lookahead=0.8), conj(1, 4, 10))
    stepped, step_batches = run_search(guided(lookahead=None, refuse=None), conj(1, 4, 10))
    assert jumped.rule == stepped.rule == {1, 4, 10} and jumped.success
    # growth-1: one-word rules drawn to choose (the jump's first word kept), never tested
    assert {r.stage for b in batches for r in b} == {"root", "growth-1", "growth-3"} and jumped.tested == 2
    assert {"growth-1", "growth-2"} <= {r.stage for b in step_batches for r in b}
    assert samples(batches) < samples(step_batches)


def test_a_rule_its_reused_samples_refuse_is_not_probed():
    # Without the fit's lookahead, the refusal rule alone passes over {1} and {1, 4}: their reused root
    # samples already put the KL upper bound below τ.
    result, batches = run_search(guided(lookahead=None), conj(1, 4, 10))
    assert result.rule == {1, 4, 10} and result.tested == 2
    assert {r.stage for b in batches for r in b} == {"root", "growth-1", "growth-3"}


def test_an_accepted_jump_is_bisected_to_its_shortest_accepted_prefix():
    # A lookahead of 1 adds every positively credited word; word 3 alone keeps the label, so the long
    # rule is accepted, then bisected down to {3}, each prefix judged on fresh samples.
    search = guided(lookahead=1.0, refuse=None)
    result, batches = run_search(search, conj(3))
    assert result.rule == {3} and result.success
    assert max(int(r.stage.split("-")[1]) for b in batches for r in b if r.stage.startswith("growth")) > 2
    assert result.certificate is not None and result.certificate.n >= 50 and result.tested > 2


def test_dropping_words_from_a_certified_jump_stops_after_drop_misses_refused_in_a_row():
    # A lookahead of 1 jumps to 8 words, 6 of them needed. Each needed word dropped is a refused test:
    # by default growth stops after 3 in a row; with None it tries every word; with 1 it stops at the
    # first refusal, before the needless words 8 and 9 were tried, and returns a superset.
    needed = conj(1, 2, 3, 4, 5, 6)
    stopped, _ = run_search(guided(lookahead=1.0, refuse=None), needed)
    every, _ = run_search(guided(lookahead=1.0, refuse=None, drop_misses=None), needed)
    first, _ = run_search(guided(lookahead=1.0, refuse=None, drop_misses=1), needed)
    assert stopped.rule == every.rule == {1, 2, 3, 4, 5, 6} and stopped.tested == every.tested - 1
    assert first.rule > {1, 2, 3, 4, 5, 6} and first.tested < stopped.tested
    with pytest.raises(ConfigError, match="drop_misses"):
        GrowthParams(drop_misses=0)


def test_a_rule_is_sampled_per_feature_it_could_still_add_before_growth_chooses():
    # 12 features, 5 samples each: the root (refuted on its first 20) is topped up to 60 (under the cap of 75) ...
    _, batches = run_search(guided(early=None), conj(1, 4, 10))
    root = sum(r.n for b in batches for r in b if r.stage == "root")
    assert root == 20 and [r.n for b in batches for r in b if r.stage == "growth-0"] == [60 - root]
    # ... and with 1 per feature, its 20 already exceed the 12 asked.
    _, batches = run_search(guided(per_feature=1), conj(1, 4, 10))
    assert not any(r.stage == "growth-0" for b in batches for r in b)


def test_a_rule_is_certified_on_samples_drawn_after_it_was_chosen_only():
    search = GuidedSearch(F, pool(F), SearchParams(delta=1e-12))  # a tiny δ: hundreds of samples certify
    result, _ = run_search(search, conj(2))
    assert result.rule == {2} and result.certificate is not None and result.certificate.n >= 250
    # The bounds reported are those of the samples drawn after the rule was chosen.
    assert result.stats.n_samples > result.certificate.n and result.lower > 0.9


def test_a_proposal_is_judged_only_on_samples_drawn_after_it_was_chosen():
    # {5} keeps the label 90% of the time. The root's samples that keep word 5 are forced to agree
    # with it: a search that counted them would accept {5}; the fresh samples refuse it.
    rng = np.random.default_rng(0)
    calls = {"n": 0}

    def label(present):
        calls["n"] += 1
        if calls["n"] == 1:  # the root: perfect for word 5
            return present[:, 5] | (rng.random(len(present)) < 0.3)
        return np.where(present[:, 5], rng.random(len(present)) < 0.9, rng.random(len(present)) < 0.3)

    result, batches = run_search(guided([{5}]), label)
    assert any(r.stage == "memory" and r.rule == {5} for b in batches for r in b)  # {5} was probed afresh
    assert result.rule != {5}  # and refused there


def test_a_proposal_its_reused_samples_refuse_costs_nothing():
    # Word 0 alone never holds: the root's samples that keep it already miss, so it is not probed.
    result, batches = run_search(guided([{0}]), conj(3))
    assert result.rule == {3}
    assert not any(r.stage.startswith("memory") for b in batches for r in b)


def test_a_proxy_proposes_from_the_samples_labelled_so_far():
    seen = []

    def proposer(present, kept):
        seen.append(len(kept))
        return [{3, 7}]

    assert isinstance(Proxy(proposer), Proposer)
    result, batches = run_search(guided(proposer=Proxy(proposer)), conj(3, 7))
    assert result.rule == {3, 7} and result.success
    assert seen == [20]  # called once, after the root's samples (refuted on its first 20)
    assert {r.stage for b in batches for r in b} <= {"root", "proxy", "growth-0", "growth-1"}


def test_a_refused_proposal_is_not_chosen_again_by_growth():
    # {2} holds 92% of the time: refused as a proposal, growth must not test it a second time.
    rng = np.random.default_rng(1)

    def label(present):
        return np.where(present[:, 2], rng.random(len(present)) < 0.92, present[:, 2] & present[:, 6])

    search = guided([{2}])
    result, _ = run_search(search, label)
    assert {2} in search.tried and result.rule != {2}


def test_no_valid_rule_gives_the_best_one_flagged():
    rng = np.random.default_rng(0)

    def label(present):  # feature 2 keeps the label 80% of the time (far below τ), anything else half the time
        n = len(present)
        return np.where(present[:, 2], rng.random(n) < 0.8, rng.random(n) < 0.5)

    result, _ = run_search(guided(), label)
    assert not result.success and 2 in result.rule
    assert result.stats.precision > 0.7 and result.lower < 0.9  # its fresh samples' bound: not an anchor


def test_bad_arguments():
    with pytest.raises(ConfigError, match="outside"):  # a proposed rule naming no feature of this input
        run_search(guided([{F}]), conj(3))
    for bad in ({"lookahead": 0.0}, {"lookahead": 1.5}, {"refuse": 1.0}, {"per_feature": 0}, {"probe": 0},
                {"fit_weight": -1}, {"credit_iterations": 0}, {"prediction_rows": 0}):  # fmt: skip
        with pytest.raises(ConfigError):
            guided(**bad)


def test_a_proposer_may_draw_before_it_tests_and_the_search_writes_nothing_into_it():
    class Looker:
        """Draws 30 samples of {3}, then tests {3, 7} (a sibling of growth, asked before it)."""

        name, first = "looker", False

        def __init__(self):
            self.steps = []

        def propose(self, guide):
            if len(self.steps) == 2:
                return None
            if not self.steps:
                self.steps.append(Draw(guide.candidate(frozenset({3})), 30, "looker"))
            else:
                self.steps.append(Judge(guide.candidate(frozenset({3, 7})), "looker"))
            return self.steps[-1]

    looker = Looker()
    search = guided(proposer=looker)
    before = dict(vars(looker))
    result, batches = run_search(search, conj(3, 7))
    assert result.rule == {3, 7} and result.success and search.sources[result.rule] == "looker"
    assert [r.n for b in batches for r in b if r.rule == {3}][:1] == [30]
    assert vars(looker).keys() == before.keys() and len(looker.steps) == 2  # only its own steps


def test_a_step_that_is_not_of_this_search_is_refused():
    class Stranger:
        name, first = "stranger", False

        def propose(self, guide):
            other = GuidedSearch(F, pool(F), SearchParams())
            return Judge(other.candidate(frozenset({3})), "stranger")

    with pytest.raises(ConfigError, match="proposer 'stranger' proposed"):
        run_search(guided(proposer=Stranger()), conj(3))


def test_a_rule_proposed_again_is_refused():
    class Stubborn:
        name, first = "stubborn", False

        def propose(self, guide):
            return Judge(guide.candidate(frozenset({3})), "stubborn")

    with pytest.raises(ConfigError, match="again"):
        run_search(guided(proposer=Stubborn()), conj(3, 7))


def missing_once(*features):
    """conj(*features), except that the first sample drawn for a rule holding them all misses."""
    seen = []

    def label(present):
        kept = present[:, list(features)].all(axis=1)
        if kept.all() and not seen:
            seen.append(True)
            kept = kept.copy()
            kept[0] = False
        return kept

    return label


def test_growth_chooses_as_soon_as_the_rule_it_would_test_agrees_on_early_reused_samples():
    # Word 3 alone keeps the label: among the root's first 20 samples, the 10 or so that keep it all do,
    # so growth tests {3} at once. {1, 4, 10} needs the three kept: growth draws 10 at a time until 10
    # reused samples agree, which takes the whole 60 (5 per feature).
    result, batches = run_search(guided(), conj(3))
    assert result.rule == {3} and not any(r.stage == "growth-0" for b in batches for r in b)
    result, batches = run_search(guided(draw_first=False), conj(1, 4, 10))
    assert [r.n for b in batches for r in b if r.stage == "growth-0"] == [10] * 4
    waited, batches = run_search(guided(early=None), conj(3))
    assert waited.rule == {3} and [r.n for b in batches for r in b if r.stage == "growth-0"] == [40]
    with pytest.raises(ConfigError, match="early"):
        GrowthParams(early=0)


def test_while_growth_would_jump_it_draws_samples_that_keep_the_jumps_first_word():
    # {1, 4, 10}: after the root's 20, growth would test a jump; each draw of 10 keeps the first word of
    # the jump it would test then (the fit's best), so the next rule's reused samples come twice as fast
    # once that word is one it needs. The draws count toward the root's 60 (5 per feature).
    result, batches = run_search(guided(), conj(1, 4, 10))
    drawn = [r for b in batches for r in b if r.stage == "growth-1"]
    assert result.rule == {1, 4, 10} and result.success and result.tested == 2
    assert drawn and all(len(r.rule) == 1 and r.n == 10 for r in drawn) and sum(r.n for r in drawn) <= 40
    assert drawn[-1].rule < {1, 4, 10}
    _, root_batches = run_search(guided(draw_first=False), conj(1, 4, 10))
    assert samples(batches) < samples(root_batches)
    with pytest.raises(ConfigError, match="draw_first"):
        GrowthParams(draw_first=1)


def test_a_refused_rule_whose_precision_recovers_is_drawn_until_its_bet_decides():
    # {1, 4} misses once on its first probe of 10 and is refused; the samples growth then draws to choose
    # all keep the label (its precision back above τ), so growth draws what its bet still needs.
    result, batches = run_search(guided(), missing_once(1, 4))
    pair = [r.n for b in batches for r in b if r.rule == {1, 4}]
    assert result.rule == {1, 4} and result.success and result.tested == 2 and pair[0] == 10 and len(pair) == 3
    labels = [False] + [True] * 200
    assert result.certificate.n == sum(pair) == bet_certifies_at(labels, SearchParams(), result.certificate.level)
    assert result.certificate.kept == sum(pair) - 1  # the one miss, its first sample


def test_a_proposer_asked_first_takes_the_first_ranks_share_of_delta():
    known = Proposals("oracle", [frozenset({1, 4})], first=True, final=frozenset([frozenset({1, 4})]))
    search = GuidedSearch(F, pool(F), SearchParams(), proposers=[known, Growth()])
    result, _ = run_search(search, conj(1, 4))
    assert result.rule == {1, 4} and result.success and result.certificate.rank == 1
    expected = 0.1 * 0.2  # the empty rule's, which it takes the place of
    assert result.certificate.level == pytest.approx(expected)
    assert result.certificate.n == bet_certifies_at([True] * 200, SearchParams(), expected)


def soft(*features):
    """The probability a model gives the label: rises with each of ``features`` kept, past ½ with all."""
    return lambda present: (
        0.1 + 0.5 * present[:, list(features)].mean(axis=1) + 0.3 * present[:, list(features)].all(axis=1)
    )


def test_with_probabilities_growth_samples_a_rule_up_to_scored_samples_before_choosing():
    # 12 features, 10 samples each: 120 asked, capped at parent_samples (75) with labels alone ...
    _, batches = run_search(guided(early=None, per_feature=10), conj(1, 4, 10))
    assert sum(r.n for b in batches for r in b if r.stage in ("root", "growth-0")) == 75
    # ... and at scored_samples (40) when the model gives probabilities, which rank on fewer.
    _, batches = run_search(guided(early=None, per_feature=10), conj(1, 4, 10), score_of_present=soft(1, 4, 10))
    assert sum(r.n for b in batches for r in b if r.stage in ("root", "growth-0")) == 40


def test_probabilities_find_the_same_anchors_on_fewer_samples():
    spent = {"labels": 0, "probabilities": 0}
    for seed in range(10):
        labels_only, plain = run_search(guided(), conj(1, 4, 10), seed=seed)
        scored, guided_by = run_search(guided(), conj(1, 4, 10), seed=seed, score_of_present=soft(1, 4, 10))
        assert labels_only.rule == scored.rule == {1, 4, 10} and scored.success
        spent["labels"] += samples(plain)
        spent["probabilities"] += samples(guided_by)
    assert spent["probabilities"] < 0.9 * spent["labels"]  # 881 against 1,046


def test_probabilities_never_certify_a_rule_its_labels_refuse():
    # The probabilities say every perturbation keeps the label; the labels say only {1, 4, 10} does.
    result, _ = run_search(guided(), conj(1, 4, 10), score_of_present=lambda present: np.ones(len(present)))
    assert result.rule == {1, 4, 10} and result.success


def test_a_sample_without_a_probability_counts_as_its_label():
    search = guided()
    plain, batches = run_search(guided(), conj(1, 4, 10))
    none, nan = run_search(search, conj(1, 4, 10), score_of_present=lambda present: np.full(len(present), np.nan))
    assert none.rule == plain.rule and samples(nan) == samples(batches) and search.scored() is None
