"""`Explanation(meta, data)`: what was found (`AnchorData`), and how it was made (`Meta`, in ``meta.py``);
its JSON form, read back whole and typed."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

from .._checks import decoded
from .._exceptions import ConfigError
from .._version import __version__
from ..models.classifier import Label
from ..samplers.text_instance import TextInstance
from ..search.bandit import kl_lower_bound, kl_upper_bound
from ..search.base import RoundTrace, RuleStats
from .meta import Meta

__all__ = ["AnchorData", "Explanation", "Level", "Opinion"]


@dataclass(frozen=True)
class Opinion:
    """The anchor's precision under another perturbation (`SecondOpinion`): measured on ``samples``
    fresh perturbations, ``perturbed_as`` says how; no certificate, an estimate, with ``interval``, a
    95% interval (Chernoff's KL bounds, 2.5% each side). When it could not be measured (its calls
    failed past their retries, the cap refused them) ``precision`` and ``interval`` are None and
    ``missing`` says why: the explanation stands without it."""

    perturbation: str
    perturbed_as: str
    precision: float | None
    samples: int
    interval: tuple[float, float] | None = None
    missing: str = ""

    @classmethod
    def measured(cls, perturbation: str, perturbed_as: str, hits: int, samples: int) -> Opinion:
        """The opinion of ``hits`` samples keeping the label out of ``samples``."""
        p, level = hits / samples, math.log(1 / 0.025) / samples
        return cls(perturbation, perturbed_as, p, samples, (kl_lower_bound(p, level), kl_upper_bound(p, level)))


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
    ``positions``: their indices among ``features``. ``precision``: of a certified anchor, the share of
    the ``certified_samples`` (drawn after it was chosen) that kept the label, the samples its KL bounds
    ``precision_bounds`` are of; of one not certified, the search's estimate on every sample it has
    (those that chose it too, so it reads high). ``success`` is False when no rule
    reached the threshold and the best-precision rule is returned instead, or when the model, asked
    again about texts the anchor was certified on, answered one of them another way (the certificate
    assumes one answer per text: void; ``meta.determinism``). ``perturbation``: the
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
        except ValueError as exc:
            raise ConfigError(f"not an explanation of llm-anchors {__version__}: {exc}") from None
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Any) -> Explanation:
        """The explanation whose `to_json` text parses to ``raw``; anything else is a `ConfigError`."""
        try:
            explanation: Explanation = decoded(cls, raw)
            _check_positions(explanation.data)
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
        recheck = self.meta.determinism
        unsure = recheck is not None and recheck.changed > 0  # success is False then, its certificate void
        if not d.success and not (unsure and d.certified_samples):
            return (
                f"no rule was certified (precision ≥ {name} = {bound:g}) among the {d.tested:,} tested: the rule "
                f"shown is the most promising tested, its bounds on the samples drawn after it was chosen{under}"
            )
        void = ""
        if unsure and recheck is not None:
            void = (
                f"NOT CERTIFIED: the model gave {recheck.changed} of {recheck.rechecked} texts another label when "
                "asked again, and the certificate assumes one answer per text; as measured: "
            )
        claim = void + (
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


def _check_positions(data: AnchorData) -> None:
    """`ValueError` unless the anchor's positions index its features, in order, and name its words (and
    a text's spans lie in its query): a hand-edited ``positions: [999]`` or ``[-1]`` is refused."""
    for name, positions, features, anchor in (
        ("positions", data.positions, data.features, data.anchor),
        *([("coarse.positions", data.coarse.positions, None, data.coarse.anchor)] if data.coarse else []),
    ):
        if list(positions) != sorted(set(positions)) or len(positions) != len(anchor):
            raise ValueError(f"{name} {list(positions)} are not the anchor's, one each, in order")
        if features is not None and any(not 0 <= p < len(features) or features[p] != a
                                        for p, a in zip(positions, anchor, strict=True)):  # fmt: skip
            raise ValueError(f"{name} {list(positions)} do not index the anchor's words among the features")
    if data.spans and (len(data.spans) != len(data.features) or any(
            not 0 <= a <= b <= len(data.query) for a, b in data.spans)):  # fmt: skip
        raise ValueError("spans do not lie in the query, one per feature")


def _plain(value: Any) -> Any:
    """JSON for what json does not know: a `Decimal` as its exact string."""
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
