"""The query cache: a text is classified once per classifier."""

from __future__ import annotations

from ._classifier import Label

__all__ = ["QueryCache"]


class QueryCache:
    """Labels already obtained, keyed by (classifier identity, text).

    One cache may be shared by several explainers: a perturbation that
    another explanation already paid for is never paid twice.
    """

    def __init__(self) -> None:
        self._labels: dict[tuple[str, str], Label] = {}

    def __len__(self) -> int:
        return len(self._labels)

    def get(self, classifier: str, text: str) -> tuple[bool, Label]:
        key = (classifier, text)
        if key in self._labels:
            return True, self._labels[key]
        return False, None

    def labels(self, classifier: str) -> dict[str, Label]:
        """Every text labelled so far by ``classifier``, with its label."""
        return {text: label for (who, text), label in self._labels.items() if who == classifier}

    def put(self, classifier: str, text: str, label: Label) -> None:
        self._labels[(classifier, text)] = label
