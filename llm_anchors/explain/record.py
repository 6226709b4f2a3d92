"""What a proposer's rules cost and save on a stream, and whether to ask it next.

A proposer (MAnchors' memory) is asked for rules only where it has some. Whether it pays is measured,
not assumed: on inputs where it has rules, a seeded draw decides whether it is asked (the *asked* arm)
or growth runs alone (the *control* arm), and the record compares what the two arms paid per feature
of their inputs. Both arms are inputs of the same kind (those it had rules for), chosen at random, so
the difference is what asking it saved. While either arm is short of ``warm_up`` inputs it is asked
with probability 1 − ``explore``; then always but for ``explore`` of the inputs if it saved queries so
far, else only for ``explore`` of them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .._checks import check_int, check_number

__all__ = ["ProposerRecord", "RecordSettings"]


@dataclass(frozen=True)
class RecordSettings:
    """How a proposer's record decides: ``explore``, the share of inputs that go to the arm the record
    does not favour; ``warm_up``, the inputs each arm needs before the record favours one."""

    explore: float = 0.1
    warm_up: int = 10

    def __post_init__(self) -> None:
        check_number("explore", self.explore, high=0.5, open_low=False, open_high=False)
        check_int("warm_up", self.warm_up, minimum=0)


@dataclass
class ProposerRecord:
    """One proposer's record on one stream (see the module): inputs, paid queries and features in each
    arm, and the inputs whose anchor was one of its rules."""

    asked: int = 0
    asked_queries: int = 0
    asked_features: int = 0
    control: int = 0
    control_queries: int = 0
    control_features: int = 0
    certified: int = 0

    @property
    def saved(self) -> float:
        """Queries asking it saved so far: what the control arm paid per feature, less what the asked arm
        did, times the asked arm's features (0 until both arms have an input)."""
        if not self.asked_features or not self.control_features:
            return 0.0
        rate = self.control_queries / self.control_features - self.asked_queries / self.asked_features
        return rate * self.asked_features

    def ask(self, settings: RecordSettings, seed: int, key: str) -> bool:
        """Whether to ask the proposer for this input: a draw seeded by the explanation's ``seed`` and the
        input (``key``), so that the same input and seed decide alike whatever else runs."""
        digest = hashlib.sha256(f"{seed}|{key}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        warming = min(self.asked, self.control) < settings.warm_up
        favoured = warming or self.saved >= 0
        return draw >= settings.explore if favoured else draw < settings.explore

    def add(self, asked: bool, queries: int, features: int, certified: bool) -> None:
        """Count an input explained (asked or in the control arm): its paid queries and its features."""
        if asked:
            self.asked += 1
            self.asked_queries += queries
            self.asked_features += features
            self.certified += certified
        else:
            self.control += 1
            self.control_queries += queries
            self.control_features += features
