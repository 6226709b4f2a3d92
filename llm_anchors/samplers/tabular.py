"""Tabular perturbation, as in Anchors: quartile bins from training data.

A feature's predicate is "the row's value lies in the input's bin": numeric
features are cut at the quartiles of the training data, categorical ones
(integer codes) are their own bins. A perturbation is a training row drawn
at random whose anchored features, where they fall outside the input's
bin, are replaced by a training value from inside it; coverage is measured
on training rows. Rows travel to the classifier as JSON objects (one query
string per row, so the engine's cache, budget and batching apply as for
text); `TabularSampler.decode` turns them back into a numeric matrix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._exceptions import ConfigError, InvalidInputError
from ..memory.store import MemoryEntry
from ..models.classifier import DecodingClassifier
from ..search.rules import Rule

__all__ = ["TabularClassifier", "TabularInstance", "TabularMemoryFeatures", "TabularSampler"]


@dataclass(frozen=True, eq=False)
class TabularInstance:
    """One row: its query string, one readable predicate per feature, values and bins."""

    query: str
    features: tuple[str, ...]
    values: np.ndarray
    bins: np.ndarray


class TabularSampler:
    """Perturbs a row by drawing training rows conditioned on a rule.

    train: (rows × features) numbers; categorical features hold integer
        codes into ``categorical_names[feature]``.
    feature_names: one name per column.
    categorical_names: {column: names of its codes}; other columns are numeric.
    quantiles: where numeric features are cut (Anchors: the quartiles).
    """

    def __init__(
        self,
        train: Any,
        feature_names: Sequence[str],
        categorical_names: Mapping[int, Sequence[str]] | None = None,
        *,
        quantiles: Sequence[float] = (25, 50, 75),
    ) -> None:
        data = np.asarray(train, dtype=float)
        if data.ndim != 2 or len(data) == 0:
            raise ConfigError(f"train must be a non-empty 2-D array of numbers, got shape {data.shape}")
        if not np.isfinite(data).all():
            raise ConfigError("train holds NaN or infinite values: impute or drop them first")
        if len(feature_names) != data.shape[1]:
            raise ConfigError(f"{len(feature_names)} feature names for {data.shape[1]} columns")
        self.train = data
        self.feature_names = tuple(str(n) for n in feature_names)
        named = categorical_names or {}
        self.categorical_names = {int(k): tuple(str(v) for v in names) for k, names in named.items()}
        for column, names in self.categorical_names.items():
            if not 0 <= column < data.shape[1]:
                raise ConfigError(f"categorical column {column} is not one of the {data.shape[1]} columns")
            codes = data[:, column]
            if (codes != np.round(codes)).any() or codes.min() < 0 or codes.max() >= len(names):
                raise ConfigError(f"column {column}: categorical codes must be integers in [0, {len(names)})")
        self.quantiles = tuple(float(q) for q in quantiles)
        self.edges = {
            f: np.unique(np.percentile(data[:, f], self.quantiles))
            for f in range(data.shape[1])
            if f not in self.categorical_names
        }
        self.train_bins = self.discretize(data)
        self._codes = [{name: code for code, name in enumerate(n)} for n in self._names_by_column()]
        self._in_bin: dict[tuple[int, int], np.ndarray] = {}

    def _names_by_column(self) -> list[tuple[str, ...]]:
        return [self.categorical_names.get(f, ()) for f in range(len(self.feature_names))]

    def settings(self) -> dict[str, object]:
        return {"kind": "tabular", "quantiles": list(self.quantiles), "train_rows": len(self.train)}

    def describe(self, instance: TabularInstance) -> str:
        return "a training row drawn at random, the anchor's features moved into the input's bins"

    # -- bins and predicates -------------------------------------------------

    def discretize(self, rows: np.ndarray) -> np.ndarray:
        """Bin index of every value: the code for categorical features, the quantile bin otherwise."""
        rows = np.atleast_2d(rows)
        bins = np.empty(rows.shape, dtype=np.int64)
        for f in range(rows.shape[1]):
            edges = self.edges.get(f)
            bins[:, f] = rows[:, f] if edges is None else np.searchsorted(edges, rows[:, f], side="left")
        return bins

    def predicate(self, feature: int, bin_: int) -> str:
        """The readable condition "value in this bin" ("age > 47.00", "sex = Male")."""
        name = self.feature_names[feature]
        edges = self.edges.get(feature)
        if edges is None:
            return f"{name} = {self.categorical_names[feature][bin_]}"
        if bin_ == 0:
            return f"{name} <= {edges[0]:.2f}"
        if bin_ == len(edges):
            return f"{name} > {edges[-1]:.2f}"
        return f"{edges[bin_ - 1]:.2f} < {name} <= {edges[bin_]:.2f}"

    # -- the sampler interface ------------------------------------------------

    def features(self, row: object) -> TabularInstance:
        """The instance of one row: a sequence of numbers/category names, or a {name: value} mapping."""
        values = self._parse(row)
        bins = self.discretize(values[None, :])[0]
        words = tuple(self.predicate(f, int(b)) for f, b in enumerate(bins))
        return TabularInstance(self.encode(values[None, :])[0], words, values, bins)

    def sample_present(self, instance: TabularInstance, rule: Rule, n: int, rng: np.random.Generator) -> np.ndarray:
        """Which features of ``n`` perturbations fall in the input's bins."""
        return self._draw(instance, rule, n, rng)[1]

    def sample(
        self, instance: TabularInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[list[str], np.ndarray]:
        """``n`` perturbed rows (as query strings) that satisfy ``rule``, and their matrix."""
        rows, present = self._draw(instance, rule, n, rng)
        return self.encode(rows), present

    def _draw(
        self, instance: TabularInstance, rule: Rule, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        picked = rng.integers(0, len(self.train), n)
        rows, bins = self.train[picked].copy(), self.train_bins[picked].copy()
        for f in sorted(rule):
            target = int(instance.bins[f])
            outside = np.flatnonzero(bins[:, f] != target)
            pool = self._values_in_bin(f, target, float(instance.values[f]))
            rows[outside, f] = pool[rng.integers(0, len(pool), len(outside))]
            bins[outside, f] = target
        return rows, bins == instance.bins

    def _values_in_bin(self, feature: int, bin_: int, fallback: float) -> np.ndarray:
        """Training values of ``feature`` in ``bin_`` (the input's own value if none)."""
        key = (feature, bin_)
        if key not in self._in_bin:
            self._in_bin[key] = self.train[self.train_bins[:, feature] == bin_, feature]
        pool = self._in_bin[key]
        return pool if len(pool) else np.array([fallback])

    # -- rows as query strings ---------------------------------------------------

    def encode(self, rows: np.ndarray) -> list[str]:
        """One JSON object per row, categories by name, integral numbers as ints."""
        names = self._names_by_column()
        out = []
        for row in rows:
            record: dict[str, object] = {}
            for f, value in enumerate(row.tolist()):
                if names[f]:
                    record[self.feature_names[f]] = names[f][int(value)]
                else:
                    record[self.feature_names[f]] = int(value) if float(value).is_integer() else value
            out.append(json.dumps(record))
        return out

    def decode(self, texts: Sequence[str]) -> np.ndarray:
        """The (n × features) matrix of query strings made by `encode`."""
        out = np.empty((len(texts), len(self.feature_names)))
        for i, text in enumerate(texts):
            out[i] = self._parse(json.loads(text))
        return out

    def _parse(self, row: object) -> np.ndarray:
        if isinstance(row, Mapping):
            missing = [n for n in self.feature_names if n not in row]
            if missing:
                raise InvalidInputError(f"row lacks features {missing}")
            row = [row[n] for n in self.feature_names]
        if isinstance(row, str | bytes) or not isinstance(row, Sequence | np.ndarray):
            raise InvalidInputError(f"a row must be a sequence of values or a mapping, got {type(row).__name__}")
        if len(row) != len(self.feature_names):
            raise InvalidInputError(f"row has {len(row)} values, expected {len(self.feature_names)}")
        values = np.empty(len(row))
        for f, value in enumerate(row):
            values[f] = self._value(f, value)
        return values

    def _value(self, feature: int, value: object) -> float:
        codes = self._codes[feature]
        if isinstance(value, str):
            if value not in codes:
                raise InvalidInputError(f"{self.feature_names[feature]}: unknown value {value!r}")
            return float(codes[value])
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidInputError(f"{self.feature_names[feature]}: {value!r} is not a number") from None
        if not np.isfinite(number) or (codes and (number != int(number) or not 0 <= number < len(codes))):
            raise InvalidInputError(f"{self.feature_names[feature]}: {value!r} is not a valid value")
        return number

    def memory_features(self) -> TabularMemoryFeatures:
        """MAnchors' memory key and HT for these rows (`MemoryFeatures`)."""
        return TabularMemoryFeatures(self)


class TabularClassifier(DecodingClassifier):
    """A tabular model as a `Classifier`: ``predict(matrix) -> labels`` (a
    scikit-learn model's, say) on the rows ``sampler``'s query strings name.

    ``name``: the model's identity, as `FunctionClassifier`'s.
    """

    def __init__(self, predict: Any, sampler: TabularSampler, *, name: str | None = None) -> None:
        super().__init__(predict, sampler.decode, "tabular", name=name)


class TabularMemoryFeatures:
    """MAnchors for rows: a row's memory key is its one-hot (feature, bin)
    vector; HT keeps each remembered predicate's feature."""

    def __init__(self, sampler: TabularSampler) -> None:
        self.n_features = len(sampler.feature_names)
        sizes = [len(sampler.categorical_names.get(f, ())) or len(sampler.edges[f]) + 1 for f in range(self.n_features)]
        self._offsets = np.cumsum([0, *sizes])

    @property
    def identity(self) -> str:
        return f"tabular-bins:{self.n_features}:{self.dim}"

    @property
    def dim(self) -> int:
        return int(self._offsets[-1])

    def embed(self, instances: Sequence[TabularInstance]) -> np.ndarray:
        """One-hot (feature, bin) unit vectors: cosine = share of features in the same bin."""
        out = np.zeros((len(instances), self.dim), dtype=np.float32)
        for i, instance in enumerate(instances):
            out[i, self._offsets[:-1] + instance.bins] = 1.0
        out /= np.sqrt(self.n_features)
        return out

    def describe(self, instance: TabularInstance, positions: Sequence[int]) -> tuple[tuple[float, ...], ...]:
        """A remembered predicate's value, for HT."""
        return tuple((float(instance.values[p]),) for p in positions)

    def horizontal(self, entry: MemoryEntry, instance: TabularInstance) -> list[int]:
        """HT: each remembered predicate → the input's predicate on the same feature.

        The paper's Dist is |a − b| between values of one feature: the input's
        nearest value of a feature is its own, so feature f maps to feature f
        and the predicate becomes "f in the input's bin".
        """
        return [int(p) for p in entry.rule_positions]

    def keys(self, instance: TabularInstance) -> tuple[str, ...]:
        """Predicates name the same (feature, bin) in every row."""
        return tuple(instance.features)
