"""One explanation in progress (`Explaining`) and the steps every explainer runs it through: perturbations
drawn, a search generator driven to its end, the features a rule may not hold."""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from .._exceptions import BudgetExceeded, ConfigError, NondeterminismWarning
from .._version import __version__
from ..models.classifier import Label
from ..money.budget import SpendCap
from ..query.engine import QueryEngine, QueryStats
from ..samplers.base import Instance, Refines, Sampler
from ..samplers.text_instance import TextInstance
from ..search.bandit import kl_bounds
from ..search.base import SearchResult
from ..search.certify import Certifier
from ..search.rules import Rule, make_rule
from ..search.samples import SampleRequest, Samples
from .explanation import AnchorData, Explanation, Level, Opinion
from .meta import Cost, Meta, Recheck, Settings, Stage
from .progress import Progress

__all__ = [
    "ROUND", "SEEDING", "STRICT_RECHECK", "Explaining", "Measured", "asked_again", "input_seed", "joined", "movers",
    "pieces", "scope", "split_samples",
]  # fmt: skip

R = TypeVar("R")
STRICT_RECHECK = 5
"""Texts a strict explanation asks the model about again (of those its anchor was judged on): a model
that answers one text two ways is reported, and its certificate is said not to hold."""


SEEDING = (
    "numpy SeedSequence([seed, the 8 32-bit words of sha256 of the input's query, its pinned parts and every "
    "setting that shapes its explanation (the claim among them)]); when the memory proposes rules for it, "
    "again with those rules: a rule is never judged on the draws that chose it"
)
"""How an input's own seed is derived from the explainer's (recorded in every explanation's meta)."""


def input_seed(seed: int, instance: Instance, shaping: Any = None, proposed: Sequence[Rule] = ()) -> int:
    """The seed of one input's draws (`SEEDING`: its first 64 bits): the same for the same input, settings
    and seed, whatever the order inputs are explained in or finish; another for any other input (no two
    inputs of a stream draw the same masks), any other ``shaping`` settings (the same text under the
    strict claim after the default one), and any other rules the memory proposes (``proposed``: the same
    text explained again draws afresh, so a remembered anchor is never re-judged on the masks that chose it)."""
    rules = sorted(sorted(rule) for rule in proposed)
    said = json.dumps([instance.query, list(getattr(instance, "pinned", ())), shaping, rules], default=str,
                      sort_keys=True)  # fmt: skip
    words = np.frombuffer(hashlib.sha256(said.encode("utf-8", "surrogatepass")).digest(), dtype="<u4")
    high, low = np.random.SeedSequence([seed, *(int(w) for w in words)]).generate_state(2, np.uint32)
    return int(high) << 32 | int(low)


@dataclass
class Explaining:
    """One explanation in progress: its input, random generator, counts and trace (shared with the
    explainers built on `AnchorsExplainer`)."""

    instance: Instance
    seed: int
    """The input's own seed (`input_seed`): every draw of this explanation comes from it."""
    rng: np.random.Generator
    stats: QueryStats
    started: float
    certifier: Certifier
    infill: QueryStats
    target: Label = None
    coarse: Level | None = None
    opinion: Opinion | None = None
    samples: int = 0
    unparsed: int = 0
    budget_exhausted: bool = False
    refused: BudgetExceeded | None = None
    """The cap's refusal of a round the search was answered part of (`AnchorsExplainer._answer`): its next
    round is refused at once."""
    progress: Callable[[Progress], None] | None = None
    texts: list[str] = field(default_factory=list)
    hits: list[bool] = field(default_factory=list)
    stages: dict[str, Stage] = field(default_factory=dict)
    run_seed: int | None = None
    choice_seed: int = 0
    """What seeds choices that judge nothing (whether the memory is asked for this input: its record's
    arms): `input_seed` of the explainer's seed and the input alone, so that a setting leaves them as they are."""
    cap: SpendCap | None = None
    """The one cap every call of this explanation reserves against: the one given to ``explain``, else the
    explainer's ``budget`` (None: none)."""

    """The explainer's seed (or the one given to ``explain``) that the input's is derived from."""

    def data(self, result: SearchResult, n_examples: int, perturbation: str) -> AnchorData:
        """What this explanation found (``result``, its search's), with ``n_examples`` of the samples the
        anchor was judged on of each kind; ``perturbation``: the distribution its precision is about."""
        instance, stats = self.instance, result.stats
        positions = tuple(sorted(result.rule))
        hits = np.asarray(self.hits, dtype=bool)
        held = [self.texts[r] for r in result.rows if hits[r]]
        failed = [self.texts[r] for r in result.rows if not hits[r]]
        return AnchorData(
            query=instance.query,
            features=instance.features,
            label=self.target,
            anchor=tuple(instance.features[p] for p in positions),
            positions=positions,
            precision=precision_of(result),
            precision_bounds=(result.lower, result.upper),
            coverage=stats.coverage,
            success=result.success,
            n_samples=stats.n_samples,
            examples_covered_true=tuple(held[:n_examples]),
            examples_covered_false=tuple(failed[:n_examples]),
            path=result.path,
            rounds=result.rounds,
            certified_samples=result.certificate.n if result.certificate else 0,
            tested=result.tested,
            movers=movers(instance.features, result.effects),
            spans=instance.spans if isinstance(instance, TextInstance) else (),
            perturbation=perturbation,
            coarse=self.coarse,
            second_opinion=self.opinion,
        )

    def refine_to(self, sampler: Sampler, coarse: Sequence[int] | None, positions: Sequence[int]) -> None:
        """Make the instance the one a rule's ``positions`` index: the input's, or the finer one under
        ``coarse``; `ConfigError` when there is none, or a position is not among its features."""
        if coarse is not None:
            finer = sampler.refine(self.instance, make_rule(coarse)) if isinstance(sampler, Refines) else None
            if finer is None:
                raise ConfigError("coarse positions given, but this input has no finer level under them")
            self.instance = finer
        n = len(self.instance.features)
        if any(not 0 <= p < n for p in positions):
            raise ConfigError(f"positions {list(positions)} are not all among the input's {n} features")

    def count(self, stage: str, samples: int, queries: int) -> None:
        """Add samples and paid queries to a stage of the explanation."""
        counts = self.stages.get(stage, Stage())
        self.stages[stage] = Stage(counts.samples + samples, counts.queries + queries)


async def asked_again(engine: QueryEngine, run: Explaining, result: SearchResult | None, k: int) -> Recheck | None:
    """Ask ``engine``'s model again, bypassing the cache, about ``k`` of the explanation's texts (those
    the anchor was judged on, when there is one; paid, counted in ``run``): how many changed label (a
    change warns: `NondeterminismWarning`). None when the explanation has no text."""
    texts = list(dict.fromkeys(run.texts))
    if result is not None and len(result.rows) and result.success:
        texts = list(dict.fromkeys(run.texts[r] for r in result.rows))
    if not texts:
        return None
    picker = np.random.default_rng([run.seed, 0xDE7])  # not run.rng: the explanation is unchanged
    chosen = [texts[i] for i in sorted(picker.choice(len(texts), min(k, len(texts)), False))]
    before = await engine.classify(chosen, run.stats, cap=run.cap)  # cached: the labels the search used
    again = await engine.recheck(chosen, run.stats, cap=run.cap)
    changed = sum(a != b for a, b in zip(before, again, strict=True))
    if changed:
        warnings.warn(
            f"{changed} of {len(chosen)} texts got another label when asked again: the model is not "
            "deterministic, and the precision bounds overstate their confidence",
            NondeterminismWarning,
            stacklevel=4,
        )
    return Recheck(len(chosen), changed)


def scope(instance: Instance) -> tuple[tuple[int, ...], int | None, bool]:
    """The features of ``instance`` perturbed but never part of an anchor, the most features an anchor
    may hold (a text's, coarse to fine; else none, and any number), and whether its hiding rate is drawn
    per sample (a reused sample is then weighed: `SampleStore.counts`)."""
    if isinstance(instance, TextInstance):
        return instance.context, instance.max_anchor, instance.p_hide == "uniform"
    return (), None, False


def precision_of(result: SearchResult) -> float:
    """The precision an explanation shows: on the samples that certified its anchor (drawn after it
    was chosen, the ones its bounds are of), else the search's estimate on every sample it has."""
    certificate = result.certificate
    return certificate.kept / certificate.n if certificate is not None and certificate.n else result.stats.precision


def movers(features: Sequence[str], effects: Sequence[float]) -> tuple[tuple[str, float], ...]:
    """The (at most 3) features whose presence holds the label most, largest effect first (none of 0 or less)."""
    ranked = sorted(range(len(effects)), key=lambda f: -effects[f])
    return tuple((features[f], round(effects[f], 4)) for f in ranked[:3] if effects[f] > 0)


@dataclass(frozen=True)
class Made:
    """Who made an explanation, and how: the explainer's name, the model's identity, the settings, the
    texts in flight it settled on, and whether an infill filler was asked."""

    explainer: str
    classifier: str
    settings: Settings
    in_flight: tuple[int, int] | None
    infill: bool


def assemble(
    run: Explaining, result: SearchResult, made: Made, n_examples: int, described: str, **extra: Any
) -> Explanation:
    """The explanation of ``run`` that found ``result``; ``extra`` adds meta fields (MAnchors). A model
    that answered a text two ways voids the certificate: ``success`` is False (the claim says why)."""
    data = run.data(result, n_examples, described)
    recheck = extra.get("determinism")
    if recheck is not None and recheck.changed:
        data = replace(data, success=False)
    meta = Meta(
        explainer=made.explainer,
        version=__version__,
        classifier=made.classifier,
        settings=made.settings,
        seed=run.run_seed if run.run_seed is not None else run.seed,
        input_seed=run.seed,
        seeding=SEEDING,
        in_flight=made.in_flight,
        samples=run.samples,
        queries=run.stats.queries,
        wall_time_s=time.perf_counter() - run.started,
        cost=Cost.of(run.stats),
        unparsed=run.unparsed,
        budget_exhausted=run.budget_exhausted,
        stages=dict(run.stages),
        infill=Cost.of(run.infill) if made.infill else None,
        **extra,
    )
    return Explanation(meta, data)


ROUND = 1_000
"""The most samples of one round of a search rendered and labelled at a time."""


def pieces(requests: Sequence[SampleRequest], size: int) -> Iterator[list[tuple[int, SampleRequest]]]:
    """``requests`` (each with its index) in pieces of at most ``size`` samples: the whole round at once when it
    holds no more (drawn as one, as always), else a request split where a piece is full."""
    if sum(r.n for r in requests) <= size:
        yield list(enumerate(requests))
        return
    piece: list[tuple[int, SampleRequest]] = []
    total = 0
    for index, request in enumerate(requests):
        left = request.n
        while left:
            take = min(left, size - total)
            piece.append((index, replace(request, n=take)))
            total, left = total + take, left - take
            if total == size:
                yield piece
                piece, total = [], 0
    if piece:
        yield piece


def split_samples(
    drawn: Sequence[tuple[list[str], np.ndarray]], hits: np.ndarray, scores: np.ndarray | None, kept: np.ndarray | None
) -> list[Samples]:
    """Per request drawn, its samples (only those ``kept``: answered, when the cap refused part of them)."""
    out, offset = [], 0
    for texts, present in drawn:
        rows = np.arange(offset, offset + len(texts))
        offset += len(texts)
        mine = rows if kept is None else rows[kept[rows]]
        local = mine - rows[0] if len(rows) else mine
        out.append(Samples(present[local], hits[mine], scores[mine] if scores is not None else None))
    return out


def joined(parts: Sequence[Samples], width: int) -> Samples:
    """One request's samples from the pieces it was drawn in (none: no sample, ``width`` features)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return Samples(np.zeros((0, width), dtype=bool), np.zeros(0, dtype=bool))
    scored = all(p.scores is not None for p in parts)
    scores = np.concatenate([p.scores for p in parts if p.scores is not None]) if scored else None
    return Samples(np.concatenate([p.present for p in parts]), np.concatenate([p.labels for p in parts]), scores)


@dataclass(frozen=True)
class Measured:
    """A rule's precision on fresh perturbations: on ``n`` labelled of ``asked``, its 95% interval (KL
    bounds, 2.5% a side), and whether the cap stopped the measure before all were labelled."""

    precision: float
    n: int
    asked: int
    low: float
    high: float
    stopped: bool = False

    @classmethod
    def of(cls, hits: np.ndarray, asked: int, *, stopped: bool = False) -> Measured:
        n, kept = len(hits), int(hits.sum())
        low, high = kl_bounds(n, kept, math.log(1 / 0.025))
        return cls(kept / n if n else float("nan"), n, asked, low, high, stopped)
