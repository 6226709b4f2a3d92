"""`SearchParams`: what every search of an explanation is run with, recorded whole in its meta."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .._checks import check_int, check_number
from .._exceptions import ConfigError

__all__ = ["ARMS", "CERTIFY", "SearchParams"]

CERTIFY = ("default", "strict")
ARMS = ("top", "plausible")


@dataclass(frozen=True)
class SearchParams:
    """Parameters of the search, and of the certifier every search asks (`Certifier`).

    threshold (τ): the precision an anchor must reach.
    delta (δ): the explanation's error budget: the anchor returned has
        precision at least the claimed bound (τ − epsilon_stop with
        certify="default", τ with "strict") with probability ≥ 1 − δ, the
        search's choices and stopping included. Every rule the search
        chooses to test is given a share of δ before any sample that judges
        it is drawn: the first (the empty rule) ``empty_share``·δ, the m-th
        after it (1 − empty_share)·δ·6/(π²m²), the shares summing to δ; the
        certifier bets against each on its fresh samples (`Certifier`).
    certify: the bound claimed: "default", τ − epsilon_stop (and a point
        estimate ≥ τ, Anchors' criterion); "strict", τ itself.
    bet_gap, bet_weight: the certifier's bet on a rule starts from the
        precision ``bet_gap`` of the way from 1 down to the bound claimed
        (1 − bet_gap·(1 − bound): 0.98 for the default claim at τ = 0.95,
        0.99 for the strict one), held as ``bet_weight`` samples: its stake on
        each fresh sample bets on this guess updated by the samples before
        it. A rule that keeps the label on every sample then earns, per
        sample, about 1 − bet_gap of the most any bet could, at every bound
        (it is certified within a few samples of the floor, the fewest that
        could certify it); a miss costs more samples to make up.
    patience: a rule is given at most ``patience`` times the fewest fresh
        samples that could certify it (a rule whose precision is barely
        above the bound would take hundreds), and is refused as soon as not
        even every sample left to that keeping the label could certify it.
    refute: a rule is refused as soon as its KL upper bound at this level,
        on its samples since it was chosen, falls below τ (at 0.99: as soon
        as their precision falls below τ, 94 of 100 refused and 95 of 100
        not; at 0.9 a little later, 94 of 100 not refused). Refusing never
        makes a claim, so it costs no share of δ; it costs a good rule now
        and then (a rule of precision 0.97 loses 2 of its first 20 samples
        12% of the time), which growth may still certify (see `Growth`).
    empty_share: the share of δ given to the empty rule (the first rule tested).
    epsilon (ε): KL-LUCB stops when the best arms are known to within ε.
    epsilon_stop: the margin of the default claim (τ − epsilon_stop).
    batch_size: perturbations per pull of an arm (and per certification
        step of Anchors' beam).
    beam_size: candidates kept per rule length.
    min_samples_start: perturbations of the empty rule drawn first; every
        one-feature candidate reuses those that keep its feature.
    max_arms: KL-LUCB in each round runs over the ``max_arms`` candidates
        (at least ``beam_size``) of highest precision on the samples they
        reuse; None runs it over every candidate, as the reference does.
    arms: "top" (the ``max_arms`` of highest precision) or "plausible"
        (every candidate whose KL upper bound reaches the ``beam_size``-th
        highest KL lower bound).
    max_anchor_size: longest rule tried; None = number of features.
    coverage_samples: unlabelled perturbations used to measure coverage.
    """

    threshold: float = 0.95
    delta: float = 0.1
    certify: Literal["default", "strict"] = "default"
    bet_gap: float = 0.2
    bet_weight: float = 20.0
    patience: float = 4.0
    refute: float = 0.99
    empty_share: float = 0.2
    epsilon: float = 0.15
    epsilon_stop: float = 0.05
    batch_size: int = 100
    beam_size: int = 1
    min_samples_start: int = 100
    max_arms: int | None = 3
    arms: Literal["top", "plausible"] = "top"
    max_anchor_size: int | None = None
    coverage_samples: int = 10_000

    def __post_init__(self) -> None:
        if self.arms not in ARMS:
            raise ConfigError(f"arms must be one of {', '.join(ARMS)}, got {self.arms!r}")
        if self.certify not in CERTIFY:
            raise ConfigError(f"certify must be one of {', '.join(CERTIFY)}, got {self.certify!r}")
        for name in ("threshold", "delta", "epsilon", "epsilon_stop", "refute", "empty_share", "bet_gap"):
            check_number(name, getattr(self, name), high=1.0)
        check_number("bet_weight", self.bet_weight)
        check_number("patience", self.patience, low=1.0, open_low=False)
        for name in ("batch_size", "beam_size", "min_samples_start", "coverage_samples"):
            check_int(name, getattr(self, name))
        for name in ("max_arms", "max_anchor_size"):
            check_int(name, getattr(self, name), optional=True)

    @property
    def bound(self) -> float:
        """The precision an anchor's claim states: τ − epsilon_stop (default) or τ (strict)."""
        return self.threshold if self.certify == "strict" else self.threshold - self.epsilon_stop
