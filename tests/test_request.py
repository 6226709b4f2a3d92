"""The classifier as deployed (issue 69): the chat request the user's code sends, ``{text}`` in its place,
the label read where the user reads it (the content, a JSON field its schema constrains, a forced tool's
argument), its money reserved at the worst case of everything it bills; against a loopback fake that
answers in OpenAI's documented shapes for structured outputs, tool calls and refusals."""

import json
import math

import pytest

from llm_anchors import UNPARSED, ConfigError, LLMClassifier
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.models import ChatRequest
from tests.fault_server import FaultServer
from tests.test_cli import cli

pytestmark = pytest.mark.filterwarnings("ignore:the prompt cannot be cached")

SYSTEM = "You route support tickets. Answer with the queue the ticket belongs to."
LABELS = ["billing", "technical", "account"]


def schema(field="queue"):
    return {"type": "json_schema", "json_schema": {"name": "route", "strict": True, "schema": {
        "type": "object", "properties": {field: {"type": "string", "enum": LABELS}},
        "required": [field], "additionalProperties": False}}}  # fmt: skip


def tool(field="queue"):
    return [{"type": "function", "function": {"name": "route", "parameters": {
        "type": "object", "properties": {field: {"type": "string", "enum": LABELS}}, "required": [field],
        "additionalProperties": False}}}]  # fmt: skip


def body(**more):
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "I was charged twice this month"}, {"role": "assistant", "content": "billing"},
            {"role": "user", "content": "The app crashes when I log in"}, {"role": "assistant", "content": "technical"},
            {"role": "user", "content": "Ticket: {text}"},
        ],
        "temperature": 0, "seed": 7, **more,
    }  # fmt: skip


def router(prompt: str) -> str:
    text = prompt.split("Ticket: ")[-1]
    return "billing" if "refund" in text.split() or "charged" in text.split() else "technical"


# name: (the request, what its label is read at)
SHAPES = {
    "content": (body(max_completion_tokens=4), "content"),
    "json schema": (body(response_format=schema()), "json"),
    "forced tool": (body(tools=tool(), tool_choice={"type": "function", "function": {"name": "route"}}), "tool"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_request_is_sent_as_the_user_sends_it_and_its_label_read_where_they_read_it(shape):
    request, kind = SHAPES[shape]

    def alternatives(prompt, word):
        return [(word, -0.1), (" technical" if word != " technical" else " billing", -2.5)]

    async with FaultServer(answer=router, alternatives=alternatives) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="chat", api_key="sk-test")
        clf = LLMClassifier(backend, ChatRequest(request), LABELS if kind == "content" else ())
        try:
            batch = await clf.classify(['I want a refund "now"', "the screen is black"])
        finally:
            await clf.aclose()
    assert clf.labels == LABELS and clf.request.place.kind == kind
    assert batch.labels == ["billing", "technical"]
    sent = next(b for b in server.bodies if "refund" in b["messages"][-1]["content"])
    assert sent["messages"][:-1] == request["messages"][:-1]  # every other message unchanged
    assert sent["messages"][-1]["content"] == 'Ticket: I want a refund "now"'  # the text in its place, escaped
    for key in ("temperature", "seed", "response_format", "tools", "tool_choice", "max_completion_tokens"):
        assert sent.get(key) == request.get(key)  # the user's settings, as they are
    assert sent["logprobs"] is True  # only what reading probabilities needs is added
    if kind == "json":  # the label's probability, read at the token where the field's value begins
        assert batch.probabilities[0] == pytest.approx({"billing": math.exp(-0.1), "technical": math.exp(-2.5),
                                                        "account": 0.0})  # fmt: skip
    if kind == "tool":
        assert batch.probabilities is None  # a tool call's arguments carry no log-probabilities


async def test_a_refusal_and_an_answer_that_names_no_label_are_unparsed():
    async with FaultServer(answer=router, refuse=lambda prompt: "hate" in prompt) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="chat", api_key="sk-test")
        clf = LLMClassifier(backend, ChatRequest(body(response_format=schema())))
        try:
            batch = await clf.classify(["I hate this", "a refund please"])
        finally:
            await clf.aclose()
    assert batch.labels == [UNPARSED, "billing"]


@pytest.mark.parametrize(
    ("text", "said"),
    [('{"queue": "billing"}', "billing"), ('{"queue": "shipping"}', UNPARSED), ('{"queue": 3}', UNPARSED),
     ('{"queue": "bill', UNPARSED), ("billing", UNPARSED), ('{"other": "billing"}', UNPARSED)],
)  # fmt: skip
def test_the_json_field_names_the_label_or_the_answer_is_unparsed(text, said):
    from llm_anchors.extend import Completion, MockBackend

    clf = LLMClassifier(MockBackend(lambda p: text), ChatRequest(body(response_format=schema())))
    assert clf.answer(Completion(text))[0] == said


def test_a_schema_with_several_enum_fields_needs_the_field_named():
    two = schema()
    two["json_schema"]["schema"]["properties"]["urgency"] = {"type": "string", "enum": ["low", "high"]}
    with pytest.raises(ConfigError, match="2 enum fields"):
        ChatRequest(body(response_format=two))
    assert ChatRequest(body(response_format=two), label="urgency").enum == ("low", "high")


@pytest.mark.parametrize(
    ("bad", "said"),
    [({"messages": [{"role": "user", "content": "no placeholder"}]}, "exactly once"),
     ({"messages": [{"role": "user", "content": "{text} and {text}"}]}, "exactly once"),
     ({"messages": "{text}"}, "messages"), ({"messages": [{"role": "user", "content": "{text}"}], "n": 3}, "'n'")],
)  # fmt: skip
def test_a_request_that_cannot_be_explained_is_refused(bad, said):
    with pytest.raises(ConfigError, match=said):
        ChatRequest(bad)


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_the_reserved_worst_case_is_never_below_the_bill(shape):
    request, kind = SHAPES[shape]
    async with FaultServer(answer=router) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="chat", api_key="sk-test")
        clf = LLMClassifier(backend, ChatRequest(request), LABELS if kind == "content" else ())
        texts = ["a refund for the double charge", "it crashes at start", "my password"]
        quoted = [await clf.quote([t]) for t in texts]
        batches = [await clf.classify([t]) for t in texts]
        await clf.aclose()
    for worst, batch in zip(quoted, batches, strict=True):
        assert (
            worst.prompt_tokens >= batch.charge.prompt_tokens
            and worst.completion_tokens >= batch.charge.completion_tokens
        )
        assert worst.usd >= batch.charge.usd


def test_a_request_whose_output_nothing_bounds_is_refused_under_a_dollar_cap(tmp_path):
    import asyncio

    free = body()  # no max_completion_tokens, no schema: the output has no bound
    path = tmp_path / "request.json"
    path.write_text(json.dumps(free))
    code, err = asyncio.run(cli("explain", "a refund", "--base-url", "http://127.0.0.1:9/v1", "--request", f"@{path}",
                                "--labels", ",".join(LABELS), "--max-usd", "1"))  # fmt: skip
    assert code == 2 and "max_completion_tokens" in err, err


async def test_explain_takes_the_request_from_the_command_line(tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body(response_format=schema())))
    async with FaultServer(answer=router) as server:
        code, out = await cli("explain", "I was charged twice for my refund", "--base-url", server.base_url,
                              "--request", f"@{path}", "--json", "--max-usd", "0.05", stdout=True)  # fmt: skip
    assert code == 0, out
    explained = json.loads(out)
    assert explained["data"]["label"] == "billing" and explained["meta"]["queries"] > 0
    assert all(b["messages"][0]["content"] == SYSTEM for b in server.bodies)


async def test_run_estimate_check_and_report_take_the_request(tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body(response_format=schema())))
    source = tmp_path / "in.jsonl"
    texts = ["I was charged twice and want a refund", "the app crashes on start", "a refund for my plan"]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=router) as server:
        common = [str(source), "--out", str(out), "--base-url", server.base_url, "--request", f"@{request}",
                  "--max-usd", "0.05"]  # fmt: skip
        code, said = await cli("estimate", *common, "--json", stdout=True)
        assert code == 0, said
        share = json.loads(said)["cached_share"]
        assert share == 0.0  # the system message and two examples are far below OpenAI's 1,024-token minimum
        code, err = await cli("run", *common)
        assert code == 0 and "3/3 inputs explained" in err, err
        code, said = await cli("check", texts[0], "--anchor", "refund", "--base-url", server.base_url, "--request",
                               f"@{request}", "--n", "50", "--json", stdout=True)  # fmt: skip
        assert code == 0 and json.loads(said)["precision"] == 1.0, said
    assert all(b["response_format"] == schema() and b["messages"][0]["content"] == SYSTEM for b in server.bodies)
    labels = [json.loads(line)["explanation"]["data"]["label"] for line in out.read_text().splitlines()[1:]]
    assert sorted(labels) == ["billing", "billing", "technical"]
    code, err = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    shown = ChatRequest(body(response_format=schema())).shown()
    assert code == 0 and shown["id"] in page and "json:queue" in page, err
    assert SYSTEM not in page and "charged twice this month" not in page  # no message's text


@pytest.mark.parametrize(
    ("more", "said"),
    [(["--prompt", "Say: {text}"], "give no --prompt"), (["--endpoint", "completions"], "--endpoint must be chat"),
     (["--max-output-tokens", "5"], "put max_completion_tokens in the request"),
     (["--label-field", "urgency"], "the label field 'urgency'"), (["--model", "gpt-4o"], "names model 'gpt-4o-mini'")],
)  # fmt: skip
async def test_a_request_the_command_line_contradicts_is_refused_before_anything_is_sent(tmp_path, more, said):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body(max_completion_tokens=4)))
    async with FaultServer(answer=router) as server:
        code, err = await cli("explain", "a refund", "--base-url", server.base_url, "--request", f"@{path}",
                              "--labels", ",".join(LABELS), *more)  # fmt: skip
    assert code == 2 and said in err and server.prompts_served == 0, err


def sentiment_request() -> dict:
    """A sentiment classifier as deployed: a system message, two examples, the review last, a JSON schema."""
    said = {"type": "object", "properties": {"sentiment": {"type": "string", "enum": ["negative", "positive"]}},
            "required": ["sentiment"], "additionalProperties": False}  # fmt: skip
    return {
        "model": "gemma-3-270m-q4_k_m",
        "messages": [
            {"role": "system", "content": "You classify the sentiment of movie reviews as positive or negative."},
            {"role": "user", "content": "Review: a wonderful, moving film"},
            {"role": "assistant", "content": '{"sentiment": "positive"}'},
            {"role": "user", "content": "Review: a boring, clumsy mess"},
            {"role": "assistant", "content": '{"sentiment": "negative"}'},
            {"role": "user", "content": "Review: {text}"},
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "sentiment", "schema": said}},
        "temperature": 0,
    }


async def test_the_embedded_model_is_explained_through_a_system_two_example_schema_request(llama_url):
    from llm_anchors import AnchorsExplainer

    backend = OpenAICompatibleBackend(llama_url, "gemma-3-270m-q4_k_m", endpoint="chat", max_request_size=8)
    clf = LLMClassifier(backend, ChatRequest(sentiment_request()))
    assert clf.labels == ["negative", "positive"] and clf.request.place.path == ("sentiment",)
    texts = ["an exhilarating and beautifully acted film", "a tedious , clumsy and painfully unfunny comedy"]
    worst = [await clf.quote([t]) for t in texts]
    batch = await clf.classify(texts)
    assert set(batch.labels) <= {"negative", "positive"}  # read from the JSON, never unparsed under the schema
    assert batch.probabilities is not None and all(p is not None for p in batch.probabilities)
    for label, said in zip(batch.labels, batch.probabilities, strict=True):
        assert said is not None and said[label] == max(said.values())  # read at the value's first token
    assert all(w.prompt_tokens >= batch.charge.prompt_tokens / 2 for w in worst)  # every message counted
    async with AnchorsExplainer(clf, seed=0) as explainer:
        exp = await explainer.explain(texts[0])
    assert exp.data.label == batch.labels[0] and exp.data.success and exp.meta.queries > 0
    assert exp.meta.cost.settled.prompt_tokens > 100 * exp.meta.queries  # the system and examples, billed


async def test_the_guide_s_ticket_router_is_a_request_that_routes_tickets():
    from pathlib import Path

    said = json.loads((Path(__file__).parents[1] / "docs" / "examples" / "ticket-router.json").read_text())
    request = ChatRequest(said)
    assert request.enum == ("billing", "technical", "account") and request.place.path == ("queue",)
    async with FaultServer(answer=router) as server:
        backend = OpenAICompatibleBackend(server.base_url, "gpt-4o-mini", endpoint="chat", api_key="sk-test")
        clf = LLMClassifier(backend, request)
        try:
            batch = await clf.classify(["I was charged twice and want a refund"])
        finally:
            await clf.aclose()
    assert batch.labels == ["billing"] and server.bodies[0]["messages"][0] == said["messages"][0]
    guide = (Path(__file__).parents[1] / "docs" / "guide.md").read_text()
    assert "--request @docs/examples/ticket-router.json" in guide
