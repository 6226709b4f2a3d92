"""`Explanation(meta, data)`: what was found, and how it was made."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from decimal import Decimal
from typing import Any

from ._budget import Charge
from ._classifier import Label
from ._search import RoundTrace, RuleStats
from ._text import TextInstance

__all__ = ["AnchorData", "Cost", "Explanation", "Meta"]


@dataclass(frozen=True)
class Cost:
    """What one explanation cost.

    ``queries``: texts sent to the model (each once, however often resent);
    ``cache_hits``: texts answered without a query; ``settled``: what the
    calls cost (`Charge`: billed queries, tokens, exact `Decimal` dollars);
    ``reserved``: the worst cases held against the budget before the calls
    (empty without a budget). The properties read the settled charge.
    """

    queries: int = 0
    cache_hits: int = 0
    settled: Charge = field(default_factory=Charge)
    reserved: Charge = field(default_factory=Charge)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Cost:
        """From `Explanation.to_json`'s form, or the flat one written before 0.2."""
        if "settled" not in raw:  # before 0.2: one flat record
            estimated = bool(raw.get("tokens_estimated", False))
            settled = Charge(
                0,
                raw.get("prompt_tokens", 0),
                raw.get("completion_tokens", 0),
                Decimal(str(raw.get("usd_settled", 0))),
                estimated,
            )
            reserved = Charge(usd=Decimal(str(raw.get("usd_reserved", 0))), estimated=estimated)
            return cls(raw.get("queries", 0), raw.get("cache_hits", 0), settled, reserved)
        charges = {k: Charge(**_known(Charge, raw[k])) for k in ("settled", "reserved")}
        return cls(raw.get("queries", 0), raw.get("cache_hits", 0), **charges)

    @property
    def prompt_tokens(self) -> int:
        return self.settled.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.settled.completion_tokens

    @property
    def tokens_estimated(self) -> bool:
        return self.settled.estimated or self.reserved.estimated

    @property
    def usd(self) -> Decimal:
        return self.settled.usd

    @property
    def usd_settled(self) -> Decimal:
        return self.settled.usd

    @property
    def usd_reserved(self) -> Decimal:
        return self.reserved.usd


@dataclass(frozen=True)
class Meta:
    """How the explanation was made.

    ``samples``: labelled perturbations the search consumed, cache hits
    included; ``queries``: texts actually sent to the model (the
    unperturbed input included); ``cache_hits``: texts answered without a
    query; ``retries``: failed calls sent again; ``failures``: failed calls
    by reason ("HTTP 429", "timeout", ...); ``unparsed``: answers
    that named no label (the class `UNPARSED`); ``stages``: samples and
    paid queries per step of the search (``{"root": {"samples": 1,
    "queries": 1}, "round-1": ...}``, names in `llm_anchors._search.STAGES`;
    MAnchors adds "prune"). MAnchors adds
    ``memory_hit`` (None for plain Anchors), the similarity and text of the
    nearest remembered input, the time to embed and look it up; with
    strategy "guided" the rules the memory proposed, with "paper" the rule
    HT mapped onto this input and the words pruned from it. ``determinism``
    (with ``verify_determinism``): texts asked again and how many changed label.
    """

    explainer: str
    version: str
    classifier: str
    params: dict[str, Any]
    seed: int
    samples: int
    queries: int
    cache_hits: int
    wall_time_s: float
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    unparsed: int = 0
    budget_exhausted: bool = False
    cost: Cost = field(default_factory=Cost)
    stages: dict[str, dict[str, int]] = field(default_factory=dict)
    memory_hit: bool | None = None
    memory_similarity: float | None = None
    memory_lookup_s: float | None = None
    memory_source: str | None = None
    ht_rule: tuple[str, ...] = ()
    ht_pruned: tuple[str, ...] = ()
    memory_proposals: tuple[tuple[str, ...], ...] = ()
    determinism: dict[str, int] | None = None


@dataclass(frozen=True)
class AnchorData:
    """The anchor and its statistics.

    ``query``: the explained input as the model was asked about it (the
    text; a row as JSON; an image's digest); ``features``: its features by
    name (the words; predicates; superpixels), read as ``text`` and
    ``words`` too. ``anchor``: the anchor's features, in input order;
    ``positions``: their indices among ``features``. ``precision`` is the search's estimate, with
    KL bounds ``precision_bounds``; ``success`` is False when no rule
    reached the threshold and the best-precision rule is returned instead.
    """

    query: str
    features: tuple[str, ...]
    label: Label
    anchor: tuple[str, ...]
    positions: tuple[int, ...]
    precision: float
    precision_bounds: tuple[float, float]
    coverage: float
    success: bool
    n_samples: int
    examples_covered_true: tuple[str, ...] = ()
    examples_covered_false: tuple[str, ...] = ()
    path: tuple[RuleStats, ...] = ()
    rounds: tuple[RoundTrace, ...] = ()

    @property
    def text(self) -> str:
        """The query, named for a text explanation."""
        return self.query

    @property
    def words(self) -> tuple[str, ...]:
        """The features, named for a text explanation."""
        return self.features


@dataclass(frozen=True)
class Explanation:
    meta: Meta
    data: AnchorData

    def to_json(self, **dumps_kwargs: Any) -> str:
        """JSON text; `from_json` reads it back into an equal object."""
        return json.dumps({"meta": asdict(self.meta), "data": asdict(self.data)}, default=_plain, **dumps_kwargs)

    @classmethod
    def from_json(cls, text: str) -> Explanation:
        raw = json.loads(text)
        meta = dict(raw["meta"])
        meta["cost"] = Cost.from_dict(meta["cost"])
        for name in ("ht_rule", "ht_pruned"):
            meta[name] = tuple(meta.get(name, ()))
        meta["memory_proposals"] = tuple(tuple(r) for r in meta.get("memory_proposals", ()))
        data = {_OLD_DATA.get(k, k): v for k, v in raw["data"].items()}  # "text"/"words" before 0.2
        for name in _TUPLES:
            data[name] = tuple(data[name])
        data["path"] = tuple(_rule_stats(s) for s in data["path"])
        data["rounds"] = tuple(
            RoundTrace(r["size"], r["n_candidates"], tuple(_rule_stats(s) for s in r["beam"])) for r in data["rounds"]
        )
        return cls(Meta(**_known(Meta, meta)), AnchorData(**_known(AnchorData, data)))

    def __str__(self) -> str:
        d, m = self.data, self.meta
        anchor = " AND ".join(d.anchor) if d.anchor else "(empty: the label holds whatever the words)"
        flag = "" if d.success else " [no rule reached the threshold]"
        if m.budget_exhausted:
            flag += " [budget exhausted: best rule so far]"
        return (
            f"{anchor} -> {d.label!r} | precision {d.precision:.2f} | coverage {d.coverage:.2f} | "
            f"{m.samples} samples, {m.queries} queries, ${m.cost.usd_settled}, {m.wall_time_s:.2f}s{flag}"
        )

    def marked_html(self, wrap: Callable[[str], str]) -> str:
        """HTML of the input with its anchor's words passed through ``wrap`` (given
        escaped text); for rows and images, the anchor's rule."""
        d = self.data
        sampler = self.meta.params.get("sampler") or {}
        if sampler.get("kind", "text") == "text":  # the sentence, anchor words marked
            return TextInstance.parse(d.query).mark(d.positions, wrap, html.escape)
        return " AND ".join(wrap(html.escape(w)) for w in d.anchor) or "(empty rule)"  # features: the rule

    def _repr_html_(self) -> str:
        d = self.data
        sentence = self.marked_html(lambda w: f"<mark><b>{w}</b></mark>")
        return (
            f"<div><p>{sentence}</p><p>label <code>{html.escape(repr(d.label))}</code> · "
            f"precision {d.precision:.2f} · coverage {d.coverage:.2f}</p></div>"
        )


_OLD_DATA = {"text": "query", "words": "features"}
_TUPLES = ("features", "anchor", "positions", "precision_bounds", "examples_covered_true", "examples_covered_false")


def _rule_stats(raw: dict[str, Any]) -> RuleStats:
    return RuleStats(tuple(raw["rule"]), tuple(raw["order"]), raw["n_samples"], raw["positives"], raw["coverage"])


def _known(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


def _plain(value: Any) -> Any:
    """JSON for what json does not know: a `Decimal` as its exact string."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
