import warnings

import pytest

from llm_anchors import UNPARSED, AnchorsExplainer, BadResponseError, ConfigError, LLMClassifier
from llm_anchors.extend import (
    LOCAL,
    Backend,
    Completion,
    CompletionParams,
    Completions,
    MockBackend,
    PromptCacheWarning,
    as_backend,
)
from llm_anchors.money import EstimateCounter, price_for

PROMPT = "Review: {text}\nSentiment:"
LABELS = ["negative", "positive"]


def sentiment(prompt: str) -> str:
    text = prompt.split("Review: ")[-1]
    return "positive" if "good" in text.split() and "great" in text.split() else "negative"


def clf_for(answer=sentiment, **kw) -> LLMClassifier:
    return LLMClassifier(MockBackend(answer, **kw), PROMPT, LABELS)


def read(clf, text, top=None):
    return clf.answer(Completion(text, top))[0]


def test_label_from_logprobs_of_first_tokens():
    clf = clf_for()
    assert read(clf, " positive", {" positive": -0.1, " negative": -2.0}) == "positive"
    # The most probable token answers: a label likely among the other alternatives was not the answer.
    assert read(clf, " neutral", {" neutral": -0.1, " negative": -1.0, " positive": -3.0}) == UNPARSED
    top5 = {" The": -0.05, " This": -3.5, " A": -4.0, " positive": -3.0, " I": -4.5}  # positive at 5%
    assert read(clf, " The", top5) == UNPARSED
    # A first token that is only the start of the label word still names it.
    assert read(clf, " pos", {" pos": -0.2, " neg": -0.9}) == "positive"
    assert read(clf, "Positive", {"Positive": -0.2, "NEG": -0.9}) == "positive"


def test_text_is_parsed_without_logprobs():
    clf = clf_for()
    assert read(clf, " positive.") == "positive"
    assert read(clf, "  Negative\n") == "negative"


@pytest.mark.parametrize("text,top", [(" neutral", {" neutral": -0.1, " the": -1.0}), (" maybe", None), ("", None)])
def test_answer_naming_no_label_is_unparsed(text, top):
    assert read(clf_for(), text, top) == UNPARSED


def test_a_label_spelled_whole_is_not_read_as_a_longer_one_it_begins():
    clf = LLMClassifier(MockBackend(lambda p: "pos"), PROMPT, ["pos", "positive"])
    assert read(clf, " pos", {" pos": -0.05, " positive": -3.0}) == "pos"  # it was "positive"
    assert read(clf, " positive", {" positive": -0.05, " pos": -3.0}) == "positive"
    assert read(clf, "pos") == "pos" and read(clf, " Positive.") == "positive"  # both were unparsed
    assert read(clf, " posit") == "positive"  # cut short, it begins one label only
    assert read(clf, " po") == UNPARSED


def test_labels_sharing_a_first_word_are_read_from_the_whole_answer():
    clf = LLMClassifier(MockBackend(lambda p: "very bad"), PROMPT, ["very good", "very bad"])
    assert clf.params.max_tokens > 1  # room to spell them, by default
    assert read(clf, "very bad") == "very bad" and read(clf, " Very good!") == "very good"  # both were unparsed
    # The first token names both: the greedy text decides (the first label listed won, whatever the model said).
    assert read(clf, " very bad", {" very": -0.01, " quite": -5.0}) == "very bad"
    assert read(clf, " very", {" very": -0.01}) == UNPARSED  # cut before it could tell
    # A text that does not begin with the most probable token (a sampled answer) is still the answer.
    assert read(clf, " very bad", {" extremely": -0.01, " very": -5.0}) == "very bad"


def test_one_output_token_is_refused_for_labels_sharing_a_word():
    with pytest.raises(ConfigError, match="'very good' and 'very bad' begin with the same word"):
        LLMClassifier(MockBackend(lambda p: "x"), PROMPT, ["very good", "very bad"], params=CompletionParams())
    pos = LLMClassifier(MockBackend(lambda p: "x"), PROMPT, ["pos", "positive"], params=CompletionParams())
    assert pos.params.max_tokens == 1  # a whole word tells these apart: asked for, allowed
    assert LLMClassifier(MockBackend(lambda p: "x"), PROMPT, LABELS).params.max_tokens == 1


def test_short_tokens_do_not_name_labels():
    assert read(clf_for(), " p", {" p": -0.1, " n": -0.2}) == UNPARSED
    yes_no = LLMClassifier(MockBackend(lambda p: "no"), PROMPT, ["yes", "no"])
    assert read(yes_no, " no", {" no": -0.1, " yes": -2.0}) == "no"


async def test_classify_renders_prompts_and_reports_usage():
    backend = MockBackend(sentiment, others=["negative"])
    clf = LLMClassifier(backend, PROMPT, LABELS)
    batch = await clf.classify(["good and great", "bad"])
    assert batch.labels == ["positive", "negative"]
    assert backend.calls == [["Review: good and great\nSentiment:", "Review: bad\nSentiment:"]]
    assert batch.charge.prompt_tokens == 8 and batch.charge.completion_tokens == 2 and batch.charge.queries == 2


async def test_wrong_number_of_completions_is_a_bad_response():
    class Short(MockBackend):
        async def complete(self, prompts, params):
            return Completions([Completion(" positive")])

    with pytest.raises(BadResponseError, match="1 completions for 2 prompts"):
        await LLMClassifier(Short(sentiment), PROMPT, LABELS).classify(["a", "b"])


def test_identity_names_backend_prompt_and_labels():
    a = clf_for()
    b = LLMClassifier(MockBackend(sentiment), PROMPT + " ", LABELS)
    assert a.identity.startswith("llm:mock:mock|prompt:")
    assert a.identity != b.identity


@pytest.mark.parametrize(
    "prompt,labels",
    [
        ("no placeholder", LABELS),
        (PROMPT, ["only"]),
        (PROMPT, ["a", "A"]),
        (PROMPT, ["x", ""]),
        (PROMPT, [UNPARSED, "x"]),
    ],
)
def test_bad_configuration(prompt, labels):
    with pytest.raises(ConfigError):
        LLMClassifier(MockBackend(sentiment), prompt, labels)


def test_not_a_backend():
    with pytest.raises(ConfigError):
        LLMClassifier(object(), PROMPT, LABELS)  # type: ignore[arg-type]


async def test_explanation_of_an_llm_counts_tokens_and_unparsed():
    def answer(prompt):
        words = prompt.split("Review: ")[-1].split()
        if "good" not in words and "great" not in words:
            return "dunno"
        return sentiment(prompt)

    clf = LLMClassifier(MockBackend(answer, logprobs=False), PROMPT, LABELS)
    exp = await AnchorsExplainer(clf, seed=0).explain("this is a good and great movie with a fine plot")
    assert exp.data.anchor == ("good", "great")
    assert exp.data.label == "positive"
    assert exp.meta.unparsed > 0
    assert exp.meta.cost.settled.prompt_tokens > 0 and exp.meta.cost.settled.completion_tokens == exp.meta.queries


class Minimal:
    """A backend written against the protocol's two required members only."""

    identity = "minimal"

    def __init__(self, **extra):
        self.inner = MockBackend(sentiment)
        vars(self).update(extra)

    async def complete(self, prompts, params):
        return await self.inner.complete(prompts, params)


async def test_a_backend_with_the_required_members_gets_the_documented_defaults():
    clf = LLMClassifier(Minimal(), PROMPT, LABELS, price=price_for("gpt-4o-mini"))
    backend = clf.backend
    assert isinstance(backend, Backend)
    assert (backend.model, backend.is_local, backend.max_request_size) == (None, False, None)
    assert backend.token_counter() is None and isinstance(clf.token_counter, EstimateCounter)
    assert clf.max_request_size is None
    with pytest.warns(PromptCacheWarning, match="static prefix"):  # a short prompt, priced as OpenAI's
        batch = await clf.classify(["a good and great film", "a dull film"])
    assert batch.labels == ["positive", "negative"] and batch.charge.usd > 0
    await clf.aclose()


def test_optional_backend_members_are_read_when_present():
    clf = LLMClassifier(Minimal(is_local=True, max_request_size=4), PROMPT, LABELS)
    assert clf.price == LOCAL and clf.max_request_size == 4
    with pytest.raises(ConfigError, match="cannot price"):
        LLMClassifier(Minimal(), PROMPT, LABELS)  # neither a model nor local: never free
    assert as_backend(MockBackend(sentiment)).is_local is True  # a full backend is used as it is


@pytest.mark.parametrize(
    "prompt,why",
    [
        ("Review: {text}\nSentiment:", "below the 1,024"),  # a short prefix: nothing is cached
        ("{text}\n" + "Rubric: " + "be fair. " * 600 + "\nLabel:", "come after {text}"),  # the static part last
    ],
)
async def test_a_prompt_the_provider_cannot_cache_is_said_once(prompt, why):
    from llm_anchors.backends.token_counters import TiktokenCounter

    clf = LLMClassifier(MockBackend(sentiment), prompt, LABELS, price=price_for("gpt-4o-mini"),
                        token_counter=TiktokenCounter("gpt-4o-mini"))  # fmt: skip
    with pytest.warns(PromptCacheWarning, match=why):
        await clf.classify(["a good film"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await clf.classify(["a bad film"])  # once


async def test_a_long_static_prefix_first_is_cacheable():
    from llm_anchors.backends.token_counters import TiktokenCounter

    rubric = "Rubric: " + "be fair and precise. " * 300 + "\nReview: {text}\nSentiment:"
    clf = LLMClassifier(MockBackend(sentiment), rubric, LABELS, price=price_for("gpt-4o-mini"),
                        token_counter=TiktokenCounter("gpt-4o-mini"))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert await clf.check_cache_layout() == ""
    local = LLMClassifier(MockBackend(sentiment), "Review: {text}\nSentiment:", LABELS)
    assert await local.check_cache_layout() == ""  # a local model: no provider's cache to fill


async def test_classify_gives_the_labels_probabilities_when_the_server_gives_alternatives():
    batch = await clf_for().classify(["good and great", "bad"])
    assert batch.labels == ["positive", "negative"]
    assert batch.probabilities is not None
    assert batch.probabilities[0]["positive"] > 0.9 and batch.probabilities[1]["negative"] > 0.9
    assert (await clf_for(logprobs=False).classify(["good and great"])).probabilities is None
