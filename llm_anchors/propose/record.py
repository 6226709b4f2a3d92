"""What a proposer's rules cost and save on a stream, and whether to ask it next.

A proposer (MAnchors' memory) is asked for rules only where it has some. Whether it pays is measured,
not assumed: on inputs where it has rules, a seeded draw decides whether it is asked (the *asked* arm)
or growth runs alone (the *control* arm), and the record compares what an input of each arm paid (the
geometric mean of paid queries: costs are heavy-tailed). Both arms are inputs of the same kind (those it
had rules for), chosen at random, so the difference is what asking it saved. While either arm is short
of ``warm_up`` inputs it is asked for half of them; then always but for ``explore`` of the inputs if it
costs less than growth alone by more than chance (``margin``), else only for ``explore`` of them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from .._checks import check_int, check_number

__all__ = ["ProposerRecord", "RecordSettings"]


@dataclass(frozen=True)
class RecordSettings:
    """How a proposer's record decides: ``explore``, the share of inputs that go to the arm the record
    does not favour; ``warm_up``, the inputs each arm needs before the record favours one; ``margin``,
    the standard errors by which asking must cost less than growth alone for the record to favour it."""

    explore: float = 0.1
    warm_up: int = 10
    margin: float = 1.0

    def __post_init__(self) -> None:
        check_number("explore", self.explore, high=0.5, open_low=False, open_high=False)
        check_int("warm_up", self.warm_up, minimum=0)
        check_number("margin", self.margin, open_low=False)


@dataclass
class ProposerRecord:
    """One proposer's record on one stream (see the module): inputs and paid queries in each arm (their
    sum, and the sum of their logs), and the inputs whose anchor was one of its rules."""

    asked: int = 0
    asked_queries: int = 0
    asked_log: float = 0.0
    asked_log2: float = 0.0
    control: int = 0
    control_queries: int = 0
    control_log: float = 0.0
    control_log2: float = 0.0
    certified: int = 0

    @property
    def saved(self) -> float:
        """Queries asking it saved so far: what an input of the control arm paid, less what one of the
        asked arm did, times the asked arm's inputs (0 until both arms have one). Each arm's cost is its
        geometric mean (of 1 + paid queries, less 1): an input's cost is heavy-tailed, and one costly
        input of a few would set the sign."""
        if not self.asked or not self.control:
            return 0.0
        asked = math.expm1(self.asked_log / self.asked)
        control = math.expm1(self.control_log / self.control)
        return (control - asked) * self.asked

    def ask(self, settings: RecordSettings, seed: int, key: str) -> bool:
        """Whether to ask the proposer for this input: a draw seeded by the explanation's ``seed`` and the
        input (``key``), so that the same input and seed decide alike whatever else runs."""
        digest = hashlib.sha256(f"{seed}|{key}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        if min(self.asked, self.control) < settings.warm_up:  # a fair draw until both arms can be compared
            return draw < 0.5
        return draw >= settings.explore if self.pays(settings.margin) else draw < settings.explore

    def pays(self, margin: float) -> bool:
        """Whether asking costs less than growth alone by more than ``margin`` standard errors (of the
        difference of the arms' mean log costs): a record that only chance makes positive does not count."""
        if self.asked < 2 or self.control < 2:
            return False
        spread = _variance(self.asked, self.asked_log, self.asked_log2) / self.asked
        spread += _variance(self.control, self.control_log, self.control_log2) / self.control
        gain = self.control_log / self.control - self.asked_log / self.asked
        return gain > margin * math.sqrt(spread)

    def add(self, asked: bool, queries: int, certified: bool) -> None:
        """Count an input explained (asked, or in the control arm) and its paid queries."""
        cost = math.log1p(queries)
        if asked:
            self.asked += 1
            self.asked_queries += queries
            self.asked_log += cost
            self.asked_log2 += cost * cost
            self.certified += certified
        else:
            self.control += 1
            self.control_queries += queries
            self.control_log += cost
            self.control_log2 += cost * cost


def _variance(n: int, total: float, squares: float) -> float:
    """The sample variance of ``n`` values from their sum and sum of squares."""
    return max(0.0, (squares - total * total / n) / (n - 1))
