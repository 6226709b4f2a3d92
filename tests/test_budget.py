import asyncio
import random
import threading
from dataclasses import replace
from decimal import Decimal

import pytest

from llm_anchors import (
    AnchorsExplainer,
    Budget,
    BudgetExceeded,
    ConfigError,
    FunctionClassifier,
    LLMClassifier,
    RetryPolicy,
    SearchParams,
)
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.extend import Charge, Price
from tests.conftest import needs_all
from tests.fault_server import FaultServer

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
PRICE = Price(Decimal("0.15"), Decimal("0.60"), Decimal("0.075"))  # a hosted model's, per 1M tokens
SENTENCES = ["a good and great film", "good , great and bold", "not good not great", "great acting , good plot ."]


def sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


async def test_reserve_refuses_what_would_pass_a_cap_and_waits_for_what_calls_in_flight_hold():
    budget = Budget(max_usd="1.00", max_queries=10, max_tokens=1000)
    first = await budget.reserve(Charge(4, 100, 4, Decimal("0.40")))
    second = await budget.reserve(Charge(4, 100, 4, Decimal("0.40")))
    with pytest.raises(BudgetExceeded, match="max_usd"):  # not waiting: refused while the others hold
        await budget.reserve(Charge(1, 10, 1, Decimal("0.30")))
    asked = []
    room = budget._room

    def counted(charge, wait):
        asked.append(charge)
        return room(charge, wait)

    budget._room = counted  # type: ignore[method-assign]
    third = asyncio.ensure_future(budget.reserve(Charge(1, 10, 1, Decimal("0.30")), wait=True))
    await asyncio.sleep(0.3)
    assert not third.done()  # it fits once the calls in flight settle: it waits for them
    assert len(asked) == 1  # asleep until one ends, not asking again and again
    settling = threading.Thread(target=budget.settle, args=(first, Charge(4, 90, 4, Decimal("0.15"))))
    settling.start()  # billed far below its worst case, settled from another thread
    assert (await asyncio.wait_for(third, 5)).charge.usd == Decimal("0.30") and len(asked) == 2
    settling.join()
    with pytest.raises(BudgetExceeded, match="max_usd"):  # cannot fit however the others settle
        await budget.reserve(Charge(1, 10, 1, Decimal("0.90")), wait=True)
    budget.release(second)
    budget.release(await third)
    assert budget.settled == Charge(4, 90, 4, Decimal("0.15"))
    assert budget.reserved == Charge()
    with pytest.raises(BudgetExceeded, match="max_queries"):
        await budget.reserve(Charge(7, 0, 0, Decimal(0)))
    with pytest.raises(ConfigError):
        budget.settle(first, Charge())
    report = budget.report()
    assert report.refused == 3 and report.calls == 1 and report.reservations == 3
    assert "0.150000" in report.table() and '"queries": 4' in report.to_json()


@pytest.mark.parametrize(
    "kwargs", [{"max_usd": -1}, {"max_usd": "abc"}, {"max_usd": "nan"}, {"max_queries": 1.5}, {"max_tokens": -2},
               {"max_queries": True}]
)  # fmt: skip
def test_bad_caps(kwargs):
    with pytest.raises(ConfigError):
        Budget(**kwargs)


def test_reserve_is_atomic_across_threads():
    budget = Budget(max_queries=1000)
    granted = []

    def worker():
        async def take():
            for _ in range(500):
                try:
                    granted.append(await budget.reserve(Charge(queries=1)))
                except BudgetExceeded:
                    pass

        asyncio.run(take())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 1000


async def test_a_dollar_cap_refuses_a_model_whose_price_is_only_assumed():
    budget = Budget(max_usd="0.0001")
    with pytest.raises(ConfigError, match="price is unknown"):
        await budget.reserve(Charge(queries=1, unpriced=True))
    assert budget.report().reservations == 0
    await Budget(max_queries=5).reserve(Charge(queries=1, unpriced=True))  # no dollar cap: nothing to price


async def test_a_written_off_call_counts_at_its_worst_case_until_its_bill_arrives():
    budget = Budget(max_queries=10)
    held = await budget.reserve(Charge(queries=8))
    budget.write_off(held)  # its worker died with the call in flight
    assert (budget.settled.queries, budget.reserved) == (8, Charge())
    with pytest.raises(BudgetExceeded):
        await budget.reserve(Charge(queries=3))
    budget.settle(held, Charge(queries=2))  # the bill came after all
    assert budget.settled.queries == 2
    other = await budget.reserve(Charge(queries=3))
    budget.write_off(other)
    budget.release(other)  # refused unbilled after all
    assert budget.settled.queries == 2


def priced(url, **kw):
    backend = OpenAICompatibleBackend(url, "hosted-model", timeout=0.5, max_request_size=4)
    return LLMClassifier(backend, PROMPT, LABELS, price=PRICE, **kw)


@pytest.mark.slow
async def test_no_overshoot_in_200_randomised_concurrent_runs():
    """Several explanations share one budget; latencies and failures are random."""
    retry = RetryPolicy(max_attempts=8, initial_wait=0.001, max_wait=0.005, jitter=0.002)
    async with FaultServer(answer=sentiment, fail_rate=0.1, latency=(0.0, 0.004), hang_s=0.7) as server:
        exhausted = 0
        for seed in range(200):
            rng = random.Random(seed)
            server.rng = random.Random(seed)
            budget = Budget(
                max_usd=Decimal(rng.randint(5, 60)) / Decimal(10**6),
                max_queries=rng.randint(20, 200),
                max_tokens=rng.randint(300, 3000),
            )
            explainers = [
                AnchorsExplainer(
                    priced(server.base_url),
                    seed=seed + i,
                    budget=budget,
                    on_budget="return",
                    retry=retry,
                    max_concurrency=rng.randint(1, 8),
                    search=SearchParams(batch_size=rng.choice([10, 25, 50])),
                )
                for i in range(3)
            ]
            results = await asyncio.gather(
                *(e.explain(rng.choice(SENTENCES)) for e in explainers), return_exceptions=True
            )
            for e in explainers:
                await e.aclose()
            spent = budget.settled
            assert spent.usd <= budget.max_usd, seed
            assert spent.queries <= budget.max_queries, seed
            assert spent.tokens <= budget.max_tokens, seed
            assert budget.reserved == Charge(), seed
            assert budget.report().over_reservation == 0, seed
            for r in results:
                assert not isinstance(r, Exception) or isinstance(r, BudgetExceeded), r
            exhausted += sum(1 for r in results if isinstance(r, BudgetExceeded) or r.meta.budget_exhausted)
        assert exhausted > 50  # the caps really bound


async def test_dollar_sums_are_exact():
    async with FaultServer(answer=sentiment) as server:
        budget = Budget(max_usd=1)
        explainers = [AnchorsExplainer(priced(server.base_url), seed=i, budget=budget) for i in range(3)]
        exps = [await e.explain(s) for e, s in zip(explainers, SENTENCES, strict=False)]
        for e in explainers:
            await e.aclose()
    total = sum((Decimal(x.meta.cost.settled.usd) for x in exps), Decimal(0))
    assert budget.settled.usd == total
    tokens = (
        sum(x.meta.cost.settled.prompt_tokens for x in exps),
        sum(x.meta.cost.settled.completion_tokens for x in exps),
    )
    assert total == PRICE.cost(Charge(prompt_tokens=tokens[0], completion_tokens=tokens[1]))  # exact: no float
    assert total > 0
    assert all(Decimal(x.meta.cost.reserved.usd) >= Decimal(x.meta.cost.settled.usd) for x in exps)


async def test_cache_hits_cost_nothing():
    async with FaultServer(answer=sentiment) as server:
        async with AnchorsExplainer(priced(server.base_url), seed=0) as e:
            first = await e.explain(SENTENCES[0])
            again = await e.explain(SENTENCES[0])
    assert Decimal(first.meta.cost.settled.usd) > 0
    assert again.meta.queries == 0 and Decimal(again.meta.cost.settled.usd) == 0


async def test_exhaustion_raises_or_returns_best_rule_so_far():
    clf = FunctionClassifier(needs_all("good", "great"))
    text = "this is a good and great movie with a fine plot overall"
    with pytest.raises(BudgetExceeded):
        await AnchorsExplainer(clf, seed=0, budget=Budget(max_queries=150)).explain(text)
    exp = await AnchorsExplainer(clf, seed=0, budget=Budget(max_queries=150), on_budget="return").explain(text)
    assert exp.meta.budget_exhausted
    assert exp.meta.queries <= 150
    lo, hi = exp.data.precision_bounds
    assert 0.0 <= lo <= exp.data.precision <= hi <= 1.0
    assert "budget exhausted" in str(exp)
    # With room to finish, the same explanation is found and not flagged.
    full = await AnchorsExplainer(clf, seed=0, budget=Budget(max_queries=100_000), on_budget="return").explain(text)
    assert not full.meta.budget_exhausted and full.data.anchor == ("good", "great")


async def test_unknown_hosted_model_needs_a_price():
    backend = OpenAICompatibleBackend("https://llm.example.com/v1", "mystery-model")
    with pytest.raises(ConfigError, match="no price"):
        LLMClassifier(backend, PROMPT, LABELS)
    local = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "mystery-model")
    assert LLMClassifier(local, PROMPT, LABELS).price.input == 0


async def test_persisted_cache_makes_a_second_run_free(tmp_path):
    from llm_anchors import QueryCache

    async with FaultServer(answer=sentiment) as server:
        async with AnchorsExplainer(priced(server.base_url), seed=0, cache=QueryCache(tmp_path / "q.db")) as e:
            first = await e.explain(SENTENCES[0])
        e.cache.close()
        # Another explainer, another cache object, the same file: as a later process would.
        async with AnchorsExplainer(priced(server.base_url), seed=0, cache=QueryCache(tmp_path / "q.db")) as e:
            second = await e.explain(SENTENCES[0])
    assert first.meta.queries > 0
    assert second.meta.queries == 0 and Decimal(second.meta.cost.settled.usd) == 0
    assert second.data == first.data


def test_bad_cache_file(tmp_path):
    from llm_anchors import QueryCache

    bad = tmp_path / "not-a-db"
    bad.write_text("garbage " * 100)
    with pytest.raises(ConfigError):
        QueryCache(bad)


class _OverReporting:
    """A backend that reports 20 completion tokens per prompt whatever max_tokens says."""

    is_local = False
    model = "hosted-model"

    def __init__(self):
        from llm_anchors.extend import MockBackend

        self.inner = MockBackend(sentiment, others=LABELS)

    @property
    def identity(self):
        return "over-reporting"

    async def complete(self, prompts, params):
        from llm_anchors.extend import Completions

        got = await self.inner.complete(prompts, params)
        return Completions(got.items, replace(got.usage, completion_tokens=20 * len(prompts)), len(prompts))

    async def aclose(self):
        pass


async def test_a_server_billing_past_its_bound_is_recorded_at_its_bill_and_ends_the_explanation():
    budget = Budget(max_usd="0.0002")
    clf = LLMClassifier(_OverReporting(), PROMPT, LABELS, price=PRICE)
    explainer = AnchorsExplainer(
        clf, seed=0, budget=budget, on_budget="return", max_concurrency=4, search=SearchParams(batch_size=50)
    )
    exp = await explainer.explain(SENTENCES[0])
    report, cost = budget.report(), exp.meta.cost
    assert exp.meta.budget_exhausted and report.settled.usd > budget.max_usd  # it was held at the worst case
    excess = report.settled.usd - budget.max_usd
    assert report.passed.startswith(f"settled spend passed the cap by ${excess:.6f}: $")
    assert cost.disputed == {"more completion tokens than the request allowed": report.calls} and report.calls > 1
    assert cost.settled.completion_tokens == 20 * cost.settled.queries  # as billed, never at the bound of 1
    from llm_anchors.cli import render

    assert f"disputed    {report.calls} calls counted at their worst case or their bill, the larger" in render(exp)


async def test_a_disputed_bill_counts_each_part_at_the_larger_of_the_worst_case_and_the_report(tmp_path):
    from llm_anchors.money.charge import disputed, implausible

    worst = Charge(8, 800, 8, Decimal("0.001"))
    huge = Charge(8, 10**9, 8, Decimal("150"))
    assert implausible(huge, worst) == "more prompt tokens than were sent"
    assert disputed(worst, huge) == Charge(8, 10**9, 8, Decimal("150"), disputed=1)
    below = Charge(8, -5, 2, Decimal("-1"))  # what cannot be a count says nothing
    assert disputed(worst, below) == Charge(8, 800, 8, Decimal("0.001"), disputed=1)
    budget = Budget(max_usd="1", journal=tmp_path / "j.jsonl")
    budget.settle(await budget.reserve(worst), huge)
    assert budget.settled == disputed(worst, huge) and budget.passed.startswith("settled spend passed the cap by $149")
    budget.close()
    with Budget(max_usd="1", journal=tmp_path / "j.jsonl") as again:  # replayed: said again
        assert again.passed == budget.passed
        with pytest.raises(BudgetExceeded):
            await again.reserve(worst)


class _Overbilling:
    """A classifier that bills $0.0001 a call but quotes nothing: it can pass a dollar cap."""

    identity = "overbilling"

    async def classify(self, texts):
        from llm_anchors.extend import Batch, Charge

        return Batch([sentiment(t) for t in texts], Charge(usd=Decimal("0.0001")))


@pytest.mark.parametrize("on_budget", ["raise", "return"])
async def test_a_classifier_billing_past_its_quote_ends_the_explanation_and_says_by_how_much(on_budget):
    budget = Budget(max_usd="0.00015")  # passed by the second call, which every explanation makes (the root's)
    explainer = AnchorsExplainer(_Overbilling(), seed=0, budget=budget, on_budget=on_budget, max_concurrency=1)
    if on_budget == "raise":
        with pytest.raises(BudgetExceeded, match="passed the cap"):
            await explainer.explain(SENTENCES[0])
    else:
        exp = await explainer.explain(SENTENCES[0])
        assert exp.meta.budget_exhausted
    report = budget.report()
    assert report.passed.startswith("settled spend passed the cap by $") and report.settled.usd > budget.max_usd
    spent = report.settled.usd
    with pytest.raises(BudgetExceeded):  # nothing more is sent
        await AnchorsExplainer(_Overbilling(), seed=1, budget=budget).explain(SENTENCES[1])
    assert budget.report().settled.usd == spent


def test_a_backend_that_does_not_say_it_is_local_is_priced():
    from llm_anchors.extend import MockBackend

    class Custom:
        identity = "custom"

        async def complete(self, prompts, params): ...

        async def aclose(self): ...

    with pytest.raises(ConfigError, match="cannot price"):
        LLMClassifier(Custom(), PROMPT, LABELS)
    assert LLMClassifier(Custom(), PROMPT, LABELS, price=PRICE).price == PRICE
    assert LLMClassifier(MockBackend(sentiment), PROMPT, LABELS).price.input == 0
    hosted = _OverReporting()
    with pytest.raises(ConfigError):  # a hosted model of unknown price
        LLMClassifier(hosted, PROMPT, LABELS)


def test_a_journal_a_write_failed_on_closes_without_raising_the_same_failure_again(tmp_path):
    # A full disk: the write's flush fails, and so does closing (Python flushes the unwritten bytes
    # again). The write's failure is the one reported; closing must not replace it with an OSError.
    import errno

    from llm_anchors import ConfigError
    from llm_anchors.money.journal import Journal

    class Full:
        def write(self, text):
            return len(text)

        def flush(self):
            raise OSError(errno.EFBIG, "File too large")

        def close(self):
            raise OSError(errno.EFBIG, "File too large")

    journal = Journal(tmp_path / "j.jsonl")
    journal._handle.close()
    journal._handle = Full()
    with pytest.raises(ConfigError, match="File too large"):
        journal.write({"r": 1})
    journal.close()  # reported once, by the write
    fresh = Journal(tmp_path / "k.jsonl")
    fresh._handle.close()
    fresh._handle = Full()
    with pytest.raises(ConfigError, match="cannot write the budget journal"):
        fresh.close()  # a close that fails first is reported, typed
