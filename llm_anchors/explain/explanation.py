"""`Explanation(meta, data)`: what was found, and how it was made."""

from __future__ import annotations

import dataclasses
import html
import json
import math
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from .._checks import check_int
from .._exceptions import ConfigError
from .._version import __version__
from ..models.classifier import Label
from ..money.charge import Charge
from ..money.pricing import Price
from ..query.engine import QueryStats
from ..samplers.text import PERTURBATIONS, Perturbation
from ..samplers.text_instance import TextInstance
from ..search.base import RoundTrace, RuleStats
from ..search.guided import GuidedParams
from ..search.params import SearchParams
from ..search.proxy import ProxyParams

__all__ = [
    "AnchorData",
    "Cost",
    "Explanation",
    "Level",
    "MemorySettings",
    "MemoryUse",
    "Meta",
    "Opinion",
    "ProxyUse",
    "Recheck",
    "SecondOpinion",
    "Settings",
    "Stage",
]


@dataclass(frozen=True)
class Cost:
    """What one explanation's calls cost.

    ``settled``: what the calls were billed (`Charge`: queries billed, a
    resent one too; tokens; exact `Decimal` dollars, ``cost.settled.usd``);
    ``reserved``: the worst cases held against the budget before the calls
    (empty without a budget); ``cache_hits``: texts answered without a
    call; ``retries``: failed calls sent again; ``failures``: failed calls
    by reason ("HTTP 429", "timeout", or the error's type); ``disputed``:
    calls whose reported usage could not be true (more prompt tokens than
    were sent, cached beyond the prompt, unreadable, ...), by reason: each
    is in ``settled`` at the worst case reserved for it.
    """

    settled: Charge = field(default_factory=Charge)
    reserved: Charge = field(default_factory=Charge)
    cache_hits: int = 0
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    disputed: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, stats: QueryStats) -> Cost:
        """The record of an explanation's (or its proxy's) calls."""
        return cls(stats.settled, stats.reserved, stats.cache_hits, stats.retries, dict(stats.failures),
                   dict(stats.disputed))  # fmt: skip


@dataclass(frozen=True)
class Stage:
    """Samples and paid queries of one step of the search."""

    samples: int = 0
    queries: int = 0


@dataclass(frozen=True)
class MemoryUse:
    """How MAnchors used its memory for one input.

    ``similarity``: the cosine similarity of the nearest remembered input
    with this label (None: none yet); ``lookup_s``: the time to embed this
    input and look it up; ``source``: the remembered input reused, on a hit;
    ``proposals`` ("guided"): the rules the memory proposed, as features;
    ``ht_rule``, ``ht_pruned`` ("paper"): the rule HT mapped onto this input
    and the features pruned from it.
    """

    similarity: float | None = None
    lookup_s: float = 0.0
    source: str | None = None
    proposals: tuple[tuple[str, ...], ...] = ()
    ht_rule: tuple[str, ...] = ()
    ht_pruned: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProxyUse:
    """What the proxy did for one input (MAnchors' guided strategy).

    ``kind``: "surrogate" (learned from the model's own labels) or the proxy
    classifier's identity; ``samples``: perturbations the proxy labelled in
    its search (never counted in ``meta.samples``); ``queries`` and ``cost``:
    what a proxy classifier was paid for them (the surrogate: none);
    ``proposals``: the rules it handed over, as features, best first;
    ``certified``: whether the anchor is one of them; ``trust``: the share of
    earlier inputs whose anchor the proxy proposed, which set how many of its
    rules were tried here.
    """

    kind: str
    samples: int = 0
    queries: int = 0
    cost: Cost | None = None
    proposals: tuple[tuple[str, ...], ...] = ()
    certified: bool = False
    trust: float = 1.0


@dataclass(frozen=True)
class Recheck:
    """``verify_determinism``: texts asked again, bypassing the cache, and how many changed label."""

    rechecked: int
    changed: int


@dataclass(frozen=True)
class SecondOpinion:
    """Ask, after the search, for the anchor's precision under another text perturbation
    (``perturbation``: "unk", "delete", "similar", "infill") on ``samples`` fresh perturbations: paid
    queries, counted in the explanation (stage "second opinion"), read in ``data.second_opinion``."""

    perturbation: Perturbation
    samples: int = 200

    def __post_init__(self) -> None:
        if self.perturbation not in PERTURBATIONS:
            raise ConfigError(f"second opinion: perturbation must be one of {PERTURBATIONS}, got {self.perturbation!r}")
        check_int("second opinion samples", self.samples, minimum=1)


@dataclass(frozen=True)
class Opinion:
    """The anchor's precision under another perturbation (`SecondOpinion`): measured on ``samples``
    fresh perturbations, ``perturbed_as`` says how; no certificate, an estimate."""

    perturbation: str
    perturbed_as: str
    precision: float
    samples: int


@dataclass(frozen=True)
class Settings:
    """Every parameter that shaped an explanation.

    ``search``: the search's (`SearchParams`); ``sampler``: the sampler's
    own settings (``kind`` first: text, tabular, image); ``memory``:
    MAnchors' (None for plain Anchors); the rest, how queries were sent and
    capped.
    """

    search: SearchParams
    sampler: dict[str, Any]
    max_concurrency: int
    request_size: int
    n_examples: int
    verify_determinism: int = 0
    budget: str | None = None
    on_budget: str = "raise"
    memory: MemorySettings | None = None
    price: Price | None = None
    """What the model's tokens cost when it was explained (rates per million, their date and source)."""
    second_opinion: SecondOpinion | None = None


@dataclass(frozen=True)
class MemorySettings:
    """MAnchors' parameters (see `MAnchorsExplainer`), the guided search's and the proxy's whole."""

    strategy: str
    tau_sim: float
    tau_mid: float
    k_nearest: int
    max_proposals: int
    prune_samples: int
    embedder: str
    use_memory: bool = True
    guided: GuidedParams = field(default_factory=GuidedParams)
    proxy: str | None = None
    proxy_params: ProxyParams | None = None


@dataclass(frozen=True)
class Meta:
    """How the explanation was made.

    ``samples``: labelled perturbations the search consumed, cache hits
    included; ``queries``: texts actually sent to the model (the
    unperturbed input included, each once however often resent); ``cost``:
    what the calls cost (`Cost`); ``unparsed``: answers that named no label
    (the class `UNPARSED`); ``stages``: samples and paid queries per step of
    the search (names in `llm_anchors.search.beam.STAGES`); ``memory_hit``:
    whether MAnchors reused a remembered input (None for plain Anchors),
    ``memory`` how (`MemoryUse`); ``proxy``: what the proxy searched and
    proposed (`ProxyUse`; its samples are not in ``samples``);
    ``determinism`` (with ``verify_determinism``): `Recheck`.
    """

    explainer: str
    version: str
    classifier: str
    settings: Settings
    seed: int
    samples: int
    queries: int
    wall_time_s: float
    cost: Cost = field(default_factory=Cost)
    unparsed: int = 0
    budget_exhausted: bool = False
    stages: dict[str, Stage] = field(default_factory=dict)
    memory_hit: bool | None = None
    memory: MemoryUse | None = None
    proxy: ProxyUse | None = None
    determinism: Recheck | None = None
    infill: Cost | None = None
    """Under the ``infill`` perturbation: what the filler model's calls cost (apart from ``queries`` and
    ``cost``, the explained model's)."""


@dataclass(frozen=True)
class Level:
    """The coarse anchor of a search coarse to fine: the sentences found first, before the words inside them.

    ``anchor``: the sentences, certified at their level; ``positions``: their indices among the text's
    sentences (their spans in ``spans``); ``precision``, ``coverage``: as the search judged them on its
    samples at that level (``data.claim`` is about ``data.anchor``, the words, not these).
    """

    unit: str
    anchor: tuple[str, ...]
    positions: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    precision: float
    coverage: float


@dataclass(frozen=True)
class AnchorData:
    """The anchor and its statistics.

    ``query``: the explained input as the model was asked about it (the
    text; a row as JSON; an image's digest); ``features``: its features by
    name (the words or sentences; predicates; superpixels) and, for a text, ``spans``: where each is in
    ``query`` (character offsets). ``anchor``: the anchor's features, in input order;
    ``positions``: their indices among ``features``. ``precision`` is the search's estimate, with
    KL bounds ``precision_bounds``; ``success`` is False when no rule
    reached the threshold and the best-precision rule is returned instead. ``perturbation``: the
    distribution the precision is about, in words.

    Coarse to fine (a text of several sentences, ``unit="auto"``): ``coarse`` holds the sentences found
    first (`Level`), and ``features`` are then the words of those sentences and the other sentences whole:
    ``anchor`` is the words inside the coarse anchor's sentences that keep the label (or, when no rule of
    words was certified, the sentences themselves, ``coarse`` then None).
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
    certified_samples: int = 0
    """The samples drawn after the anchor was chosen on which it was certified (0: not certified)."""
    tested: int = 0
    """The rules the search chose to test, among which δ was shared (the anchor was one of them)."""
    movers: tuple[tuple[str, float], ...] = ()
    """For an empty anchor whose samples disagreed at least 3 times: the (at most 3) words whose
    presence holds the label most, with by how much (share of the samples that kept the label with
    the word, less without it)."""
    spans: tuple[tuple[int, int], ...] = ()
    perturbation: str = ""
    coarse: Level | None = None
    second_opinion: Opinion | None = None
    """The anchor's precision under another perturbation, when the explainer was asked (`SecondOpinion`)."""


@dataclass(frozen=True)
class Explanation:
    meta: Meta
    data: AnchorData

    def to_json(self, **dumps_kwargs: Any) -> str:
        """JSON text; `from_json` reads it back into an equal object."""
        return json.dumps({"meta": asdict(self.meta), "data": asdict(self.data)}, default=_plain, **dumps_kwargs)

    @classmethod
    def from_json(cls, text: str) -> Explanation:
        """The explanation `to_json` wrote; anything else is a `ConfigError`."""
        try:
            raw = json.loads(text)
            explanation = cls(_meta(raw["meta"]), _data(raw["data"]))
            _check_types(explanation)
            return explanation
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise ConfigError(f"not an explanation of llm-anchors {__version__}: {type(exc).__name__}: {exc}") from None

    def __str__(self) -> str:
        d, m = self.data, self.meta
        anchor = " AND ".join(d.anchor) if d.anchor else "(empty: a prior, not these words)"
        flag = "" if d.success else " [no rule reached the threshold]"
        if m.budget_exhausted:
            flag += " [budget exhausted: best rule so far]"
        return (
            f"{anchor} -> {d.label!r} | precision {d.precision:.2f} | coverage {d.coverage:.2f} | "
            f"{m.samples} samples, {m.queries} queries, ${m.cost.settled.usd}, {m.wall_time_s:.2f}s{flag}"
        )

    @property
    def claim(self) -> str:
        """What the explanation guarantees, in one line: the bound, at which δ, for the anchor returned
        among how many rules tested, on which samples."""
        d, p = self.data, self.meta.settings.search
        low = d.precision_bounds[0]
        bound, name = (p.threshold, "τ") if p.certify == "strict" else (p.threshold - p.epsilon_stop, "τ − ε_stop")
        under = f"; perturbed as: {d.perturbation}" if d.perturbation else ""
        if not d.success:
            return (
                f"no rule was certified (precision ≥ {name} = {bound:g}) among the {d.tested:,} tested: the rule "
                f"shown is the most promising tested, its bounds on the samples drawn after it was chosen{under}"
            )
        recheck = self.meta.determinism
        unsure = ""
        if recheck is not None and recheck.changed:
            unsure = (
                f"NOT CERTIFIED: the model gave {recheck.changed} of {recheck.rechecked} texts another label when "
                "asked again, and the certificate assumes one answer per text; as measured: "
            )
        claim = unsure + (
            f"precision ≥ {name} = {bound:g} with probability ≥ 1 − δ = {1 - p.delta:g} for the anchor returned, "
            f"δ shared among the {d.tested:,} rules tested; certified on {d.certified_samples:,} samples drawn "
            f"after it was chosen (their lower bound {low:.3f}; {p.certify})"
        )
        if not d.anchor:
            words = "words" if self.meta.settings.sampler.get("kind", "text") == "text" else "features"
            claim += (
                f"; an empty anchor: the model gives this label to perturbed inputs at that precision whatever "
                f"{words} remain (a prior, not these {words})"
            )
            if d.movers:
                claim += "; the words whose presence holds it most: " + ", ".join(
                    f"{w} ({e:+.0%})" for w, e in d.movers
                )
            else:
                claim += "; too few samples disagreed to say which words move it"
        return claim + under

    @property
    def saved_by_caching(self) -> Decimal:
        """What the provider's prompt cache saved: the calls' cost with every prompt token at the
        input rate of the tier billed, less what they were billed ($0 for a model not priced by the token)."""
        return self.meta.cost.settled.saved_by_caching

    def text_instance(self) -> TextInstance:
        """The explained text split into its features as its sampler split it (``positions`` index these)."""
        return TextInstance(self.data.query, self.data.features, self.data.spans)

    def mark(self, wrap: Callable[[str], str], escape: Callable[[str], str] = str,
             wrap_coarse: Callable[[str], str] = str) -> str:  # fmt: skip
        """The text with its anchor's words (or sentences) passed through ``wrap`` and, coarse to fine, the
        coarse anchor's sentences through ``wrap_coarse``; everything through ``escape`` first."""
        d = self.data
        outer = d.coarse.spans if d.coarse is not None else ()
        return self.text_instance().mark(d.positions, wrap, escape, outer, wrap_coarse)

    def marked_html(self, wrap: Callable[[str], str], wrap_coarse: Callable[[str], str] = str) -> str:
        """HTML of the input with its anchor's words passed through ``wrap`` (given escaped text) and a
        coarse anchor's sentences through ``wrap_coarse``; for rows and images, the anchor's rule."""
        d = self.data
        if self.meta.settings.sampler.get("kind", "text") == "text":  # the text, its anchor's words (sentences) marked
            return self.mark(wrap, html.escape, wrap_coarse)
        return " AND ".join(wrap(html.escape(w)) for w in d.anchor) or "(empty rule)"  # features: the rule

    def _repr_html_(self) -> str:
        d = self.data
        sentence = self.marked_html(
            lambda w: f"<mark><b>{w}</b></mark>", lambda s: f'<span style="background:#eef3ff">{s}</span>'
        )
        return (
            f"<div><p>{sentence}</p><p>label <code>{html.escape(repr(d.label))}</code> · "
            f"precision {d.precision:.2f} · coverage {d.coverage:.2f}</p></div>"
        )


_TUPLES = ("features", "anchor", "positions", "precision_bounds", "examples_covered_true", "examples_covered_false")


def _spans(raw: list[list[int]]) -> tuple[tuple[int, int], ...]:
    return tuple((a, b) for a, b in raw)


def _meta(raw: dict[str, Any]) -> Meta:
    settings = dict(raw["settings"])
    settings["search"] = SearchParams(**settings["search"])
    if settings.get("memory") is not None:
        recorded = dict(settings["memory"])
        recorded["guided"] = GuidedParams(**recorded["guided"])
        recorded["proxy_params"] = ProxyParams(**recorded["proxy_params"]) if recorded.get("proxy_params") else None
        settings["memory"] = MemorySettings(**recorded)
    if settings.get("price") is not None:
        settings["price"] = Price(**settings["price"])
    if settings.get("second_opinion") is not None:
        settings["second_opinion"] = SecondOpinion(**settings["second_opinion"])
    cost = _cost(raw["cost"])
    memory = raw.get("memory")
    if memory is not None:
        proposals = tuple(tuple(rule) for rule in memory["proposals"])
        ht = {name: tuple(memory[name]) for name in ("ht_rule", "ht_pruned")}
        memory = MemoryUse(**{**memory, "proposals": proposals, **ht})
    return Meta(
        **{
            **raw,
            "settings": Settings(**settings),
            "cost": cost,
            "proxy": _proxy(raw.get("proxy")),
            "stages": {name: Stage(**counts) for name, counts in raw["stages"].items()},
            "memory": memory,
            "determinism": Recheck(**raw["determinism"]) if raw.get("determinism") is not None else None,
            "infill": _cost(raw["infill"]) if raw.get("infill") is not None else None,
        }
    )


def _cost(raw: dict[str, Any]) -> Cost:
    return Cost(**{**raw, "settled": Charge(**raw["settled"]), "reserved": Charge(**raw["reserved"])})


def _proxy(raw: dict[str, Any] | None) -> ProxyUse | None:
    if raw is None:
        return None
    cost = _cost(raw["cost"]) if raw.get("cost") is not None else None
    return ProxyUse(**{**raw, "cost": cost, "proposals": tuple(tuple(rule) for rule in raw["proposals"])})


def _data(raw: dict[str, Any]) -> AnchorData:
    data = dict(raw)
    for name in _TUPLES:
        data[name] = tuple(data[name])
    data["path"] = tuple(_rule_stats(s) for s in data["path"])
    data["movers"] = tuple((w, e) for w, e in data.get("movers", ()))
    data["spans"] = _spans(data.get("spans", ()))
    if data.get("coarse") is not None:
        coarse = data["coarse"]
        data["coarse"] = Level(**{**coarse, "anchor": tuple(coarse["anchor"]), "positions": tuple(coarse["positions"]),
                                  "spans": _spans(coarse["spans"])})  # fmt: skip
    if data.get("second_opinion") is not None:
        data["second_opinion"] = Opinion(**data["second_opinion"])
    data["rounds"] = tuple(
        RoundTrace(r["size"], r["n_candidates"], tuple(_rule_stats(s) for s in r["beam"]), r["n_arms"])
        for r in data["rounds"]
    )
    return AnchorData(**data)


def _rule_stats(raw: dict[str, Any]) -> RuleStats:
    return RuleStats(tuple(raw["rule"]), tuple(raw["order"]), raw["n_samples"], raw["positives"], raw["coverage"])


_SIMPLE = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_types(value: Any, where: str = "") -> None:
    """`TypeError` naming the field when a number, flag or name read from JSON is of another type
    (a hand-edited ``"precision": "x"``), in ``value`` and the dataclasses it holds."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    hints = typing.get_type_hints(type(value))
    for f in dataclasses.fields(value):
        got, name = getattr(value, f.name), f"{where}{f.name}"
        allowed = _SIMPLE.get(getattr(hints[f.name], "__name__", ""))
        if allowed and (not isinstance(got, allowed) or (bool not in allowed and isinstance(got, bool))):
            raise TypeError(f"{name} is {got!r}, not a {hints[f.name].__name__}")
        if hints[f.name] is float and not math.isfinite(got):
            raise ValueError(f"{name} is {got!r}")
        _check_types(got, f"{name}.")


def _plain(value: Any) -> Any:
    """JSON for what json does not know: a `Decimal` as its exact string."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
