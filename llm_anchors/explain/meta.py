"""`Meta`: how an explanation was made: its settings whole, what it cost, what each part of the search did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._checks import check_int
from .._exceptions import ConfigError
from ..money.charge import Charge
from ..money.pricing import Price
from ..propose.growth import GrowthParams
from ..propose.guided import GuidedParams
from ..propose.record import RecordSettings
from ..propose.search import ProxyParams
from ..query.engine import QueryStats
from ..samplers.text import PERTURBATIONS, Perturbation
from ..search.params import SearchParams

__all__ = ["Cost", "MemorySettings", "MemoryUse", "Meta", "ProxyUse", "Recheck", "SecondOpinion", "Settings", "Stage"]


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
    is in ``settled`` at the larger of the worst case reserved for it and
    its bill; ``dearest_tier``: calls whose server named no service tier its
    price knows (``"auto"``, a tier it lacks), billed at the dearest tier of
    the model, their usage as reported.
    """

    settled: Charge = field(default_factory=Charge)
    reserved: Charge = field(default_factory=Charge)
    cache_hits: int = 0
    retries: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    disputed: dict[str, int] = field(default_factory=dict)
    dearest_tier: int = 0

    @classmethod
    def of(cls, stats: QueryStats) -> Cost:
        """The record of an explanation's (or its proxy's) calls."""
        return cls(stats.settled, stats.reserved, stats.cache_hits, stats.retries, dict(stats.failures),
                   dict(stats.disputed), stats.dearest_tier)  # fmt: skip


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
    and the features pruned from it; ``repeat``: the input was explained
    before with the same settings, and this is that explanation, at no query;
    ``asked`` ("guided"): whether the memory's rules were tested (None: it had
    none; False: the record's control arm, growth alone), ``certified``:
    whether the anchor is one of them, ``saved``:
    the queries asking the memory saved on this stream so far, by its record
    (`ProposerRecord`).
    """

    similarity: float | None = None
    lookup_s: float = 0.0
    source: str | None = None
    proposals: tuple[tuple[str, ...], ...] = ()
    ht_rule: tuple[str, ...] = ()
    ht_pruned: tuple[str, ...] = ()
    repeat: bool = False
    asked: bool | None = None
    certified: bool = False
    saved: float = 0.0


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
    on_budget: Literal["raise", "return"] = "raise"
    memory: MemorySettings | None = None
    price: Price | None = None
    """What the model's tokens cost when it was explained (rates per million, their date and source)."""
    second_opinion: SecondOpinion | None = None


@dataclass(frozen=True)
class MemorySettings:
    """MAnchors' parameters (see `MAnchorsExplainer`), the guided search's and each proposer's whole:
    growth's (``growth``), the memory's (the others), the proxy's (``proxy_params``)."""

    strategy: Literal["guided", "paper"]
    tau_sim: float
    tau_mid: float
    k_nearest: int
    max_proposals: int
    prune_samples: int
    embedder: str
    use_memory: bool = True
    prune_margin: float = 0.1
    guided: GuidedParams = field(default_factory=GuidedParams)
    growth: GrowthParams = field(default_factory=GrowthParams)
    proxy: str | None = None
    proxy_params: ProxyParams | None = None
    max_repeats: int = 10_000
    record: RecordSettings = field(default_factory=RecordSettings)
    tau_first: float = 0.0
    index: dict[str, int] | None = None
    """The memory's HNSW index as built here (``ef``, ``m``, ``per_key``); None for a memory kept elsewhere."""


@dataclass(frozen=True)
class Meta:
    """How the explanation was made.

    ``seed``: the explainer's (or the one given to ``explain``); ``input_seed``: this input's own,
    derived from it and the input (``seeding`` says how), which every draw comes from; ``samples``:
    labelled perturbations the search consumed, cache hits
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
    in_flight: tuple[int, int] | None = None
    """The texts in flight to the model its engine had settled on when it ended (the `Limiter`'s limit,
    which follows the server), and the most a request then carried; None for one made before."""
    input_seed: int | None = None
    """The seed of this input's draws, derived from ``seed`` and the input as ``seeding`` says: another
    for every input (None: an explanation made before inputs had their own)."""
    seeding: str = ""
    infill: Cost | None = None
    """Under the ``infill`` perturbation: what the filler model's calls cost (apart from ``queries`` and
    ``cost``, the explained model's)."""
