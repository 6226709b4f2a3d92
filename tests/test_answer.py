"""The one rule an answer is read by (`llm_anchors.models.answer`), as a table: the label is what the text
(a decision's choice) names; the first token's alternatives score the labels when they can be read whole
and describe the label read, and never choose one. Every shape a server or a hostile fake has sent is a
row; `tests/test_hostile.py` sends the same shapes over every endpoint."""

import math

import pytest

from llm_anchors import UNPARSED, LLMClassifier
from llm_anchors.extend import Completion, MockBackend
from llm_anchors.models import LabelReader

NAN, INF = math.nan, math.inf
P, N = " positive", " negative"


def p(logprob: float) -> float:
    return math.exp(logprob)


# name: (text, alternatives as said, chosen, label read, probabilities or None)
ROWS = {
    # Readable alternatives describing the label read.
    "plain": (P, {P: -0.1, N: -2.5}, None, "positive", {"positive": p(-0.1), "negative": p(-2.5)}),
    "chosen named": (P, [(P, -0.1), (N, -2.5)], P, "positive", {"positive": p(-0.1), "negative": p(-2.5)}),
    "other spellings add": (P, {P: -0.2, " Positive": -3.0, " pos": -4.0, N: -2.5}, None, "positive",
                            {"positive": p(-0.2) + p(-3.0) + p(-4.0), "negative": p(-2.5)}),
    "a mark after the label": ("Negative.", {"Negative.": -0.2, "P": -2.0, "": -4.0}, None, "negative",
                               {"negative": p(-0.2), "positive": p(-2.0)}),
    "rounding above 0": (P, {P: 2e-4, N: -9.0}, None, "positive", {"positive": 1.0, "negative": p(-9.0)}),
    "the other at probability 0": (P, {P: -0.1, N: -INF}, None, "positive", {"positive": p(-0.1), "negative": 0.0}),
    "a likelier label not generated": (P, [(P, -1.0), (N, -0.8)], P, "positive",
                                       {"positive": p(-1.0), "negative": p(-0.8)}),
    "no label named, alternatives kept": (" The", {" The": -0.1, P: -3.0}, None, UNPARSED,
                                          {"positive": p(-3.0), "negative": 0.0}),
    # The generated token's log-probability cannot be read: no probabilities, the text's label.
    "legacy, no tokens, generated null": (P, [(P, None), (" Positive", -4.0), (N, -3.5)], None, "positive", None),
    "legacy, no tokens, generated NaN": (P, [(P, NAN), (" Positive", -4.0), (N, -3.5)], None, "positive", None),
    "generated NaN": (P, [(P, NAN), (N, -3.0)], P, "positive", None),
    "generated null": (P, [(P, None), (N, -3.0)], P, "positive", None),
    "generated a string": (P, [(P, "high"), (N, -3.0)], P, "positive", None),
    "generated 'Infinity'": (P, [(P, "Infinity"), (N, -3.0)], P, "positive", None),
    "generated +inf": (P, [(P, INF), (N, -3.0)], P, "positive", None),
    "generated 5.0": (P, [(P, 5.0), (N, -3.0)], P, "positive", None),
    "generated a boolean": (P, [(P, True), (N, -3.0)], P, "positive", None),
    "generated absent": (P, [(N, -3.0)], P, "positive", None),
    "generated absent, not named": (P, [(N, -3.0)], None, "positive", None),
    "generated listed twice, once NaN": (P, [(P, -0.1), (P, NAN), (N, -3.0)], P, "positive", None),
    # Alternatives that cannot be read whole, though the generated token's can: none either.
    "the other listed twice (chat)": (P, [(P, -0.80), (N, -1.20), (N, -1.39)], P, "positive", None),
    "the other NaN": (P, [(P, -0.1), (N, NAN)], None, "positive", None),
    "summing past 1": (P, [(P, -0.1), (N, -0.5)], None, "positive", None),
    "a token not a string": (P, [(P, -0.1), (7, -3.0)], None, "positive", None),
    # Alternatives that do not describe the label read.
    "look-alike case only (' Positive' is not ' positive')": (P, {" Positive": -0.1, N: -3.0}, None, "positive", None),
    "byte-level tokens (Ġ), not named": (P, {"Ġpositive": -0.1, "Ġnegative": -2.5}, None, "positive", None),
    "byte-level tokens (Ġ), named": (P, {"Ġpositive": -0.1, "Ġnegative": -2.5}, "Ġpositive", "positive", None),
    "generated token of the other label": (P, [(P, -3.0), (N, -0.1)], N, "positive", None),
    "look-alike letters (Cyrillic о)": (" pоsitive", {" pоsitive": -0.1, N: -3.0}, None, UNPARSED,
                                        {"positive": 0.0, "negative": p(-3.0)}),
    # Texts that name no label are unparsed whatever the alternatives.
    "a third word": (" neutral", {" neutral": -0.5, N: -1.5, P: -3.0}, None, UNPARSED,
                     {"positive": p(-3.0), "negative": p(-1.5)}),
    "empty": ("", {P: -0.1}, None, UNPARSED, None),
    "no alternatives": (P, None, None, "positive", None),
    # A decision: its choice, probabilities as logs (0 as −inf).
    "decision": ("positive", {"positive": math.log(0.9), "negative": math.log(0.1)}, "positive", "positive",
                 {"positive": 0.9, "negative": 0.1}),
    "decision one ulp past 1": ("positive", {"positive": math.log(1.0000000000000002), "negative": math.log(1e-9)},
                                "positive", "positive", {"positive": 1.0, "negative": 1e-9}),
    "decision 5.0": ("positive", {"positive": math.log(5.0), "negative": math.log(0.2)}, "positive", "positive", None),
    "decision the other's alone": ("positive", {"negative": math.log(0.1)}, "positive", "positive", None),
    "decision listed twice": ("positive", [("positive", math.log(0.9)), ("negative", math.log(0.1)),
                                           ("positive", math.log(0.01))], "positive", "positive", None),
}  # fmt: skip


def classifier(labels=("negative", "positive")) -> LLMClassifier:
    return LLMClassifier(MockBackend(lambda prompt: "x"), "Review: {text}\nSentiment:", list(labels))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_label_is_the_texts_and_the_alternatives_only_score_it(name):
    text, said, chosen, label, probabilities = ROWS[name]
    clf, completion = classifier(), Completion(text, said, chosen=chosen)
    assert clf.answer(completion)[0] == label
    got = clf.answer(completion)[1]
    if probabilities is None:
        assert got is None
    else:
        assert got == pytest.approx(probabilities)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_an_answer_cut_short_is_unparsed_and_carries_nothing(name):
    text, said, chosen, _, _ = ROWS[name]
    completion = Completion(text, said, cut=True, chosen=chosen)
    assert classifier().answer(completion)[0] == UNPARSED and classifier().answer(completion)[1] is None


def test_probabilities_never_choose_the_label():
    """Over the whole table: whenever probabilities are given, the label read is the text's alone."""
    reader = LabelReader(["negative", "positive"])
    for text, _, _, label, _ in ROWS.values():
        assert reader.label(text) == label


def test_a_token_that_could_start_two_labels_counts_for_neither_and_then_describes_no_answer():
    clf = classifier(["positive", "positive mixed", "negative"])
    said = {"positive": -0.5, "Positive mixed": -2.0, "neg": -3.0}
    assert clf.answer(Completion("positive", said))[0] == "positive"
    assert clf.answer(Completion("positive", said))[1] is None  # its token is not positive's alone
    got = clf.answer(Completion("Positive mixed", said, chosen="Positive mixed"))[1]
    assert got == pytest.approx({"positive": 0.0, "positive mixed": p(-2.0), "negative": p(-3.0)})


# The same rule where a request's label sits inside its JSON answer or a tool call's arguments (`read_at`):
# name: (the answer's text, its tokens and their alternatives, the calls, the place, the label, its probabilities)
J = '{"s": "positive"}'
OPEN, CLOSE = ('{"s": "', []), ('"}', [])


def value(*pairs):
    """The value's token, "positive", with its alternatives."""
    return ("positive", list(pairs))


JSON_ROWS = {
    "the value, a token of its own": (
        J, [OPEN, value(("positive", -0.1), ("negative", -2.5)), CLOSE], (), ("s",), "positive",
        {"positive": p(-0.1), "negative": p(-2.5)},
    ),
    "the value's token holds its quote": (
        J, [('{"s":', []), (' "positive', [(' "positive', -0.2), (' "negative', -1.9), (" {", -3.0)]), CLOSE], (),
        ("s",), "positive", {"positive": p(-0.2), "negative": p(-1.9)},
    ),
    "a trailing token the server trimmed": (
        J, [OPEN, value(("positive", -0.1)), CLOSE, ("\n", [])], (), ("s",), "positive",
        {"positive": p(-0.1), "negative": 0.0},
    ),
    "tokens that do not spell the text": (
        J, [('{"t": "', []), value(("positive", -0.1)), CLOSE], (), ("s",), "positive", None,
    ),
    "an alternative above the value chooses nothing": (
        J, [OPEN, value(("negative", -0.1), ("positive", -2.5)), CLOSE], (), ("s",), "positive",
        {"positive": p(-2.5), "negative": p(-0.1)},
    ),
    "no tokens": (J, None, (), ("s",), "positive", None),
    "a nested field": ('{"a": {"s": "negative"}}', None, (), ("a", "s"), "negative", None),
    "not JSON": ('{"s": "positive"', None, (), ("s",), UNPARSED, None),
    "the field missing": ('{"t": "positive"}', None, (), ("s",), UNPARSED, None),
    "a value naming no label": ('{"s": "neutral"}', None, (), ("s",), UNPARSED, None),
    "a value that is no string": ('{"s": 1}', None, (), ("s",), UNPARSED, None),
    "a refusal (no content)": ("", None, (), ("s",), UNPARSED, None),
}  # fmt: skip
TOOL_ROWS = {
    "the forced tool's argument": ([("route", '{"s": "negative"}')], "negative"),
    "another tool's call": ([("other", '{"s": "negative"}')], UNPARSED),
    "arguments cut short": ([("route", '{"s": "negat')], UNPARSED),
    "no call": ([], UNPARSED),
}


@pytest.mark.parametrize("name", sorted(JSON_ROWS))
def test_a_json_field_names_the_label_and_its_value_s_first_token_scores_it(name):
    from llm_anchors.models.answer import Place, read_at

    text, tokens, calls, path, label, probabilities = JSON_ROWS[name]
    said = read_at(LabelReader(["negative", "positive"]), Place("json", path), text, tokens, calls)
    assert said[0] == label
    if probabilities is None:
        assert said[1] is None
    else:
        assert said[1] == pytest.approx(probabilities)


@pytest.mark.parametrize("name", sorted(TOOL_ROWS))
def test_a_forced_tool_s_argument_names_the_label_and_carries_no_probabilities(name):
    from llm_anchors.models.answer import Place, read_at

    calls, label = TOOL_ROWS[name]
    said = read_at(LabelReader(["negative", "positive"]), Place("tool", ("s",), "route"), "", None, calls)
    assert said == (label, None)
