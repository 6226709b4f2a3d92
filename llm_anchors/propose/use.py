"""What MAnchors' proposers did for one input, as ``meta`` records it: the memory (`MemoryUse`) and the
proxy (`ProxyUse`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..query.cost import Cost

__all__ = ["MemoryUse", "ProxyUse"]


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
    rules were tried here; ``asked`` (``ProxyParams.first``): whether its
    record asked the surrogate before the input's first sample (None: it
    could not be; False: the control arm, growth alone).
    """

    kind: str
    samples: int = 0
    queries: int = 0
    cost: Cost | None = None
    proposals: tuple[tuple[str, ...], ...] = ()
    certified: bool = False
    trust: float = 1.0
    asked: bool | None = None
