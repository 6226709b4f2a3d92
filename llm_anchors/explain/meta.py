"""`Meta`: how an explanation was made: its settings whole, what it cost, what each part of the search did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._checks import check_int
from .._exceptions import ConfigError
from ..money.pricing import Price
from ..propose.growth import GrowthParams
from ..propose.guided import GuidedParams
from ..propose.memory import MemoryParams, MemoryUse
from ..query.cost import Cost
from ..samplers.text import PERTURBATIONS, Perturbation
from ..search.params import SearchParams

__all__ = [
    "DRAWN_BY",
    "NOT_SHAPING",
    "Cost",
    "MAnchorsSettings",
    "MemoryUse",
    "Meta",
    "Recheck",
    "SecondOpinion",
    "Settings",
    "Stage",
]


NOT_SHAPING = ("budget", "on_budget", "max_concurrency", "request_size", "price")
"""`Settings` fields that change what an explanation spends or how fast, not what it finds: left out of
what makes two inputs one explanation (exact repeats) and of a run's configuration (a resumed run may
change them)."""
DRAWN_BY = ("search", "sampler")
"""`Settings` fields that decide an explanation's draws (its input's seed is derived from them: `input_seed`)."""


@dataclass(frozen=True)
class Stage:
    """Samples and paid queries of one step of the search."""

    samples: int = 0
    queries: int = 0


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
    manchors: MAnchorsSettings | None = None
    price: Price | None = None
    """What the model's tokens cost when it was explained (rates per million, their date and source)."""
    second_opinion: SecondOpinion | None = None


@dataclass(frozen=True)
class MAnchorsSettings:
    """MAnchors' settings (see `MAnchorsExplainer`) whole: its ``strategy``; the memory's (`MemoryParams`,
    τ_sim resolved; None: off) and its ``embedder``; the guided search's (``guided``), growth's; the
    user's ``proposers`` by name; the memory's HNSW ``index``
    as built here (``ef``, ``m``, ``per_key``; None for a memory kept elsewhere)."""

    strategy: Literal["guided", "paper"]
    memory: MemoryParams | None
    embedder: str | None
    guided: GuidedParams = field(default_factory=GuidedParams)
    growth: GrowthParams = field(default_factory=GrowthParams)
    proposers: tuple[str, ...] = ()
    index: dict[str, int] | None = None


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
    the search (names in `llm_anchors.search.samples.STAGES`); ``memory_hit``:
    whether MAnchors reused a remembered input (None for plain Anchors),
    ``memory`` how (`MemoryUse`);
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
