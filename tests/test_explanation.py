import json
from dataclasses import replace

import pytest

from llm_anchors import AnchorsExplainer, Explanation, FunctionClassifier
from tests.conftest import needs_all


@pytest.fixture(scope="module")
def exp() -> Explanation:
    e = AnchorsExplainer(FunctionClassifier(needs_all("good", "great"), name="gg"), seed=3)
    return e.explain_sync("a good & great <b>movie</b>, honestly")


def test_json_round_trip(exp):
    text = exp.to_json()
    assert json.loads(text)["data"]["anchor"] == ["good", "great"]
    back = Explanation.from_json(text)
    assert back == exp
    assert back.to_json() == text


def test_json_that_is_not_an_explanation_is_a_config_error(exp):
    from llm_anchors import ConfigError

    raw = json.loads(exp.to_json())
    raw["meta"]["added_by_another_version"] = 1
    with pytest.raises(ConfigError, match="not an explanation"):
        Explanation.from_json(json.dumps(raw))
    with pytest.raises(ConfigError, match="not an explanation"):
        Explanation.from_json('{"meta": {}}')


def _edited(raw, path, value):
    where = raw
    for key in path[:-1]:
        where = where[key]
    if value is ...:
        del where[path[-1]]
    else:
        where[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("meta", "cost", "settled", "queries"), -1, "meta.cost.settled.queries is -1, below zero"),
        (("meta", "cost", "settled"), [1, 2], "meta.cost.settled is [1, 2], not a mapping"),
        (("meta", "settings", "search", "certify"), "lenient", "meta.settings.search.certify is 'lenient', not one of"),
        (("meta", "settings", "on_budget"), 3, "meta.settings.on_budget is 3, not one of"),
        (("meta", "stages", "root", "samples"), "x", "meta.stages['root'].samples is 'x', not a int"),
        (("data", "anchor"), "good", "data.anchor is 'good', not a list"),
        (("data", "anchor", 0), 7, "data.anchor[0] is 7, not a str"),
        (("data", "precision_bounds"), [0.9], "zip()"),
        (("data", "path", 0, "coverage"), float("inf"), "data.path[0].coverage is inf"),
        (("data", "label"), {"x": 1}, "label is {'x': 1}"),
        (("meta", "memory_hit"), "yes", "meta.memory_hit is 'yes', not a bool"),
        (("meta", "seed"), ..., "seed"),  # a field without a default, left out
    ],
)
def test_what_the_types_do_not_allow_is_refused_with_the_field_named(exp, path, value, said):
    from llm_anchors import ConfigError

    raw = _edited(json.loads(exp.to_json()), path, value)
    with pytest.raises(ConfigError, match="not an explanation") as refused:
        Explanation.from_mapping(raw)
    assert said in str(refused.value)


def test_a_field_left_out_reads_as_its_default(exp):
    raw = json.loads(exp.to_json())
    del raw["data"]["movers"], raw["meta"]["unparsed"]
    back = Explanation.from_mapping(raw)
    assert back.data.movers == () and back.meta.unparsed == 0 and back.data.anchor == exp.data.anchor


def test_html_highlights_the_anchor_and_escapes(exp):
    page = exp._repr_html_()
    assert "<mark><b>good</b></mark>" in page
    assert "<mark><b>great</b></mark>" in page
    assert "&lt;b&gt;" in page and "&amp;" in page and "<b>movie</b>" not in page
    assert "<mark><b>movie</b></mark>" not in page


def test_str_is_one_readable_line(exp):
    line = str(exp)
    assert "\n" not in line
    assert line.startswith("good AND great -> 1")
    assert "precision" in line and "coverage" in line and "queries" in line


def test_dollars_are_exact_decimals_in_python_and_strings_in_json(exp):
    from decimal import Decimal

    from llm_anchors.explain import Cost
    from llm_anchors.extend import Charge

    cost = Cost(Charge(3, 40, 3, Decimal("0.000125")), Charge(3, 48, 30, Decimal("0.000300"), estimated=True), 1)
    priced = type(exp)(replace(exp.meta, cost=cost), exp.data)
    raw = json.loads(priced.to_json())
    assert raw["meta"]["cost"]["settled"]["usd"] == "0.000125"
    back = Explanation.from_json(priced.to_json())
    assert back.meta.cost.settled.usd == Decimal("0.000125") and back.meta.cost.reserved.usd == Decimal("0.000300")
    assert isinstance(back.meta.cost.reserved.usd, Decimal) and back.meta.cost.reserved.estimated
    assert back == priced


def test_the_parts_of_meta_read_back_as_their_types(exp):
    from llm_anchors.explain import Settings, Stage

    back = Explanation.from_json(exp.to_json())
    assert isinstance(back.meta.settings, Settings) and back.meta.settings.search.threshold == 0.95
    assert all(isinstance(stage, Stage) for stage in back.meta.stages.values()) and "root" in back.meta.stages
    assert sum(stage.samples for stage in back.meta.stages.values()) == back.meta.samples
    assert back.meta.memory_hit is None and back.meta.memory is None  # plain Anchors
    raw = json.loads(exp.to_json())
    assert "query" in raw["data"] and "text" not in raw["data"] and "params" not in raw["meta"]
