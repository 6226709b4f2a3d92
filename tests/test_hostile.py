"""What a hostile server or user tried (issue 56), each against a loopback fake server, over both OpenAI
transports where it applies: an answer that cannot be read is read as its text says or as unparsed,
never as another label; no secret reaches a message or a file; a bad answer is a typed error."""

import json
import math

import openai
import pytest

from llm_anchors import BadResponseError, LLMClassifier, RetryPolicy
from llm_anchors.backends.openai_client import OpenAIClientBackend
from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
from llm_anchors.extend import AnswerWarning
from tests.fault_server import FaultServer
from tests.test_cli import cli, inputs, lines

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]
POSITIVE, NEGATIVE = "a good and great film", "a dull film"
pytestmark = pytest.mark.filterwarnings("ignore:the prompt cannot be cached")


def sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "great" in words else "negative"


def other(word: str) -> str:
    return " negative" if word == " positive" else " positive"


# Each: the first token's alternatives as a server may say them, the chosen token's unreadable (or the
# whole unreadable), the other label's readable and lower: the text's label, and no probabilities.
UNREADABLE_LOGPROBS = {
    "NaN": lambda prompt, word: [(word, math.nan), (other(word), -3.0)],
    "null": lambda prompt, word: [(word, None), (other(word), -3.0)],
    "a string": lambda prompt, word: [(word, "high"), (other(word), -3.0)],
    "'Infinity'": lambda prompt, word: [(word, "Infinity"), (other(word), -3.0)],
    "above 0": lambda prompt, word: [(word, 5.0), (other(word), -3.0)],
    "absent": lambda prompt, word: [(other(word), -3.0)],
    "listed twice, once NaN": lambda prompt, word: [(word, -0.1), (word, math.nan), (other(word), -3.0)],
    "null, its capital readable": lambda prompt, word: [(word, None), (word.title(), -4.0), (other(word), -3.5)],
    "the other listed twice": lambda prompt, word: [(word, -0.80), (other(word), -1.20), (other(word), -1.39)],
    "byte-level (Ġ)": lambda prompt, word: [("Ġ" + word.strip(), -0.1), ("Ġ" + other(word).strip(), -2.5)],
}
SHAPES = ["content", "content without token", "legacy without tokens"]


async def backends(url: str, endpoint: str):
    """The same model behind both transports: aiohttp, and the user's own openai client (closed after)."""
    yield OpenAICompatibleBackend(url, "gpt-4o-mini", endpoint=endpoint, api_key="sk-test")
    if endpoint != "systemone":
        async with openai.AsyncOpenAI(base_url=url, api_key="sk-test") as client:
            yield OpenAIClientBackend(client, "gpt-4o-mini", endpoint=endpoint)


async def read_labels(server: FaultServer, endpoint: str, probabilities: list | None = None) -> list[list[str]]:
    """What each transport reads of the server's answers to a positive and a negative text (and, into
    ``probabilities``, the probabilities each read)."""
    read = []
    async for backend in backends(server.base_url, endpoint):
        clf = LLMClassifier(backend, PROMPT, LABELS)
        try:
            batch = await clf.classify([POSITIVE, NEGATIVE])
        finally:
            await clf.aclose()
        read.append(batch.labels)
        (probabilities if probabilities is not None else []).append(batch.probabilities)
    return read


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize(
    ("shape", "said"),
    [(shape, said) for shape in SHAPES for said in sorted(UNREADABLE_LOGPROBS)
     if not (shape == "legacy without tokens" and said == "the other listed twice")],  # a JSON object says a key once
)  # fmt: skip
async def test_an_unreadable_log_probability_for_the_chosen_label_never_reads_as_the_other(endpoint, shape, said):
    given: list = []
    async with FaultServer(answer=sentiment, alternatives=UNREADABLE_LOGPROBS[said], logprobs_shape=shape) as server:
        read = await read_labels(server, endpoint, given)
    assert read == [["positive", "negative"]] * len(read)  # the answer's text names it; never the other label
    assert given == [None] * len(read)  # and the alternatives, unreadable, steer nothing


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize("shape", SHAPES)
async def test_readable_alternatives_score_the_label_read_on_every_shape(endpoint, shape):
    given: list = []
    async with FaultServer(answer=sentiment, logprobs_shape=shape) as server:
        read = await read_labels(server, endpoint, given)
    assert read == [["positive", "negative"]] * len(read)
    for probabilities in given:
        assert probabilities[0] == pytest.approx({"positive": math.exp(-0.1), "negative": math.exp(-2.5)})
        assert probabilities[1] == pytest.approx({"negative": math.exp(-0.1), "positive": math.exp(-2.5)})


# Each: a decision's probabilities as a server may say them for a choice of ``word``.
UNREADABLE_PROBABILITIES = {
    "one ulp past 1": lambda word, labels: {word: 1.0000000000000002, _other(word, labels): 1e-9},
    "not probabilities": lambda word, labels: {word: 5.0, _other(word, labels): 0.2},
    "the other's alone": lambda word, labels: {_other(word, labels): 0.1},
    "NaN": lambda word, labels: {word: math.nan, _other(word, labels): 0.1},
    "listed twice": lambda word, labels: [
        {"value": word, "probability": 0.9},
        {"value": _other(word, labels), "probability": 0.1},
        {"value": word, "probability": 0.01},
    ],  # fmt: skip
}


def _other(word: str, labels: list[str]) -> str:
    return next(label for label in labels if label != word)


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [(e, said) for e in ("decisions", "systemone") for said in sorted(UNREADABLE_PROBABILITIES)
     if not (e == "systemone" and said == "listed twice")],  # vLLM's are a JSON object: no class twice
)  # fmt: skip
async def test_an_unreadable_decision_probability_never_reads_as_the_other_label(endpoint, said):
    given: list = []
    async with FaultServer(answer=sentiment, probabilities=UNREADABLE_PROBABILITIES[said]) as server:
        read = await read_labels(server, endpoint, given)
    assert read == [["positive", "negative"]] * len(read)
    readable = said == "one ulp past 1"  # rounding: read, the choice's probability 1
    assert all((p is not None) == readable for p in given), given


@pytest.mark.parametrize("endpoint", ["decisions", "systemone"])
async def test_a_decision_naming_classes_not_asked_is_read_on_the_labels_and_said(endpoint):
    def with_banana(word, labels):
        return {"banana": 0.99, word: 0.009, _other(word, labels): 0.001}

    async with FaultServer(answer=sentiment, probabilities=with_banana) as server:
        with pytest.warns(AnswerWarning, match=r"not asked \(banana\)"):
            read = await read_labels(server, endpoint)
    assert read == [["positive", "negative"]] * len(read)


async def explained_by_cli(alternatives, endpoint: str, shape: str) -> dict:
    async with FaultServer(answer=sentiment, alternatives=alternatives, logprobs_shape=shape) as server:
        args = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--json", "--seed", "0",
                "--endpoint", endpoint]  # fmt: skip
        code, out = await cli("explain", "a good and great movie", *args, stdout=True)
    assert code == 0, out
    return json.loads(out)


@pytest.mark.parametrize(
    ("endpoint", "shape", "said"),
    [("completions", "legacy without tokens", "null, its capital readable"),
     ("chat", "content without token", "null, its capital readable"),
     ("chat", "content", "the other listed twice"), ("completions", "content", "NaN")],
)  # fmt: skip
async def test_the_cli_explains_the_label_the_answer_names_and_unreadable_alternatives_steer_nothing(
    endpoint, shape, said
):
    explained = await explained_by_cli(UNREADABLE_LOGPROBS[said], endpoint, shape)
    assert explained["data"]["label"] == "positive" and explained["meta"]["unparsed"] == 0
    labels_only = await explained_by_cli(lambda prompt, word: [], endpoint, shape)
    assert explained["data"]["anchor"] == labels_only["data"]["anchor"]  # as if no alternatives were said
    assert explained["meta"]["samples"] == labels_only["meta"]["samples"]


async def test_an_answer_to_the_input_naming_no_label_is_a_failed_line_and_explain_says_it_spent(tmp_path):
    def refusing(prompt: str) -> str:
        return "banana" if "refuse" in prompt else sentiment(prompt)

    async with FaultServer(answer=refusing) as server:
        common = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT]
        code, err = await cli("explain", "I refuse to review it", *common)
        assert code == 5 and "names none of the labels" in err and "stopped after spending" in err, err
        out = tmp_path / "out.jsonl"
        code, err = await cli("run", inputs(tmp_path, [POSITIVE, "I refuse to review it"]), "--out", str(out), *common)
    assert code == 0, err
    failed = [r for r in lines(out) if "failed" in r]
    assert len(failed) == 1 and "names none of the labels" in failed[0]["failed"] and "fault" not in failed[0]


class OddDecisions(FaultServer):
    """Answers every decision with ``answers`` as given (a predicate, nothing), billed."""

    def __init__(self, answers, **kwargs):
        super().__init__(answer=sentiment, **kwargs)
        self.given = answers

    def _decide(self, path, body):
        self.prompts_served += 1
        return {"answers": self.given, "model": body["model"], "usage": {"input_tokens": 30, "output_tokens": 1}}


@pytest.mark.parametrize("answers", [[{"type": "predicate", "name": "label", "value": True}], []])
async def test_explain_stopped_by_a_paid_answer_it_cannot_read_exits_5_saying_it_spent(answers):
    async with OddDecisions(answers) as server:
        args = ["--base-url", server.base_url, "--model", "gpt-6-luna", "--endpoint", "decisions", "--prompt", PROMPT,
                "--max-attempts", "1"]  # fmt: skip
        code, err = await cli("explain", "a good film", *args)
    assert server.prompts_served >= 1
    assert code == 5 and "stopped after spending: 1 call(s)" in err, err


async def test_vllm_tokenize_answering_tokens_that_are_not_ids_is_a_typed_error_before_any_prompt():
    from aiohttp import web

    from tests.fake_vllm import FakeVllm

    class Garbled(FakeVllm):
        async def _tokenize(self, request: web.Request) -> web.Response:
            return web.json_response({"count": 2, "tokens": ["▁positive", 1.5], "max_model_len": 4096})

    async with Garbled(answer=sentiment) as server:
        clf = LLMClassifier(OpenAICompatibleBackend(server.base_url, "gemma-3-270m"), PROMPT, LABELS)
        try:
            with pytest.raises(BadResponseError, match="not token ids") as raised:
                await clf.classify([POSITIVE])
            assert not raised.value.sent and not raised.value.billable
            from llm_anchors import AnchorsExplainer

            retry = RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.01, jitter=0.0)
            async with AnchorsExplainer(clf, retry=retry) as explainer:
                with pytest.raises(BadResponseError):
                    await explainer.explain(" ".join([POSITIVE] * 2))
                from llm_anchors.query import QueryStats

                stats = QueryStats()
                with pytest.raises(BadResponseError):
                    await explainer.engine.classify(["a dull film"], stats, cap=None)
                assert stats.queries == 0 and explainer.engine.billed_calls == 0  # they never reached the model
        finally:
            await clf.aclose()
    assert server.prompts_served == 0


SECRET_HEADER = "gw7Q-tenant-token-0a8f3c91d2"
AZURE_KEY = "azure0key0f3c91d2e8b7a6"


def leaked(text: str, secret: str) -> bool:
    """Whether ``text`` shows ``secret`` in a form the hostile probes tried: as it is, split by spaces or line
    breaks, or inside anything that decodes from base64."""
    import base64
    import binascii
    import re

    if secret in text or secret in re.sub(r"\s+", "", text):
        return True
    for token in re.findall(r"[A-Za-z0-9+/_-]{12,}={0,2}", text):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                if secret.encode() in decode(token + "=" * (-len(token) % 4)):
                    return True
            except (binascii.Error, ValueError):
                pass
    return False


@pytest.mark.parametrize("kind", ["echo-401", "echo-500", "echo-split-500", "echo-b64-500"])
async def test_a_server_echoing_every_header_leaks_no_value_into_any_file_or_message(tmp_path, kind):
    out, report = tmp_path / "out.jsonl", tmp_path / "report.html"
    async with FaultServer(answer=sentiment, fail_rate=1.0, kinds=(kind,)) as server:
        common = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--max-attempts", "2",
                  "--header", f"X-Tenant-Token: {SECRET_HEADER}"]  # fmt: skip
        _, explain_err = await cli("explain", POSITIVE, *common)
        _, run_err = await cli("run", inputs(tmp_path, [POSITIVE]), "--out", str(out), *common)
        _, report_err = await cli("report", str(out), "-o", str(report))
    assert any(SECRET_HEADER in " ".join(r["headers"].values()) for r in server.requests)  # it was sent
    assert "denied for credentials" in explain_err  # the server's words are kept, without the secret
    written = [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 3
    for text in [explain_err, run_err, report_err, *written]:
        assert not leaked(text, SECRET_HEADER)


def test_the_leak_probe_finds_every_form_it_looks_for():
    import base64

    for form in [SECRET_HEADER, f"a {SECRET_HEADER[:9]}\n{SECRET_HEADER[9:]} b",
                 base64.b64encode(f"u:{SECRET_HEADER}".encode()).decode()]:  # fmt: skip
        assert leaked(f"x {form} y", SECRET_HEADER)
    assert not leaked("x <redacted> y", SECRET_HEADER)


OPENAI_KEY = "sk-proj-0a8f3c91d2e8b7a6c5d4"


@pytest.mark.parametrize("flag", ["--model", "--base-url", "--price-as"])
async def test_a_flag_given_a_credential_is_refused_before_anything_starts_naming_the_flag(flag, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    value = {"--base-url": f"http://127.0.0.1:9/{OPENAI_KEY}/v1"}.get(flag, OPENAI_KEY)
    args = {"--base-url": "http://127.0.0.1:9/v1", "--model": "m", flag: value}
    code, err = await cli("explain", POSITIVE, *[x for pair in args.items() for x in pair])
    assert code == 2 and flag in err and not leaked(err, OPENAI_KEY), err


async def test_explain_json_and_every_file_hold_no_key_the_environment_gave(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    async with FaultServer(answer=sentiment) as server:
        text = f"a good and great film {OPENAI_KEY}"  # even the text: a secret is hidden wherever it is met
        args = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--json", "--max-queries", "60"]
        code, out = await cli("explain", text, *args, "--memory", str(tmp_path / "mem"), stdout=True)
    assert code in (0, 3), out
    written = [p.read_bytes().decode(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 2 and not any(leaked(t, OPENAI_KEY) for t in [out, *written])


async def test_an_azure_key_echoed_by_the_server_is_in_no_file_or_message(tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=sentiment, fail_rate=1.0, kinds=("echo-401",)) as server:
        azure = ["--azure-endpoint", server.base_url.removesuffix("/v1"), "--api-version", "2024-10-21", "--model",
                 "prod-4o", "--price-as", "gpt-4o-mini", "--prompt", PROMPT, "--max-attempts", "1"]  # fmt: skip
        _, explain_err = await cli("explain", POSITIVE, *azure)
        _, run_err = await cli("run", inputs(tmp_path, [POSITIVE]), "--out", str(out), *azure)
    assert any(r["headers"].get("api-key") == AZURE_KEY for r in server.requests)
    assert "denied for credentials" in explain_err
    written = [p.read_text(errors="replace") for p in tmp_path.iterdir() if p.is_file()]
    assert not any(AZURE_KEY in text for text in [explain_err, run_err, *written])


def test_a_key_glued_into_a_malformed_base_url_is_not_echoed(capsys):
    from llm_anchors.cli import main

    code = main(["explain", "a film", "--base-url", "notaurlsk-probe-SECRET0123456789abcdef"])
    err = capsys.readouterr().err
    assert code == 2 and "SECRET0123456789" not in err and err.startswith("error: base_url")


@pytest.mark.parametrize("client", ["aiohttp", "sdk"])
async def test_a_request_that_never_reached_a_server_is_released_not_billed(client):
    from decimal import Decimal

    from llm_anchors import AnchorsExplainer, Budget, ClassifierError

    url = "http://127.0.0.1:9/v1"  # nothing listens: every connection is refused
    budget = Budget(max_usd=Decimal("0.01"))
    retry = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.02, jitter=0.0)
    async with openai.AsyncOpenAI(base_url=url, api_key="sk-test") as sdk:
        backend = (OpenAICompatibleBackend(url, "gpt-4o-mini", endpoint="chat", api_key="sk-test")
                   if client == "aiohttp" else OpenAIClientBackend(sdk, "gpt-4o-mini"))  # fmt: skip
        async with AnchorsExplainer(LLMClassifier(backend, PROMPT, LABELS), budget=budget, retry=retry) as explainer:
            with pytest.raises(ClassifierError, match="no connection"):
                await explainer.explain(POSITIVE)
    report = budget.report()
    assert report.settled.usd == 0 and report.reserved.usd == 0 and explainer.engine.billed_calls == 0


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_a_server_answering_as_a_dearer_model_is_billed_as_it_and_said(endpoint):
    from llm_anchors.money import price_for

    async with FaultServer(answer=sentiment, model_said="gpt-5") as server:
        async for backend in backends(server.base_url, endpoint):
            clf = LLMClassifier(backend, PROMPT, LABELS)
            try:
                with pytest.warns(AnswerWarning, match="answered as model 'gpt-5', not 'gpt-4o-mini'.*dearer"):
                    batch = await clf.classify([POSITIVE])
                quote = await clf.quote([POSITIVE])
            finally:
                await clf.aclose()
            usage = batch.charge
            assert batch.charge.usd == price_for("gpt-5").cost(usage) > price_for("gpt-4o-mini").cost(usage)
            worst = price_for("gpt-5").worst_case(quote.prompt_tokens, quote.completion_tokens)
            assert quote.usd == worst  # reserved at the dearer model from then on


async def test_a_dated_snapshot_of_the_model_asked_says_nothing():
    import warnings

    async with FaultServer(answer=sentiment, model_said="gpt-4o-mini-2024-07-18") as server:
        async for backend in backends(server.base_url, "chat"):
            clf = LLMClassifier(backend, PROMPT, LABELS)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error", AnswerWarning)
                    assert (await clf.classify([POSITIVE])).labels == ["positive"]
            finally:
                await clf.aclose()


# -- a memory or a cache shared or damaged (items 3 and 4) ------------------------------------------------
