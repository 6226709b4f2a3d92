"""Exact repeats: an input explained before with the same model and settings gets that explanation back,
at no query (MAnchors' memory on)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, replace
from typing import Any

from .._exceptions import LLMAnchorsError
from ..samplers.base import Sampler
from .explanation import Explanation
from .meta import NOT_SHAPING, Cost, MemoryUse, Settings

__all__ = ["Repeats", "as_repeat"]


class Repeats:
    """The explanations made, kept whole (compressed) by what makes two inputs one explanation, at most
    ``most`` of them (the least recently asked for dropped)."""

    def __init__(self, sampler: Sampler, most: int) -> None:
        self.sampler, self.most = sampler, most
        self._kept: OrderedDict[str, bytes] = OrderedDict()  # compressed JSON, least recently used first
        self._explaining: dict[str, asyncio.Future[bool]] = {}  # inputs being explained, done when they end

    async def explained(
        self, text: Any, settings: Settings, classifier: str, explain: Callable[[], Awaitable[Explanation]]
    ) -> Explanation:
        """The explanation already made of ``text`` (a repeat of one still being explained waits for it),
        else ``explain()``'s, kept."""
        key = self.key(text, settings, classifier)
        if key is None:
            return await explain()
        started = time.perf_counter()
        if key in self._explaining:  # the same input, still being explained: wait for its end
            await asyncio.shield(self._explaining[key])
        if (known := self._kept.get(key)) is not None:
            self._kept.move_to_end(key)
            return as_repeat(Explanation.from_json(zlib.decompress(known).decode()), time.perf_counter() - started)
        done = asyncio.Event()
        self._explaining[key] = asyncio.ensure_future(done.wait())
        try:
            exp = await explain()
            self.recall(text, exp)
            return exp
        finally:
            done.set()
            self._explaining.pop(key, None)

    def recall(self, text: Any, explanation: Explanation) -> None:
        """Keep ``explanation`` as the one of ``text``; one cut short by a cap is not kept."""
        key = self.key(text, explanation.meta.settings, explanation.meta.classifier)
        if key is None or explanation.meta.budget_exhausted:
            return
        self._kept[key] = zlib.compress(explanation.to_json().encode())  # 1.7 KB, not 10 KB of objects
        self._kept.move_to_end(key)
        while len(self._kept) > self.most:
            self._kept.popitem(last=False)

    def key(self, text: Any, settings: Settings, classifier: str) -> str | None:
        """What makes two inputs one explanation: the input as the sampler reads it (its query and
        pinned parts), the model, every setting that shapes it (the perturbation among them; not the
        seed: a repeat is the explanation already certified). None: it cannot be explained."""
        try:
            instance = self.sampler.features(text)
        except LLMAnchorsError:
            return None
        shaping = {k: v for k, v in asdict(settings).items() if k not in NOT_SHAPING}
        pinned = getattr(instance, "pinned", ())
        said = json.dumps([instance.query, pinned, classifier, shaping], default=str, sort_keys=True)
        return hashlib.sha256(said.encode()).hexdigest()


def as_repeat(known: Explanation, elapsed: float) -> Explanation:
    """``known`` as an exact repeat's explanation: the same data and claim, no query, no sample, no cost."""
    m = known.meta
    memory = replace(m.memory or MemoryUse(), repeat=True, similarity=1.0, source=known.data.query, lookup_s=elapsed,
                     asked=None, certified=False)  # fmt: skip
    meta = replace(m, samples=0, queries=0, cost=Cost(), stages={}, wall_time_s=elapsed, memory_hit=True,
                   memory=memory, infill=Cost() if m.infill is not None else None)  # fmt: skip
    return replace(known, meta=meta)
