"""Decision endpoints as the explained model: OpenAI's /v1/decisions (aiohttp and the openai SDK) and
/v1/systemone, against the loopback fake server in their documented shapes."""

import json
import math
from decimal import Decimal

import openai
import pytest

from llm_anchors import UNPARSED, AnchorsExplainer, Budget, LLMClassifier, RetryPolicy
from llm_anchors.backends.decisions import INSTRUCTIONS
from llm_anchors.backends.openai_client import OpenAIClientBackend
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.money import price_for
from llm_anchors.money.journal import read_journal
from tests.fault_server import FaultServer
from tests.test_cli import cli, lines

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
SENTENCE = "this is a good and great movie with a fine plot"
FAST_RETRY = RetryPolicy(max_attempts=12, initial_wait=0.01, max_wait=0.05, jitter=0.01)
pytestmark = pytest.mark.filterwarnings("ignore:the prompt cannot be cached")


def sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    if "refuse" in words:
        return ""  # a refusal
    return "positive" if "good" in words and "great" in words else "negative"


async def test_openai_decisions_over_aiohttp_answer_with_the_class_probabilities():
    async with FaultServer(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-6-luna", endpoint="decisions", api_key="sk")
        clf = LLMClassifier(backend, PROMPT, LABELS)
        try:
            batch = await clf.classify(["a good and great film", "a dull film", "I refuse to say"])
            answers = await backend.complete([clf.render("a good and great film")], clf.params)
            quoted = await clf.quote(["a good and great film"])
        finally:
            await clf.aclose()
    assert batch.labels == ["positive", "negative", UNPARSED]  # a refusal names no label
    assert answers.items[0].alternatives == pytest.approx({"positive": math.log(0.9), "negative": math.log(0.1)})
    body = next(b for b in server.bodies if b["input"] == clf.render("a good and great film"))  # sent at once
    (question,) = body["questions"]
    assert question["type"] == "choice"
    assert [c["value"] for c in question["choices"]] == LABELS and question["instructions"] == INSTRUCTIONS
    assert all(r["path"] == "/v1/decisions" for r in server.requests)
    # Billed on the input tokens the provider says, the question's among them; reserved above them.
    billed = batch.charge
    assert billed.prompt_tokens == sum(a["prompt_tokens"] for a in server.answered[:3])
    assert quoted.prompt_tokens >= max(a["prompt_tokens"] for a in server.answered) and quoted.estimated
    assert quoted.completion_tokens == clf.params.max_tokens == 16  # output and reasoning tokens it may bill
    assert billed.usd == price_for("gpt-6-luna").cost(billed)


async def test_systemone_answers_by_question_id():
    async with FaultServer(answer=sentiment) as server:
        backend = OpenAICompatibleBackend(server.base_url, "local-model", endpoint="systemone")
        clf = LLMClassifier(backend, PROMPT, LABELS)
        try:
            batch = await clf.classify(["a good and great film", "a dull film"])
        finally:
            await clf.aclose()
    assert batch.labels == ["positive", "negative"]
    assert {b["state"] for b in server.bodies} == {clf.render("a good and great film"), clf.render("a dull film")}
    assert all(b["questions"]["label"]["criteria"] == {"negative": None, "positive": None} for b in server.bodies)
    assert all(r["path"] == "/v1/systemone" for r in server.requests)


async def test_decisions_through_the_sdk_within_the_cap_and_never_retried_by_it():
    async with FaultServer(answer=sentiment, fail_rate=0.2, kinds=("429", "500"), cached_input=4) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=5)
        clf = LLMClassifier(OpenAIClientBackend(client, "gpt-6-luna", endpoint="decisions"), PROMPT, LABELS)
        budget = Budget(max_usd=Decimal("0.01"))
        async with AnchorsExplainer(clf, seed=0, budget=budget, retry=FAST_RETRY) as explainer:
            exp = await explainer.explain(SENTENCE)
        await client.close()
    assert exp.data.label == "positive" and exp.data.anchor and set(exp.data.anchor) <= {"good", "great"}
    seen = server.requests
    assert all(r["path"] == "/v1/decisions" and r["headers"]["x-stainless-retry-count"] == "0" for r in seen)
    assert len(seen) == exp.meta.queries + exp.meta.cost.retries and exp.meta.cost.retries > 0
    settled = budget.report().settled
    true_cost = price_for("gpt-6-luna").cost(sum((_charge(a) for a in server.answered), start=type(settled)()))
    assert settled.cache_read_tokens == 4 * exp.meta.queries  # cached input, billed at the cached rate
    assert settled.usd == true_cost and 0 < settled.usd <= Decimal("0.01")


def _charge(answered: dict):
    from llm_anchors.extend import Charge

    tokens, out, cached = answered["prompt_tokens"], answered["completion_tokens"], answered["cached_tokens"]
    return Charge(1, tokens, out, cache_read_tokens=cached)


async def test_cli_run_report_and_estimate_on_the_decisions_endpoint(tmp_path):
    texts = [SENTENCE, "a dull and boring film with a weak plot", "I refuse to review this film at all"]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=sentiment) as server:
        common = [str(source), "--out", str(out), "--base-url", server.base_url, "--model", "gpt-6-luna",
                  "--endpoint", "decisions", "--prompt", PROMPT, "--max-usd", "0.02"]  # fmt: skip
        code, err = await cli("estimate", *common)
        assert code == 0, err
        code, err = await cli("run", *common)
        assert code == 0 and "2/3 inputs explained" in err and "1 could not be explained" in err, err
    records = sorted(lines(out), key=lambda r: r["index"])
    assert [r["explanation"]["data"]["label"] for r in records[:2]] == ["positive", "negative"]
    assert "names none of the labels" in records[2]["failed"] and "fault" not in records[2]  # a refusal: no label
    journal = read_journal(f"{out}.budget.jsonl")
    assert 0 < journal.spent.usd <= Decimal("0.02") and journal.open.queries == 0
    code, err = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    assert code == 0 and "gpt-6-luna" in (tmp_path / "report.html").read_text(), err


def test_a_decisions_probabilities_that_cannot_all_be_read_say_nothing_and_the_choice_stands():
    from llm_anchors.backends.decisions import read_decision

    def said(*pairs):
        listed = [{"value": v, "probability": p} for v, p in pairs]
        return {"answers": [{"type": "choice", "choice": "positive", "confidence": 0.9, "probabilities": listed}]}

    broken = [("negative", True), ("negative", float("nan")), ("negative", 1.5), ("negative", -0.1), ("negative", None)]
    for pair in broken:
        item = read_decision("decisions", said(("positive", 0.9), pair), "who", LABELS)
        assert item.text == item.chosen == "positive" and item.alternatives is None, pair
    from llm_anchors.extend import AnswerWarning

    with pytest.warns(AnswerWarning, match=r"not asked \(neutral\)"):
        read = read_decision("decisions", said(("positive", 0.9), ("negative", 0.1), ("neutral", 0.5)), "who", LABELS)
    assert read.alternatives == pytest.approx({"positive": math.log(0.9), "negative": math.log(0.1)})  # asked only


def test_a_service_tier_on_a_decision_endpoint_is_refused_before_anything_is_sent():
    from llm_anchors import ConfigError

    with pytest.raises(ConfigError, match="decision endpoint takes no service tier"):
        OpenAICompatibleBackend("http://127.0.0.1:9/v1", "gpt-6-luna", endpoint="decisions", service_tier="flex")
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk")
    with pytest.raises(ConfigError, match="decision endpoint takes no service tier"):
        OpenAIClientBackend(client, "gpt-6-luna", endpoint="decisions", service_tier="flex")
