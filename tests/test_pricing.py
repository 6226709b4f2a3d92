"""Prices as providers bill them: genai-prices' rates, price files, cache reads and writes at their rates."""

import json
from dataclasses import asdict
from decimal import Decimal

import pytest

from llm_anchors import ConfigError
from llm_anchors.money import LOCAL, Charge, Price, load_prices, price_for

PRICE = Price(Decimal("0.15"), Decimal("0.60"), cache_read=Decimal("0.075"), cache_write=Decimal("0.1875"))


def test_cost_is_exact_and_prices_each_part_at_its_rate():
    assert PRICE.cost(Charge(prompt_tokens=1_000_000)) == Decimal("0.15")
    assert PRICE.cost(Charge(prompt_tokens=3, completion_tokens=1)) == Decimal("0.00000105")
    usage = Charge(prompt_tokens=1000, completion_tokens=10, cache_read_tokens=400, cache_write_tokens=100)
    # 500 fresh at 0.15, 400 read at 0.075, 100 written at 0.1875, 10 out at 0.60 (per 1M)
    assert PRICE.cost(usage) == (500 * Decimal("0.15") + 400 * Decimal("0.075") + 100 * Decimal("0.1875") + 6) / 10**6
    assert PRICE.uncached(usage) == (1000 * Decimal("0.15") + 6) / 10**6
    assert sum(PRICE.cost(Charge(prompt_tokens=7, completion_tokens=1)) for _ in range(10)) == PRICE.cost(
        Charge(prompt_tokens=70, completion_tokens=10)
    )


def test_the_worst_case_takes_the_dearest_input_rate():
    assert PRICE.worst_case(1_000_000, 0) == Decimal("0.1875")  # a cache write costs more than a fresh token
    assert Price(Decimal(1), Decimal(2)).worst_case(10, 5) == Decimal(20) / 10**6


@pytest.mark.parametrize(
    "name,provider,input_,cached",
    [("gpt-4o-mini", "openai", "0.15", "0.075"), ("gpt-4o-2024-08-06", "openai", "2.5", "1.25"),
     ("claude-3-5-haiku-latest", "anthropic", "0.8", "0.08")],
)  # fmt: skip
def test_prices_come_from_genai_prices_with_their_cache_rates_and_a_date(name, provider, input_, cached):
    price = price_for(name)
    assert (price.input, price.cache_read) == (Decimal(input_), Decimal(cached))
    assert price.as_of and price.source.startswith("genai-prices ") and f"{provider}/" in price.source


def test_anthropic_bills_cache_writes_above_the_input_rate():
    price = price_for("claude-3-5-haiku-latest")
    assert price.cache_write is not None and price.cache_write > price.input > price.cache_read  # 1.25×, 0.1×


def test_a_provider_prefix_or_the_provider_s_address_finds_the_price():
    assert price_for("openai/gpt-4o-mini", local=True).input == Decimal("0.15")  # a loopback proxy: priced
    assert price_for("gpt-4o-mini", api_url="https://api.openai.com/v1").source.endswith("openai/gpt-4o-mini")


def test_a_price_knows_the_model_s_service_tiers_and_its_worst_case_is_the_dearest():
    price = price_for("gpt-5")
    flex, priority = price.at("flex"), price.at("priority")
    assert price.tier_names == ("default", "flex", "priority", "fast") and price.at("default") == price.at(None)
    assert flex is not None and priority is not None and flex.input < price.input < priority.input
    assert "(flex)" in flex.source and price.at("banana") is None and price.at("PRIORITY") is None
    assert price.worst_case(100, 10) == priority.worst_case(100, 10) == (100 * Decimal("2.5") + 10 * 20) / 10**6
    assert price_for("gpt-4o-mini").tier_names == ("default", "priority", "fast")  # no flex tier
    assert price_for("openai/gpt-5", local=True).tier_names == price.tier_names  # a loopback gateway: tiers too


@pytest.mark.parametrize("tier", ["banana", "PRIORITY", "scale"])
def test_a_tier_the_price_does_not_know_is_refused_naming_the_tiers_it_has(tier):
    from llm_anchors.money import check_service_tier

    with pytest.raises(ConfigError, match="auto, default, flex, priority, fast") as caught:
        check_service_tier(price_for("gpt-5"), tier, "gpt-5")
    assert ("did you mean 'priority'" in str(caught.value)) == (tier == "PRIORITY")
    with pytest.raises(ConfigError, match="not a tier of 'gpt-4o-mini'"):
        check_service_tier(price_for("gpt-4o-mini"), "flex", "gpt-4o-mini")
    for fine in (None, "auto", "default", "flex", "priority"):
        check_service_tier(price_for("gpt-5"), fine, "gpt-5")


def test_unknown_hosted_model_is_an_error_local_is_assumed_free_but_not_known():
    with pytest.raises(ConfigError, match="no price"):
        price_for("mystery-model")
    assert price_for("mystery-model", local=True) is LOCAL and not LOCAL.known
    assert price_for("gpt-5-pro").input > price_for("gpt-5").input  # not gpt-5's price: another model


def test_price_file_overrides(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        '{"gpt-4o-mini": {"input": "0.2", "output": "0.8", "cache_read": "0.02", "as_of": "2026-11-01"},'
        ' "mine": {"input": 1, "output": 2}}'
    )
    prices = load_prices(path)
    assert price_for("gpt-4o-mini", prices=prices).input == Decimal("0.2")
    assert price_for("gpt-4o-mini", prices=prices).tier_names == ("default",)  # a price given: its tiers only
    assert price_for("gpt-4o-mini-2024-07-18", prices=prices).cache_read == Decimal("0.02")  # a dated snapshot
    assert price_for("mine", prices=prices).output == Decimal("2")


def test_a_price_file_may_give_a_model_s_tiers(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"mine": {"input": 1, "output": 2, "tiers": {"priority": {"input": 2, "output": 4}}}}')
    price = price_for("mine", prices=load_prices(path))
    assert price.tier_names == ("default", "priority") and price.at("priority").output == Decimal(4)
    assert price.worst_case(10, 10) == Decimal(60) / 10**6
    assert Price(**json.loads(json.dumps(asdict(price), default=str))) == price  # read back from an explanation


@pytest.mark.parametrize(
    "content",
    [
        "not json", '{"m": {"input": "x", "output": 1}}', '{"m": {"output": 1}}', '{"m": {"input": -1, "output": 1}}',
        '{"m": {"input": "nan", "output": 1}}', '{"m": {"input": "Infinity", "output": 1}}', "[]", "{}", '{"m": 3}',
        '{"m": {"input": true, "output": 1}}', '{"m": {"input": 1, "output": 1, "cache_read": "-0.1"}}',
        '{"m": {"input": 1, "output": 1, "tiers": []}}', '{"m": {"input": 1, "output": 1, "tiers": {"p": {}}}}',
        '{"m": {"input": 1, "output": 1, "tiers": {"p": {"input": -1, "output": 1}}}}',
    ],
)  # fmt: skip
def test_bad_price_files(tmp_path, content):
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ConfigError):
        load_prices(path)
