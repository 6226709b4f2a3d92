"""The sample protocol every search speaks, and the samples it keeps: a search asks for `SampleRequest`s
("label n perturbations that keep this rule") and is sent back `Samples`; `SampleStore` keeps every
labelled sample with the rule it was drawn under, for every rule it holds to reuse."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .rules import Rule, covers

__all__ = ["STAGES", "SampleRequest", "SampleStore", "Samples"]


@dataclass(frozen=True)
class SampleRequest:
    """Ask for ``n`` perturbations of the input that keep every feature of ``rule``.

    ``stage`` names the step of the search that asks (see `STAGES`), so a
    caller can say where an explanation's samples went.
    """

    rule: Rule
    n: int
    stage: str = ""


STAGES = {
    "root": "the empty rule, sampled first (it is tested like any rule: all its samples are drawn after it was chosen)",
    "start": "the starting rule of a resumed search (MAnchors' paper strategy, VT)",
    "round-k": "KL-LUCB choosing the beam of the k-th extension round",
    "certify": "the certifier: samples of a chosen rule, drawn after it was chosen, that judge it",
    "memory": "guided search: a rule the memory proposed, judged on samples drawn after it was chosen",
    "growth-k": "guided search: growth, a rule of k features sampled (to choose the next, or to judge it)",
    "prune": "MAnchors' paper strategy: pruning the HT rule",
}
"""What each stage name of a `SampleRequest` means (k counts from 1 at the
search's first extension round, whether it started from the empty rule or
from a given one)."""


@dataclass(frozen=True)
class Samples:
    """The answer to a `SampleRequest`.

    ``present`` is the (n × features) boolean matrix of which features each
    perturbation kept; ``labels`` says, per perturbation, whether the model
    gave it the label of the unperturbed input; ``scores``, when the model
    gives probabilities, the probability it gave that label (NaN where it
    gave none). Scores only guide what is tested; certificates count labels.
    """

    present: np.ndarray
    labels: np.ndarray
    scores: np.ndarray | None = None


class SampleStore:
    """Every labelled sample so far, with the rule it was drawn under. ``rate_per_sample``: whether each
    sample's hiding rate was drawn for it, from U(0, 1) (a document's sentences), rather than fixed."""

    def __init__(self, n_features: int, rate_per_sample: bool = False) -> None:
        self.rate_per_sample = rate_per_sample
        self.present = np.zeros((1024, n_features), dtype=bool)
        self.labels = np.zeros(1024, dtype=bool)
        self.scores = np.zeros(1024, dtype=float)  # the label (0 or 1) where the model gave no probability
        self.scored = 0  # samples with a probability
        self.drawn_under = np.zeros(1024, dtype=np.int64)
        self.rules: list[Rule] = []
        self.size = 0

    def add(self, rule: Rule, samples: Samples) -> np.ndarray:
        n = len(samples.labels)
        while self.size + n > len(self.labels):
            self._grow()
        rule_id = len(self.rules)
        self.rules.append(rule)
        rows = np.arange(self.size, self.size + n)
        self.present[rows] = samples.present
        self.labels[rows] = samples.labels
        self.scores[rows] = samples.labels
        if samples.scores is not None:
            given = ~np.isnan(samples.scores)
            self.scores[rows[given]] = samples.scores[given]
            self.scored += int(given.sum())
        self.drawn_under[rows] = rule_id
        self.size += n
        return rows

    def effects(self, rows: np.ndarray) -> tuple[float, ...]:
        """Per feature, over ``rows``: the share labelled as the input with it present, less with it absent."""
        present, kept = self.present[rows], self.labels[rows]
        out = []
        for f in range(present.shape[1]):
            on, off = kept[present[:, f]], kept[~present[:, f]]
            out.append(float(on.mean() - off.mean()) if len(on) and len(off) else 0.0)
        return tuple(out)

    def reusable(self, rule: Rule) -> np.ndarray:
        """Rows that are samples of ``rule``, as drawn or once weighed (`counts`).

        A sample drawn under rule s and keeping every feature of ``rule`` is
        a draw from the perturbation distribution conditioned on ``rule``
        when s ⊆ rule and features are hidden independently at a fixed rate.
        The reference implementation reuses only the parent's samples, a
        subset of these. When the rate is drawn per sample, a sub-rule's
        sample that happens to keep the rule's other features was drawn at a
        lower rate than most of the rule's own (it keeps 2/3 of the rest, not
        half): it is a sample of the rule once weighed (`counts`).
        """
        allowed = np.array([s <= rule for s in self.rules], dtype=bool)
        if not allowed.any():
            return np.zeros(0, dtype=np.int64)
        ok = allowed[self.drawn_under[: self.size]]
        ok &= covers(rule, self.present[: self.size])
        return np.flatnonzero(ok)

    def counts(self, rule: Rule, rows: np.ndarray) -> tuple[int, int]:
        """The samples ``rows`` of ``rule`` are worth, and how many of them kept the label: as drawn at a
        fixed rate; at a rate drawn per sample, by importance weights (self-normalised, as effective
        counts: n = (Σw)² / Σw², kept = n · Σwy / Σw, rounded).

        With the rate u ~ U(0, 1), a sample of m features outside ``rule``, k of them kept, drawn under a
        sub-rule s whose e = |rule − s| others it happens to keep, has probability ∫uʰ(1−u)ᵏ du =
        B(h+1, k+1) under ``rule`` and (e+1)·B(h+1, k+e+1) under s given them: its weight is their ratio,
        ∏ⱼ₌₁..ₑ (m+1+j)/(k+j) / (e+1)."""
        if not len(rows):
            return 0, 0
        labels = self.labels[rows]
        if not self.rate_per_sample:
            return len(rows), int(labels.sum())
        outside = np.ones(self.present.shape[1], dtype=bool)
        outside[sorted(rule)] = False
        m = int(outside.sum())
        kept = self.present[rows][:, outside].sum(axis=1)
        extra = np.array([len(rule - self.rules[i]) for i in range(len(self.rules))])[self.drawn_under[rows]]
        table = _log_gamma(m + int(extra.max()) + 3)
        log_w = -np.log(extra + 1) + (table[m + extra + 2] - table[m + 2]) - (table[kept + extra + 1] - table[kept + 1])
        w = np.exp(log_w - log_w.max())
        n = float(w.sum() ** 2 / (w**2).sum())
        return max(1, round(n)), round(n * float((w * labels).sum() / w.sum()))

    def _grow(self) -> None:
        self.present = np.concatenate([self.present, np.zeros_like(self.present)])
        self.labels = np.concatenate([self.labels, np.zeros_like(self.labels)])
        self.scores = np.concatenate([self.scores, np.zeros_like(self.scores)])
        self.drawn_under = np.concatenate([self.drawn_under, np.zeros_like(self.drawn_under)])


@functools.cache
def _log_gamma(size: int) -> np.ndarray:
    """log Γ(i) for i < ``size`` (log Γ(0) as 0: never read)."""
    return np.array([0.0] + [math.lgamma(i) for i in range(1, max(size, 2))])
