import asyncio

import numpy as np
import pytest

from llm_anchors import Classifier, ClassifierError, FunctionClassifier


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
    with pytest.raises(TypeError):
        FunctionClassifier("not a function")  # type: ignore[arg-type]
