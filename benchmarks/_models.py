"""The classifiers the benchmarks explain, trained here from local data."""

from __future__ import annotations

from typing import Any

import numpy as np

from llm_anchors.datasets import load_rt_polarity


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
