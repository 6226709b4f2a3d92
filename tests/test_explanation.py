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
