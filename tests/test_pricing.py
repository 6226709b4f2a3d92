from decimal import Decimal

import pytest

from llm_anchors import ConfigError
from llm_anchors.extend import LOCAL, Price
from llm_anchors.money import PRICES, load_prices, price_for


def test_cost_is_exact_decimal():
    price = Price(Decimal("0.15"), Decimal("0.60"), Decimal("0.075"))
    assert price.cost(1_000_000, 0) == Decimal("0.15")
    assert price.cost(3, 1) == Decimal("0.00000105")
    assert price.cost(1000, 10, cached_tokens=400) == Decimal("0.000126")
    assert sum(price.cost(7, 1) for _ in range(10)) == price.cost(70, 10)


def test_builtin_prices_are_dated():
    assert all(p.as_of and p.source for p in PRICES.values())
    assert price_for("gpt-4o-mini").input == Decimal("0.15")
    assert price_for("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]


def test_unknown_hosted_model_is_an_error_local_is_assumed_free_but_not_known():
    with pytest.raises(ConfigError, match="no price"):
        price_for("mystery-model")
    assert price_for("mystery-model", local=True) is LOCAL and not LOCAL.known


@pytest.mark.parametrize(
    "name,family",
    [("openai/gpt-4o-mini", "gpt-4o-mini"), ("gpt-4o-2024-08-06", "gpt-4o"), ("litellm/gpt-4.1-mini-2025-04-14",
     "gpt-4.1-mini"), ("gpt-3.5-turbo-instruct-0914", "gpt-3.5-turbo-instruct")],
)  # fmt: skip
def test_a_model_behind_a_local_proxy_or_dated_is_priced_as_its_family(name, family):
    assert price_for(name, local=True) == PRICES[family]  # on a loopback proxy too: never assumed free


def test_a_family_is_only_matched_for_a_dated_snapshot():
    with pytest.raises(ConfigError, match="no price"):
        price_for("gpt-5-pro")  # not gpt-5's price: another model
    assert price_for("gpt-5-pro", local=True) is LOCAL


def test_price_file_overrides(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        '{"gpt-4o-mini": {"input": "0.2", "output": "0.8", "as_of": "2026-11-01"}, "mine": {"input": 1, "output": 2}}'
    )
    prices = load_prices(path)
    assert price_for("gpt-4o-mini", prices=prices).input == Decimal("0.2")
    assert price_for("mine", prices=prices).output == Decimal("2")


@pytest.mark.parametrize(
    "content",
    [
        "not json", '{"m": {"input": "x", "output": 1}}', '{"m": {"output": 1}}', '{"m": {"input": -1, "output": 1}}',
        '{"m": {"input": "nan", "output": 1}}', '{"m": {"input": "Infinity", "output": 1}}', "[]", "{}", '{"m": 3}',
        '{"m": {"input": true, "output": 1}}', '{"m": {"input": 1, "output": 1, "cached_input": "-0.1"}}',
    ],
)  # fmt: skip
def test_bad_price_files(tmp_path, content):
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ConfigError):
        load_prices(path)
