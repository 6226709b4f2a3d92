"""The classifiers the benchmarks explain, trained here from local data."""

from __future__ import annotations

from typing import Any

import numpy as np

from llm_anchors.datasets import load_bbc_news, load_rt_polarity, load_youtube_spam

YOUTUBE_TRAIN = ("Psy", "KatyPerry")
"""The videos whose comments train the spam filter; the others' comments are explained."""
YOUTUBE_TUNING = ("LMFAO",)
"""The held-out videos where settings are chosen (the templated tuning stream)."""
YOUTUBE_EVALUATION = ("Eminem", "Shakira")
"""The held-out videos the tables are reported on."""


def train_text_rf(seed: int = 0, n_estimators: int = 50, data: str | None = None) -> tuple[Any, list[str], np.ndarray]:
    """TF-IDF + random forest on RT-Polarity (the paper's "text RF").

    Trained on a seeded 80% split; returns the fitted pipeline and the
    held-out 20% (texts, labels) to explain.
    """
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    texts, labels = load_rt_polarity(data)
    train, test, y_train, y_test = train_test_split(texts, labels, test_size=0.2, random_state=seed)
    model = make_pipeline(
        TfidfVectorizer(), RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
    )
    model.fit(train, y_train)
    return model, list(test), np.asarray(y_test)


def train_bbc_rf(seed: int = 0, n_estimators: int = 100, data: str | None = None) -> tuple[Any, float]:
    """TF-IDF + random forest on BBC News' train split (5 topics), and its accuracy on the val split."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    texts, topics = load_bbc_news("train", data)
    forest = RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
    model = make_pipeline(TfidfVectorizer(sublinear_tf=True), forest)
    model.fit(texts, topics)
    val, val_topics = load_bbc_news("val", data)
    return model, float(np.mean(model.predict(val) == np.asarray(val_topics)))


def train_adult(kind: str, seed: int = 0, data: str | None = None) -> tuple[Any, float]:
    """A model of UCI Adult's train split and its test accuracy.

    kind: "rf" (random forest, 50 trees), "gbt" (scikit-learn's histogram
    gradient-boosted trees; the paper used XGBoost) or "mlp" (3 layers:
    two hidden of 50, on one-hot categories and scaled numbers).
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from llm_anchors.datasets import load_adult

    adult = load_adult(data)
    categorical = sorted(adult.categorical_names)
    numeric = [f for f in range(len(adult.feature_names)) if f not in adult.categorical_names]
    model: Any
    if kind == "rf":
        model = RandomForestClassifier(n_estimators=50, random_state=seed, n_jobs=1)
    elif kind == "gbt":
        model = HistGradientBoostingClassifier(categorical_features=categorical, random_state=seed)
    elif kind == "mlp":
        one_hot = OneHotEncoder(handle_unknown="ignore")
        encode = ColumnTransformer([("categories", one_hot, categorical), ("numbers", StandardScaler(), numeric)])
        model = make_pipeline(encode, MLPClassifier(hidden_layer_sizes=(50, 50), max_iter=300, random_state=seed))
    else:
        raise ValueError(f"unknown model kind {kind!r}")
    model.fit(adult.train, adult.train_labels)
    return model, float((model.predict(adult.test) == adult.test_labels).mean())


def train_digits(seed: int = 0, size: int = 32) -> tuple[Any, np.ndarray, np.ndarray, float]:
    """An MLP on scikit-learn's 8 × 8 digits upscaled to ``size`` × ``size``.

    Returns the model (``predict`` takes n × size × size × 3 images), the
    held-out 20% images and labels, and its accuracy on them.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    images = np.array([_upscale(image / 16.0, size) for image in digits.images])
    train, test, y_train, y_test = train_test_split(images, digits.target, test_size=0.2, random_state=seed)
    mlp = MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=seed)
    mlp.fit(train.reshape(len(train), -1), y_train)
    model = _GreyModel(mlp)
    accuracy = float((model.predict(np.repeat(test[..., None], 3, axis=3)) == y_test).mean())
    return model, test, np.asarray(y_test), accuracy


class _GreyModel:
    """Adapts a model of flattened grey images to (n × H × W × 3) batches."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, images: np.ndarray) -> np.ndarray:
        grey = np.asarray(images)[..., 0]
        return np.asarray(self.model.predict(grey.reshape(len(grey), -1)))


def _upscale(image: np.ndarray, size: int) -> np.ndarray:
    from skimage.transform import resize

    return np.asarray(resize(image, (size, size), order=1, anti_aliasing=False))  # type: ignore[no-untyped-call]


def train_youtube_rf(
    seed: int = 0, n_estimators: int = 50, data: str | None = None, tuning: bool = False
) -> tuple[Any, list[str], np.ndarray, float]:
    """TF-IDF + random forest spam filter trained on the comments of `YOUTUBE_TRAIN`; the comments to
    explain (`YOUTUBE_TUNING`'s with ``tuning``, else `YOUTUBE_EVALUATION`'s), in file order, their
    labels, and the filter's accuracy on them."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    train, y_train = load_youtube_spam(YOUTUBE_TRAIN, data)
    texts, labels = load_youtube_spam(YOUTUBE_TUNING if tuning else YOUTUBE_EVALUATION, data)
    forest = RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
    model = make_pipeline(TfidfVectorizer(), forest)
    model.fit(train, y_train)
    return model, texts, labels, float(np.mean(model.predict(texts) == labels))
