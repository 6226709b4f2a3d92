"""What a proposer's rules cost and save on a stream, and how often to ask it next.

A proposer (MAnchors' memory) is asked for rules only where it has some. Whether it pays is measured,
not assumed: on inputs where it has rules, a seeded draw decides whether it is asked (the *asked* arm)
or growth runs alone (the *control* arm), and the record compares what an input of each arm paid (the
mean of paid queries: what a stream pays is their sum, and a proposer that makes most inputs a little
cheaper and a few much dearer costs more). Both arms are inputs of the same kind (those it had rules
for), chosen at random, so the difference is what asking it saved. While either arm is short of
``warm_up`` inputs it is asked for half of them; then for the share of inputs that is the probability,
by the record, that asking costs less than growth alone (by ``margin`` standard errors), kept within
[``explore``, 1 − ``explore``]: a record that chance alone makes positive moves the share a little, a
clear one all but ``explore`` of it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from .._checks import check_int, check_number

__all__ = ["ProposerRecord", "RecordParams"]


@dataclass(frozen=True)
class RecordParams:
    """How a proposer's record decides (see the module): ``explore``, the least share of inputs either
    arm gets; ``warm_up``, the inputs each arm needs before the record decides; ``margin``, the standard
    errors by which asking must cost less than growth alone to be asked for half of the inputs."""

    explore: float = 0.1
    warm_up: int = 10
    margin: float = 1.0

    def __post_init__(self) -> None:
        check_number("explore", self.explore, high=0.5, open_low=False, open_high=False)
        check_int("warm_up", self.warm_up, minimum=0)
        check_number("margin", self.margin, open_low=False)


@dataclass
class ProposerRecord:
    """One proposer's record on one stream (see the module): inputs in each arm, the sum of their paid
    queries and of their squares."""

    asked: int = 0
    asked_queries: int = 0
    asked_squares: int = 0
    control: int = 0
    control_queries: int = 0
    control_squares: int = 0

    @property
    def saved(self) -> float:
        """Queries asking it saved so far: what an input of the control arm paid on average, less what
        one of the asked arm did, times the asked arm's inputs (0 until both arms have one)."""
        if not self.asked or not self.control:
            return 0.0
        return (self.control_queries / self.control - self.asked_queries / self.asked) * self.asked

    def ask(self, settings: RecordParams, seed: int, key: str) -> bool:
        """Whether to ask the proposer for this input: a draw seeded by the explanation's ``seed`` and the
        input (``key``), so that the same input and seed decide alike whatever else runs, below `chance`."""
        digest = hashlib.sha256(f"{seed}|{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.chance(settings)

    def chance(self, settings: RecordParams) -> float:
        """The share of inputs it is asked for now (see the module)."""
        if min(self.asked, self.control) < max(settings.warm_up, 2):
            return 0.5
        z = self.gain() - settings.margin
        return min(max(0.5 * math.erfc(-z / math.sqrt(2)), settings.explore), 1.0 - settings.explore)

    def gain(self) -> float:
        """How much less an asked input paid than a control one, in standard errors of that difference
        (Welch's; 0 until each arm has two inputs)."""
        if self.asked < 2 or self.control < 2:
            return 0.0
        spread = _variance(self.asked, self.asked_queries, self.asked_squares) / self.asked
        spread += _variance(self.control, self.control_queries, self.control_squares) / self.control
        difference = self.control_queries / self.control - self.asked_queries / self.asked
        return difference / math.sqrt(max(spread, 1e-12))

    def add(self, asked: bool, queries: int) -> None:
        """Count an input explained (asked, or in the control arm) and its paid queries."""
        if asked:
            self.asked += 1
            self.asked_queries += queries
            self.asked_squares += queries * queries
        else:
            self.control += 1
            self.control_queries += queries
            self.control_squares += queries * queries


def _variance(n: int, total: float, squares: float) -> float:
    """The sample variance of ``n`` values from their sum and sum of squares."""
    return max(0.0, (squares - total * total / n) / (n - 1))
