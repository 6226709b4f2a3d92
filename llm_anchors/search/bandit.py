"""KL confidence bounds and KL-LUCB best-arm identification (pure).

The bounds are those of Kaufmann & Kalyanakrishnan (2013) as used by
Anchors: for an empirical mean ``p`` of a Bernoulli arm and a level
``beta / n``, the upper (lower) bound is the largest (smallest) ``q`` with
``KL(p || q) <= level``. They are found by bisection to full floating-point
precision; the reference implementation stopped after a fixed, small number
of halvings, which leaves the bound loose by up to 2**-k.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

import numpy as np

__all__ = [
    "Pull",
    "compute_beta",
    "kl_bernoulli",
    "kl_bounds",
    "kl_lower_bound",
    "kl_upper_bound",
    "lucb",
]

Pull = tuple[int, int]
"""(arm index, number of samples) asked of the caller by `lucb`."""

_BISECTION_STEPS = 200  # far past the 53 halvings a double can take


def kl_bernoulli(p: float, q: float) -> float:
    """KL divergence KL(Bernoulli(p) || Bernoulli(q)), with 0·log 0 = 0."""
    total = 0.0
    if p > 0.0:
        if q <= 0.0:
            return math.inf
        total += p * math.log(p / q)
    if p < 1.0:
        if q >= 1.0:
            return math.inf
        total += (1.0 - p) * math.log((1.0 - p) / (1.0 - q))
    return max(total, 0.0)


def kl_upper_bound(p: float, level: float) -> float:
    """Largest q in [p, 1] with KL(p || q) <= level."""
    _check(p, level)
    lo, hi = p, 1.0
    if kl_bernoulli(p, hi) <= level:
        return 1.0
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if kl_bernoulli(p, mid) > level:
            hi = mid
        else:
            lo = mid
    return hi


def kl_lower_bound(p: float, level: float) -> float:
    """Smallest q in [0, p] with KL(p || q) <= level."""
    _check(p, level)
    lo, hi = 0.0, p
    if kl_bernoulli(p, lo) <= level:
        return 0.0
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if kl_bernoulli(p, mid) > level:
            lo = mid
        else:
            hi = mid
    return lo


def kl_bounds(n: int, kept: int, beta: float) -> tuple[float, float]:
    """KL lower and upper bounds at confidence level ``beta`` of ``kept`` successes in ``n`` (0, 1 for none)."""
    if n == 0:
        return 0.0, 1.0
    level = beta / n
    return kl_lower_bound(kept / n, level), kl_upper_bound(kept / n, level)


def _check(p: float, level: float) -> None:
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"mean must lie in [0, 1], got {p}")
    if not level >= 0.0:
        raise ValueError(f"level must be >= 0, got {level}")


def compute_beta(n_arms: int, t: int, delta: float) -> float:
    """Exploration rate of KL-LUCB at round ``t`` over ``n_arms`` arms.

    beta(t) = log(k·K·t^α / δ) + log log(k·K·t^α / δ), with α = 1.1 and
    k = 405.5 (Kaufmann & Kalyanakrishnan, 2013, as in Anchors).
    """
    temp = math.log(405.5 * n_arms * t**1.1 / delta)
    return temp + math.log(temp)


def lucb(
    n_samples: Sequence[int],
    positives: Sequence[int],
    *,
    top_n: int,
    epsilon: float,
    delta: float,
    batch_size: int,
) -> Generator[list[Pull], list[int], list[int]]:
    """KL-LUCB: find the ``top_n`` arms of highest mean, to within ``epsilon``.

    A generator: it yields the pulls one round needs, all at once, and is
    sent back the number of positive samples each pull drew. It returns the
    indices of the chosen arms, best mean last. Arms with no sample yet get
    one first. Each round pulls the weakest member of the top set and the
    strongest outsider ``batch_size`` times, until the gap between the
    outsider's upper bound and the member's lower bound is at most
    ``epsilon``; both bounds use level beta(t) / n with `compute_beta`.
    """
    n = np.asarray(n_samples, dtype=np.int64).copy()
    pos = np.asarray(positives, dtype=np.int64).copy()
    n_arms = len(n)
    if not 1 <= top_n <= n_arms:
        raise ValueError(f"top_n must lie in [1, {n_arms}], got {top_n}")
    unseen = [int(a) for a in np.flatnonzero(n == 0)]
    if unseen:
        got = yield [(a, 1) for a in unseen]
        n[unseen] += 1
        pos[unseen] += got
    if top_n == n_arms:
        return _top(pos / n, top_n)
    t = 1
    while True:
        means = pos / n
        ranked = np.argsort(means, kind="stable")
        top, rest = ranked[-top_n:], ranked[:-top_n]
        beta = compute_beta(n_arms, t, delta)
        ub = [kl_upper_bound(float(means[a]), beta / n[a]) for a in rest]
        lb = [kl_lower_bound(float(means[a]), beta / n[a]) for a in top]
        ut, lt = int(rest[int(np.argmax(ub))]), int(top[int(np.argmin(lb))])
        if max(ub) - min(lb) <= epsilon:
            return [int(a) for a in top]
        got = yield [(ut, batch_size), (lt, batch_size)]
        for arm, k in zip((ut, lt), got, strict=True):
            n[arm] += batch_size
            pos[arm] += k
        t += 1


def _top(means: np.ndarray, top_n: int) -> list[int]:
    return [int(a) for a in np.argsort(means, kind="stable")[-top_n:]]
