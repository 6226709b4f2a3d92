"""The explained model: anything that labels a list of texts."""

from __future__ import annotations

import asyncio
import inspect
import math
import secrets
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from .._complete import Completed
from .._exceptions import BackendTimeoutError, ClassifierError, ConfigError, LLMAnchorsError
from ..money.charge import Charge
from ..money.pricing import Price

__all__ = [
    "UNPARSED",
    "Batch",
    "BaseClassifier",
    "Classifier",
    "DecodingClassifier",
    "FunctionClassifier",
    "Label",
    "Probabilities",
    "as_classifier",
    "check_labels",
    "model_name",
    "require_stable_identity",
]

Label = Hashable
"""A class label: a str or an int, typically."""

Probabilities = dict[Label, float]
"""The probability a classifier gave each label, for one text (labels it gave none to: absent)."""

UNPARSED = "<unparsed>"
"""The label of an answer that names no label: a class of its own, never
silently the explained input's label."""


@dataclass(frozen=True)
class Batch:
    """A classifier's answer to a list of texts: one label each, and what the
    call cost (its tokens and dollars; the engine counts the queries)."""

    labels: list[Label]
    charge: Charge = field(default_factory=Charge)
    disputed: str = ""
    """Why the classifier did not believe the usage its server reported ("": it did); the engine
    then counts the call at the larger of its worst case and its bill (`Charge.disputed`)."""
    dearest_tier: bool = False
    """Whether the call was billed at its model's dearest service tier because its server named none
    the price knows (``"auto"``, a tier the price lacks): its usage as reported, not disputed."""
    probabilities: list[Probabilities | None] | None = None
    """Per text, the probability the model gave each label (None: it gives none, or not for that text).
    They only guide which rules the search tests (`GrowthParams.scored_samples`); certificates count
    labels alone."""


@runtime_checkable
class Classifier(Protocol):
    """Labels texts: the model an explanation is about.

    ``identity`` names the model for caches and reports: two classifiers
    with the same identity must give the same labels. `classify` labels a
    list of texts in one call. The other members tell the engine how to
    send and price calls; `BaseClassifier` gives each a safe default, and
    `as_classifier` fills them in for an object that has only ``identity``
    and ``classify``:

    - ``max_request_size``: texts one call may take (None: any number);
    - ``price``: what its tokens cost, dated, recorded with each explanation
      (None: not priced by the token);
    - `quote`: the worst-case cost of a call, before it is made (by default
      one query per text, no tokens, no dollars);
    - `aclose`: release connections (by default nothing).
    """

    @property
    def identity(self) -> str: ...

    @property
    def max_request_size(self) -> int | None: ...

    @property
    def price(self) -> Price | None: ...

    async def classify(self, texts: Sequence[str]) -> Batch: ...

    async def quote(self, texts: Sequence[str]) -> Charge: ...

    async def aclose(self) -> None: ...


class BaseClassifier:
    """The optional `Classifier` members with their defaults; subclass it and
    write ``identity`` and ``classify``."""

    @property
    def max_request_size(self) -> int | None:
        """Texts one call may take: any number."""
        return None

    @property
    def price(self) -> Price | None:
        """Not priced by the token."""
        return None

    async def quote(self, texts: Sequence[str]) -> Charge:
        """One query per text and nothing else: a model that is not paid by the token."""
        return Charge(queries=len(texts))

    async def aclose(self) -> None:
        return None


def as_classifier(obj: Any) -> Classifier:
    """``obj`` as a full `Classifier`: itself when it has every member, else with the defaults
    of `BaseClassifier` for those it lacks. `ConfigError` without ``identity`` and ``classify``."""
    if not hasattr(obj, "identity") or not callable(getattr(obj, "classify", None)):
        raise ConfigError(f"{obj!r} is not a Classifier (it needs .identity and async .classify)")
    if isinstance(obj, Classifier):
        return obj
    return cast(
        Classifier, Completed(obj, BaseClassifier(), {"max_request_size": int, "price": Price}, ("quote", "aclose"))
    )


class FunctionClassifier(BaseClassifier):
    """Wraps a function from a list of texts to a list of labels.

    The function may be sync (a scikit-learn pipeline's ``predict``, say)
    or async. A sync function runs in a worker thread unless
    ``in_thread=False``, so a slow model does not block the event loop, and
    one batch at a time unless ``thread_safe=True``: a model's predict is
    not safe to call from several threads at once in general (scikit-learn's
    ensembles, for one, reset the process's warning filters while they
    predict).

    ``name`` is the model's identity for caches and memories: two
    classifiers with one name must be the same model. Without it each
    FunctionClassifier gets an identity of its own (its function's name and
    a random suffix), so two models never share labels by accident (two
    ``predict`` methods, two lambdas, a retrained model); give a ``name``
    to share a cache across classifiers or runs: a persisted `QueryCache`
    and a saved MAnchors memory require one.

    ``predict_proba``: the model's probabilities for the same texts (an n × classes array, as
    scikit-learn's ``predict_proba``), its columns the labels ``classes`` (by default the ``classes_``
    of the object ``predict_proba`` is a method of). Given, they let the search choose what to test on
    fewer samples (`Batch.probabilities`); the labels are still ``fn``'s.

    ``timeout`` (seconds) bounds each call: a call that takes longer raises
    `BackendTimeoutError` (retried as a timeout). A sync function running in
    a thread cannot be stopped: it finishes in the background, its answer
    unused.

    >>> clf = FunctionClassifier(pipeline.predict, predict_proba=pipeline.predict_proba, name="tfidf-rf-2024-05")
    """

    def __init__(
        self,
        fn: Callable[[list[str]], Any],
        *,
        name: str | None = None,
        in_thread: bool = True,
        thread_safe: bool = False,
        timeout: float | None = None,
        predict_proba: Callable[[list[str]], Any] | None = None,
        classes: Sequence[Label] | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"FunctionClassifier needs a callable, got {type(fn).__name__}")
        if predict_proba is not None and not callable(predict_proba):
            raise ConfigError(f"predict_proba must be callable, got {type(predict_proba).__name__}")
        if classes is None and predict_proba is not None:
            classes = getattr(getattr(predict_proba, "__self__", None), "classes_", None)
            if classes is None:
                raise ConfigError("predict_proba needs classes=: the label of each of its columns")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigError(f"name must be a non-empty string, got {name!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ConfigError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self.fn = fn
        self.predict_proba = predict_proba
        self.classes = None if classes is None else check_labels(classes, len(classes), "classes=")
        if self.classes is not None and len(set(self.classes)) != len(self.classes):
            raise ConfigError(f"classes= names a label twice: {self.classes!r} (one label per column)")
        self.named = name is not None
        self.name = name if name is not None else f"{model_name(fn)}#{secrets.token_hex(4)}"
        self.in_thread = in_thread
        self.thread_safe = thread_safe
        self.timeout = timeout
        self._one_at_a_time = threading.Lock()

    @property
    def identity(self) -> str:
        return f"function:{self.name}"

    def __repr__(self) -> str:
        return f"FunctionClassifier({self.name!r})"

    async def classify(self, texts: Sequence[str]) -> Batch:
        batch = list(texts)
        labels = check_labels(await self._guarded(self.fn, batch), len(batch), self.identity)
        if self.predict_proba is None:
            return Batch(labels)
        return Batch(labels, probabilities=await self._probabilities(batch))

    async def _guarded(self, fn: Callable[[list[str]], Any], batch: list[str], what: str = "") -> Any:
        """``fn(batch)`` (`_call`) within ``timeout``; what it raises as a `ClassifierError` (``what``
        names the function in the message), a timeout as `BackendTimeoutError`."""
        try:
            return await asyncio.wait_for(self._call(batch, fn), self.timeout)
        except TimeoutError:
            raise BackendTimeoutError(f"no answer within {self.timeout} s", classifier=self.identity) from None
        except LLMAnchorsError:
            raise
        except Exception as exc:
            said = f"{what} raised" if what else "raised"
            raise ClassifierError(f"{said} {type(exc).__name__}: {exc}", classifier=self.identity) from exc

    async def _call(self, batch: list[str], fn: Callable[[list[str]], Any]) -> Any:
        if inspect.iscoroutinefunction(fn):
            result = await fn(batch)
        elif self.in_thread:
            result = await (
                asyncio.to_thread(fn, batch) if self.thread_safe else asyncio.to_thread(self._alone, batch, fn)
            )
        else:
            result = fn(batch)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _alone(self, batch: list[str], fn: Callable[[list[str]], Any]) -> Any:
        with self._one_at_a_time:
            return fn(batch)

    async def _probabilities(self, batch: list[str]) -> list[Probabilities | None]:
        """``predict_proba``'s rows as label → probability; a row that is not one (a wrong width,
        a value outside [0, 1] or not a number) is None: it says nothing, and never a label."""
        assert self.predict_proba is not None and self.classes is not None
        rows = await self._guarded(self.predict_proba, batch, "predict_proba")
        rows = rows.tolist() if hasattr(rows, "tolist") else list(rows)
        if len(rows) != len(batch):
            raise ClassifierError(
                f"predict_proba returned {len(rows)} rows for {len(batch)} texts", classifier=self.identity
            )
        return [_probabilities(row, self.classes) for row in rows]

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle (Ray ships classifiers)
        return {k: v for k, v in self.__dict__.items() if k != "_one_at_a_time"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _one_at_a_time=threading.Lock())


def _probabilities(row: Any, classes: Sequence[Label]) -> Probabilities | None:
    try:
        values = [float(v) for v in row]
    except (TypeError, ValueError):
        return None
    if len(values) != len(classes) or not all(0.0 <= v <= 1.0 for v in values):
        return None
    return dict(zip(classes, values, strict=True))


def require_stable_identity(classifier: Classifier, use: str) -> None:
    """`ConfigError` unless ``classifier``'s identity names its model across runs (not a
    `FunctionClassifier` left without a ``name``, whose identity is random)."""
    if isinstance(classifier, FunctionClassifier) and not classifier.named:
        raise ConfigError(
            f"{use} outlives this process: give the model a stable identity, "
            f"FunctionClassifier(..., name='my-model-v1') (now {classifier.identity!r})"
        )


class DecodingClassifier(FunctionClassifier):
    """A model of decoded inputs as a `Classifier`: ``predict(decode(texts))``, the query strings a
    sampler wrote turned back into what the model takes (rows, images). ``kind`` prefixes its
    identity; ``name`` as `FunctionClassifier`'s."""

    def __init__(
        self, predict: Any, decode: Callable[[Sequence[str]], Any], kind: str, *, name: str | None = None
    ) -> None:
        def classify(texts: list[str]) -> Any:
            return predict(decode(texts))

        classify.__qualname__ = f"{kind}:{model_name(predict)}"
        super().__init__(classify, name=f"{kind}:{name}" if name else None)


def model_name(predict: Any) -> str:
    """A readable name for a model's predict function (its class, else its qualified name)."""
    owner = getattr(predict, "__self__", None)
    if owner is not None:
        return type(owner).__name__
    return str(getattr(predict, "__qualname__", None) or type(predict).__name__)


def check_labels(result: Any, expected: int, classifier: str) -> list[Label]:
    """Turn a classifier's answer into a list of ``expected`` plain labels."""
    if hasattr(result, "tolist"):
        result = result.tolist()
    if isinstance(result, (str, bytes)) or not isinstance(result, Sequence):
        raise ClassifierError(f"returned {type(result).__name__}, not a list of labels", classifier=classifier)
    if len(result) != expected:
        raise ClassifierError(f"returned {len(result)} labels for {expected} texts", classifier=classifier)
    labels = [label.item() if hasattr(label, "item") else label for label in result]
    for label in labels:
        if not isinstance(label, Hashable):
            raise ClassifierError(f"returned an unhashable label {label!r}", classifier=classifier)
        if isinstance(label, float) and math.isnan(label):
            raise ClassifierError(
                "returned NaN as a label (NaN equals nothing, not even itself)", classifier=classifier
            )
    return labels
