import asyncio

import numpy as np
import pytest

from llm_anchors import AnchorsExplainer, ClassifierError, ConfigError, FunctionClassifier
from llm_anchors.extend import Batch, Classifier, as_classifier


async def test_sync_function():
    clf = FunctionClassifier(lambda texts: [len(t) for t in texts], name="length")
    assert isinstance(clf, Classifier)
    assert (await clf.classify(["a", "abc"])).labels == [1, 3]
    assert clf.identity == "function:length"


async def test_async_function():
    async def fn(texts):
        await asyncio.sleep(0)
        return ["pos" if "good" in t else "neg" for t in texts]

    assert (await FunctionClassifier(fn).classify(["good", "bad"])).labels == ["pos", "neg"]


async def test_numpy_output_becomes_plain_labels():
    clf = FunctionClassifier(lambda texts: np.array([1, 0, 1])[: len(texts)], in_thread=False)
    labels = (await clf.classify(["x", "y"])).labels
    assert labels == [1, 0]
    assert all(type(label) is int for label in labels)


async def test_sklearn_pipeline_predict():
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(CountVectorizer(), LogisticRegression())
    model.fit(["good film", "great film", "bad film", "awful film"], [1, 1, 0, 0])
    assert (await FunctionClassifier(model.predict).classify(["good", "awful"])).labels == [1, 0]


async def test_raising_classifier_is_named():
    def broken(texts):
        raise RuntimeError("model exploded")

    with pytest.raises(ClassifierError, match="broken.*model exploded") as info:
        await FunctionClassifier(broken).classify(["x"])
    assert "broken" in info.value.classifier


@pytest.mark.parametrize("answer", [[1], [1, 2, 3], "11", 7, None, [[1], [2]]])
async def test_wrong_answers_are_named(answer):
    clf = FunctionClassifier(lambda texts: answer, name="liar")
    with pytest.raises(ClassifierError, match="liar"):
        await clf.classify(["x", "y"])


def test_not_callable():
    with pytest.raises(ConfigError):
        FunctionClassifier("not a function")  # type: ignore[arg-type]


class _Model:
    def __init__(self, answer):
        self.answer = answer

    def predict(self, texts):
        return [self.answer] * len(texts)


async def test_two_models_never_share_cached_labels_by_accident():
    from llm_anchors import AnchorsExplainer, QueryCache

    cache = QueryCache()
    model_a, model_b = _Model(1), _Model(0)
    a = await AnchorsExplainer(FunctionClassifier(model_a.predict), cache=cache, seed=0).explain("good film")
    b = await AnchorsExplainer(FunctionClassifier(model_b.predict), cache=cache, seed=0).explain("good film")
    assert a.data.label == 1 and b.data.label == 0 and b.meta.queries > 0
    one, two = FunctionClassifier(lambda t: t), FunctionClassifier(lambda t: t)
    assert one.identity != two.identity and "<lambda>#" in one.identity
    # A name is an explicit promise that two classifiers are one model: they share.
    assert (
        FunctionClassifier(model_a.predict, name="m").identity == FunctionClassifier(model_b.predict, name="m").identity
    )


def test_a_persisted_cache_or_memory_needs_a_named_classifier(tmp_path):
    from llm_anchors import AnchorsExplainer, QueryCache

    with pytest.raises(ConfigError, match="name="):
        AnchorsExplainer(FunctionClassifier(_Model(1).predict), cache=QueryCache(tmp_path / "q.db"))
    AnchorsExplainer(FunctionClassifier(_Model(1).predict, name="m-v1"), cache=QueryCache(tmp_path / "q.db"))


async def test_a_call_that_never_returns_times_out():
    from llm_anchors import BackendTimeoutError

    async def hangs(texts):
        await asyncio.sleep(3600)

    clf = FunctionClassifier(hangs, timeout=0.05)
    with pytest.raises(BackendTimeoutError, match="0.05"):
        await asyncio.wait_for(clf.classify(["a"]), 5)
    for bad in (0, -1, "1", True):
        with pytest.raises(ConfigError):
            FunctionClassifier(hangs, timeout=bad)


async def test_nan_is_not_a_label():
    clf = FunctionClassifier(lambda texts: [float("nan")] * len(texts))
    with pytest.raises(ClassifierError, match="NaN"):
        await clf.classify(["a"])


class Bare:
    """A classifier written against the protocol's two required members only."""

    identity = "bare"
    max_request_size = 3

    def __init__(self):
        self.calls = []

    async def classify(self, texts):
        self.calls.append(list(texts))
        return Batch(["pos" if "good" in t else "neg" for t in texts])


async def test_a_classifier_with_the_required_members_gets_the_documented_defaults():
    bare = Bare()
    full = as_classifier(bare)
    assert isinstance(full, Classifier) and full.identity == "bare" and full.max_request_size == 3
    charge = await full.quote(["a", "b"])
    assert (charge.queries, charge.tokens, charge.usd, charge.estimated) == (2, 0, 0, False)
    async with AnchorsExplainer(bare, seed=0) as explainer:
        exp = await explainer.explain("a good film")
    assert exp.data.label == "pos" and max(len(c) for c in bare.calls) <= 3  # max_request_size honoured
    assert as_classifier(FunctionClassifier(len)).max_request_size is None


@pytest.mark.parametrize("thing", [object(), lambda texts: texts, "clf"])
def test_what_is_not_a_classifier_is_a_config_error(thing):
    with pytest.raises(ConfigError, match="not a Classifier"):
        as_classifier(thing)


@pytest.mark.parametrize("thread_safe", [False, True])
async def test_a_sync_function_runs_one_batch_at_a_time_unless_declared_thread_safe(thread_safe):
    import pickle
    import threading
    import time

    inside, most, guard = [0], [0], threading.Lock()

    def predict(texts):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        with guard:
            inside[0] -= 1
        return [0] * len(texts)

    clf = FunctionClassifier(predict, name="slow", thread_safe=thread_safe)
    await asyncio.gather(*(clf.classify(["a"]) for _ in range(4)))
    assert most[0] == (4 if thread_safe else 1)
    assert pickle.loads(pickle.dumps(FunctionClassifier(len, name="n"))).name == "n"  # the lock is not shipped


class Proba:
    classes_ = np.array(["neg", "pos"])

    def predict(self, texts):
        return np.array(["pos" if "good" in t else "neg" for t in texts])

    def predict_proba(self, texts):
        rows = {"good": [0.1, 0.9], "bad": [0.7, 0.3], "odd": [0.5, np.nan], "wide": [0.2, 0.3, 0.5]}
        return [rows.get(t, [0.5, 0.5]) for t in texts]


async def test_predict_proba_gives_each_label_its_probability():
    model = Proba()
    clf = FunctionClassifier(model.predict, predict_proba=model.predict_proba)
    batch = await clf.classify(["good", "bad", "odd", "wide"])
    assert batch.labels == ["pos", "neg", "neg", "neg"]
    # A row that is not a distribution over the classes says nothing: None, never a label.
    assert batch.probabilities == [{"neg": 0.1, "pos": 0.9}, {"neg": 0.7, "pos": 0.3}, None, None]
    assert (await FunctionClassifier(model.predict).classify(["good"])).probabilities is None


def test_predict_proba_needs_its_columns_labels():
    with pytest.raises(ConfigError, match="classes="):
        FunctionClassifier(lambda t: t, predict_proba=lambda t: [[1.0]] * len(t))
    clf = FunctionClassifier(lambda t: t, predict_proba=lambda t: [[1.0]] * len(t), classes=["x"])
    assert clf.classes == ["x"]
    with pytest.raises(ConfigError, match="callable"):
        FunctionClassifier(lambda t: t, predict_proba=[[1.0]])
    with pytest.raises(ConfigError, match="twice"):
        FunctionClassifier(lambda t: t, predict_proba=lambda t: [[0.5, 0.5]] * len(t), classes=["x", "x"])


async def test_predict_proba_with_a_wrong_number_of_rows_is_a_classifier_error():
    clf = FunctionClassifier(lambda t: ["x"] * len(t), predict_proba=lambda t: [[1.0]], classes=["x"])
    with pytest.raises(ClassifierError, match="rows"):
        await clf.classify(["a", "b"])
