"""What an anchor guarantees: with probability ≥ 1 − δ for the anchor returned, precision ≥ τ − ε_stop
(default) or τ (strict), certified on samples drawn after the rule was chosen, δ shared among the rules
tested (the flat-null check of the whole claim is benchmarks/claims.py)."""

import hashlib
import math

import numpy as np
import pytest

from llm_anchors import AnchorsExplainer, ConfigError, Explanation, FunctionClassifier, MAnchorsExplainer
from llm_anchors.search import SearchParams, fewest_agreeing
from llm_anchors.search.certify import Certifier, Trial
from tests.conftest import bet_certifies_at

STRICT = SearchParams(certify="strict")

SENTENCE = "alpha beta c d e f g h i j"
SEEDS = 100


def coin(text: str) -> float:
    """A fixed pseudo-random number in [0, 1) per text: the model is deterministic, its labels cacheable."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def known_precision(texts: list[str]) -> list[int]:
    """Label 1 (the input's) with a known precision per rule: with "alpha" and "beta", 0.995; with
    "alpha" alone, 0.90 — so the rule {alpha} holds 0.5 × 0.995 + 0.5 × 0.90 = 0.9475 < τ; else 0.3."""
    labels = []
    for t in texts:
        words = set(t.split())
        keep = 0.995 if {"alpha", "beta"} <= words else 0.90 if "alpha" in words else 0.3
        labels.append(int(t == SENTENCE or coin(t) < keep))
    return labels


def true_precision(anchor: tuple[str, ...]) -> float:
    """A rule's precision under the model above, each word it leaves free kept with probability ½."""
    both = {"alpha", "beta"} <= set(anchor)
    alpha = 1.0 if "alpha" in anchor else 0.5
    beta = 1.0 if "beta" in anchor else 0.5
    return 0.995 if both else alpha * beta * 0.995 + alpha * (1 - beta) * 0.90 + (1 - alpha) * 0.3


@pytest.mark.parametrize("kind", [AnchorsExplainer, MAnchorsExplainer])
async def test_strict_anchors_hold_tau_for_a_model_of_known_precision_where_default_ones_fall_below(kind):
    anchors = {}
    memory = {"memory": None} if kind is MAnchorsExplainer else {}  # one input, many seeds: no repeat
    for certify in ("default", "strict"):
        async with kind(
            FunctionClassifier(known_precision, name="known"), search=SearchParams(certify=certify), **memory
        ) as explainer:
            found = []
            for seed in range(SEEDS):
                exp = await explainer.explain(SENTENCE, seed=seed)
                found.append(exp.data.anchor if exp.data.success else None)
            anchors[certify] = found
    # Not tuned to these seeds: each strict claim is false with probability ≤ δ = 0.1, so more than 22
    # false ones in 100 has probability < 1e-4 (a binomial tail). The default accepts the rule {alpha},
    # below τ but above τ − ε_stop, in 10–20% of explanations here; fewer than 3 in 100 at 10%: < 0.2%.
    assert anchors["default"].count(("alpha",)) >= 3
    below = [a for a in anchors["strict"] if a is None or true_precision(a) < 0.95]
    assert len(below) <= 22, anchors["strict"]


async def test_a_strict_anchor_says_on_which_fresh_samples_it_was_certified():
    async with AnchorsExplainer(FunctionClassifier(known_precision, name="known"), seed=1, search=STRICT) as e:
        exp = await e.explain(SENTENCE)
    floor = fewest_agreeing(math.log(1 / 0.1), 0.95)  # the fewest that could certify at all of δ
    assert exp.data.certified_samples >= floor and exp.meta.stages["certify"].samples >= exp.data.certified_samples
    assert exp.data.precision_bounds[0] >= 0.95 and "strict" in exp.claim and "after it was chosen" in exp.claim
    assert f"among the {exp.data.tested} rules tested" in exp.claim and exp.data.tested >= 2
    assert Explanation.from_json(exp.to_json()) == exp
    async with AnchorsExplainer(FunctionClassifier(known_precision, name="known"), seed=1) as e:
        default = await e.explain(SENTENCE)
    assert default.data.certified_samples > 0 and "certify" in default.meta.stages
    assert "τ − ε_stop = 0.9" in default.claim and "for the anchor returned" in default.claim


async def test_a_strict_empty_anchor_is_certified_too_and_called_a_prior():
    async with AnchorsExplainer(FunctionClassifier(lambda t: [1] * len(t), name="one"), search=STRICT) as e:
        exp = await e.explain(SENTENCE, seed=0)
    # The first rule tested (a share of empty_share · δ = 0.02), every sample keeping the label: certified
    # where the bet first reaches 1/0.02.
    assert exp.data.anchor == () and exp.data.success
    assert exp.data.certified_samples == bet_certifies_at([True] * 500, STRICT, 0.02) > 0
    assert "a prior" in exp.claim


def test_certify_is_default_or_strict():
    with pytest.raises(ConfigError, match="certify"):
        SearchParams(certify="lenient")
    with pytest.raises(ConfigError, match="certify"):
        SearchParams(certify="always")  # type: ignore[arg-type]


async def test_an_empty_anchor_names_the_words_whose_presence_holds_the_label_most():
    sentence = "a dull film with x y z w"

    def mostly(texts):  # "dull" keeps the label always, else 75% of the time: the empty rule holds at τ 0.7
        return [int(t == sentence or "dull" in t.split() or coin(t) < 0.75) for t in texts]

    # (20 seeds of 20 certify the empty rule and name dull first: its effect, 0.25, is far above the noise.)
    async with AnchorsExplainer(
        FunctionClassifier(mostly, name="mostly"), seed=0, search=SearchParams(threshold=0.7)
    ) as e:
        exp = await e.explain(sentence)
    assert exp.data.anchor == () and exp.data.movers[0][0] == "dull" and exp.data.movers[0][1] > 0
    assert "a prior, not these words" in exp.claim and "dull (+" in exp.claim
    assert Explanation.from_json(exp.to_json()) == exp


async def test_a_model_that_answers_a_text_two_ways_gets_no_strict_certificate_printed_as_if_it_did_not():
    from collections import Counter

    from llm_anchors import NondeterminismWarning

    asked: Counter[str] = Counter()

    def fickle(texts):  # the input's label the first time a text is asked, the other one after
        asked.update(texts)
        return [int(asked[t] == 1 or t == SENTENCE) for t in texts]

    async with AnchorsExplainer(FunctionClassifier(fickle, name="fickle"), seed=0, search=STRICT) as e:
        with pytest.warns(NondeterminismWarning):
            exp = await e.explain(SENTENCE)
    assert not exp.data.success and (exp.meta.determinism.rechecked, exp.meta.determinism.changed) == (5, 5)
    assert exp.claim.startswith("NOT CERTIFIED: the model gave 5 of 5 texts another label when asked again")
    async with AnchorsExplainer(FunctionClassifier(known_precision, name="known"), seed=0, search=STRICT) as e:
        steady = await e.explain(SENTENCE)
    assert (steady.meta.determinism.rechecked, steady.meta.determinism.changed) == (5, 0)
    assert "NOT CERTIFIED" not in steady.claim and steady.data.success
    assert Explanation.from_json(exp.to_json()) == exp and exp.data.certified_samples > 0  # as measured, kept


@pytest.mark.parametrize("certify", ["default", "strict"])
def test_the_bet_certifies_a_rule_at_its_bound_at_most_its_share_of_the_time(certify):
    # Ville's inequality: a rule whose precision is the bound itself reaches 1/share with probability at
    # most share, however long it is watched (refutation off, patience 25× the floor, every sample looked at).
    params = SearchParams(certify=certify, refute=1e-12, patience=25.0)
    certifier, rng, share, runs = Certifier(params), np.random.default_rng(0), 0.05, 2000
    certified = 0
    for _ in range(runs):
        trial, fresh = Trial(2, share), []
        while certifier.judge(trial, fresh) == "more":
            fresh.extend((rng.random(certifier.wanted(trial) - len(fresh)) < params.bound).tolist())
        certified += trial.verdict == "certified"
    assert 0 < certified / runs <= share + 3 * math.sqrt(share * (1 - share) / runs)


@pytest.mark.parametrize("bad", [{"bet_gap": 1.0}, {"bet_gap": 0.0}, {"bet_weight": 0.0}, {"patience": 0.5}])
def test_the_bet_refuses_settings_it_cannot_run_with(bad):
    with pytest.raises(ConfigError, match=next(iter(bad))):
        SearchParams(**bad)


def test_the_bet_starts_the_same_fraction_of_the_way_down_to_either_bound():
    # Default (bound 0.90) and strict (0.95) at τ = 0.95: the guess starts at 0.98 and 0.99, so a rule
    # that keeps the label earns about 4/5 of the most any bet could per sample, under either claim.
    for certify, start in (("default", 0.98), ("strict", 0.99)):
        params = SearchParams(certify=certify)
        assert Certifier(params).guess(0, 0) == pytest.approx(start)
        earned, most = Certifier(params).step(0, 0, True), math.log(1 / params.bound)
        assert 0.75 < earned / most < 0.85


def test_a_tau_near_one_is_bet_on_from_its_first_sample():
    # Strict at τ = 0.99: the guess starts a fifth of the way from 1 down to the bound (0.998), above it;
    # a rule that keeps the label on every sample is certified on the fewest samples the bet allows.
    params = SearchParams(threshold=0.99, certify="strict")
    certifier, trial = Certifier(params), Trial(1, 0.02)
    assert certifier.guess(0, 0) == pytest.approx(0.998) and certifier.step(0, 0, True) > 0
    soonest = bet_certifies_at([True] * 2000, params, 0.02)
    assert certifier.judge(trial, [True] * soonest) == "certified" and trial.certificate.n == soonest


def test_a_refused_rules_bet_goes_on_over_samples_drawn_later():
    # One miss in the first 10 refuses a rule; samples of it drawn later, for whatever reason,
    # go on with the same bet, and certify it where the bet written out (conftest) says.
    params, share = SearchParams(), 0.05
    certifier, trial = Certifier(params), Trial(2, share)
    fresh = [False] + [True] * 9
    assert certifier.judge(trial, fresh) == "refused" and certifier.soonest(trial) is not None
    fresh += [True] * (certifier.soonest(trial) - len(fresh) - 1)
    assert certifier.judge(trial, fresh) == "refused"  # one short: still refused, never "more"
    fresh.append(True)
    assert certifier.judge(trial, fresh) == "certified"
    assert trial.certificate.n == len(fresh) == bet_certifies_at(fresh, params, share)
    # A rule too far below the bound to be certified within its patience has no soonest.
    hopeless = Trial(2, share)
    assert certifier.judge(hopeless, [False] * 10) == "refused" and certifier.soonest(hopeless) is None


@pytest.mark.parametrize("certify", ["default", "strict"])
def test_soonest_is_where_the_bet_would_certify_if_every_sample_left_kept_the_label(certify):
    # Against the bet written out (conftest), for rules refused after a few misses anywhere in their
    # first samples: the soonest certificate, or None when it is beyond the rule's patience.
    params, share = SearchParams(certify=certify), 0.01
    certifier, rng = Certifier(params), np.random.default_rng(0)
    nones = 0
    for _ in range(200):
        seen = int(rng.integers(1, 120))
        fresh = (rng.random(seen) > rng.choice([0.02, 0.1, 0.3])).tolist()
        trial = Trial(3, share)
        certifier.judge(trial, fresh)
        if trial.verdict == "certified":
            continue
        at = bet_certifies_at(fresh + [True] * 2000, params, share)
        expected = at if at <= certifier.patience(trial) else None
        assert certifier.soonest(trial) == expected
        nones += expected is None
    assert 0 < nones < 200


def test_a_rule_is_refused_as_soon_as_no_sample_left_to_its_patience_could_certify_it():
    # Strict (bound τ): a rule of precision 0.96, one miss in 25, stays above τ (never refuted) but its
    # bet grows too slowly; it is refused at the first sample after which even every sample left to
    # its patience keeping the label would not certify it (the bet written out, conftest), not at it.
    params, share = SearchParams(certify="strict"), 0.05
    certifier, trial = Certifier(params), Trial(2, share)
    fresh: list[bool] = []
    while certifier.judge(trial, fresh) == "more":
        fresh.append(len(fresh) % 25 != 24)
    limit = certifier.patience(trial)
    assert trial.verdict == "refused" and len(fresh) < limit and sum(fresh) >= params.threshold * len(fresh)
    assert bet_certifies_at(fresh + [True] * (limit - len(fresh)), params, share) is None
    assert bet_certifies_at(fresh[:-1] + [True] * (limit - len(fresh) + 1), params, share) is not None
