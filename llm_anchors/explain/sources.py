"""Where the guided search's proposers come from: one door for the user's and the memory's.

A `Source` is made once per explainer; for each input it is ``opened`` (`Opened`): asked for its
proposers at each level of the input (a document's sentences, then the words inside its anchor),
told what each level's search found, and at the input's end asked what to record of it (its fields of
``meta``). Rules a source knew before the input's first search (``drawn_with``) seed that search's
draws with the input: a rule is never judged on the masks that chose it. The explainer knows nothing
of what a source is: the memory and a user's factory are two sources.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._exceptions import ConfigError
from ..propose.base import Proposer
from ..propose.guided import GuidedSearch
from ..propose.memory import Asked, Lookup, MemoryProposer, MemoryUse
from ..samplers.base import Instance
from ..search.base import SearchResult
from ..search.rules import Rule
from ..search.samples import STAGES
from .explaining import Explaining

__all__ = ["FactorySource", "MemorySource", "Opened", "ProposerFactory", "Source", "named"]

ProposerFactory = Callable[[Instance, Hashable], Proposer | None]
"""What ``proposers=`` takes: given an input (each level of it: a document's sentences, then the words
inside its anchor) and the label explained, the `Proposer` its guided search asks (None: none here)."""


class Opened(Protocol):
    """A source's part in one input."""

    drawn_with: tuple[Rule, ...]

    async def proposers(self, run: Explaining) -> Sequence[Proposer]:
        """Its proposers for the level being searched (``run.instance``)."""
        ...

    def searched(self, run: Explaining, search: GuidedSearch, result: SearchResult) -> None:
        """What the level's search found."""
        ...

    def finished(self, run: Explaining, result: SearchResult) -> dict[str, Any]:
        """The input's end: its fields of ``meta`` (none: ``{}``)."""
        ...


@runtime_checkable
class Source(Protocol):
    """What proposes rules to the guided search, input after input (see the module)."""

    async def open(self, run: Explaining) -> Opened: ...


@dataclass
class _Quiet:
    """An `Opened` that only proposes (a user's factory); ``make`` gives each level's proposer."""

    make: Callable[[Explaining], Sequence[Proposer]]
    drawn_with: tuple[Rule, ...] = ()

    async def proposers(self, run: Explaining) -> Sequence[Proposer]:
        return self.make(run)

    def searched(self, run: Explaining, search: GuidedSearch, result: SearchResult) -> None:
        pass

    def finished(self, run: Explaining, result: SearchResult) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class FactorySource:
    """A user's `ProposerFactory`: its proposer for each level of each input (checked: see `made`)."""

    make: ProposerFactory

    async def open(self, run: Explaining) -> Opened:
        return _Quiet(lambda r: [p] if (p := made(self.make, r.instance, r.target)) is not None else [])


def made(make: ProposerFactory, instance: Instance, label: Hashable) -> Proposer | None:
    """The proposer ``make`` gives this input; `ConfigError` (before its search samples anything) for
    anything that is not a `Proposer` (name, first, propose) or None, or a proposer named as one of the
    search's own (a step counts under its proposer's name)."""
    proposer = make(instance, label)
    if proposer is not None and not isinstance(proposer, Proposer):
        raise ConfigError(
            f"proposer {named(make)} gave {type(proposer).__name__}, not a Proposer (name, first, propose)"
        )
    if proposer is not None and (not isinstance(proposer.name, str) or proposer.name.partition("-")[0] in _BUILT_IN):
        raise ConfigError(f"proposer {named(make)} is named {proposer.name!r}: the names of the search's own stages "
                          f"({', '.join(sorted(_BUILT_IN))}) are not a user's proposer's")  # fmt: skip
    return proposer


_BUILT_IN = frozenset(stage.partition("-")[0] for stage in STAGES)
"""The names the search's own stages and proposers count under (`STAGES`: root, growth, memory, ...)."""


def named(factory: ProposerFactory | Source) -> str:
    """A user's proposer as the settings record it: its module and qualified name."""
    kind = factory if callable(factory) and hasattr(factory, "__qualname__") else type(factory)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', repr(kind))}"


@dataclass(frozen=True)
class MemorySource:
    """MAnchors' memory (`MemoryProposer`) as a source: the input looked up and its rules proposed at its
    first level, what became of them recorded, the input remembered at its end (unless a cap cut it short)."""

    memory: MemoryProposer

    async def open(self, run: Explaining) -> Opened:
        k = self.memory.params.k_nearest
        return _MemoryInput(self.memory, await self.memory.look_up(run.instance, run.target, k))


@dataclass
class _MemoryInput:
    memory: MemoryProposer
    lookup: Lookup
    asked: Asked | None = None
    use: MemoryUse | None = None
    drawn_with: tuple[Rule, ...] = ()

    async def proposers(self, run: Explaining) -> Sequence[Proposer]:
        if self.asked is not None:
            return []  # the first level only
        keys = self.memory.features.keys(run.instance)
        self.asked = await self.memory.propose(run.instance, keys, self.lookup, run.target, run.choice_seed)
        self.drawn_with = self.asked.rules.rules
        return self.asked.proposers

    def searched(self, run: Explaining, search: GuidedSearch, result: SearchResult) -> None:
        if self.use is None and self.asked is not None:
            self.use = self.memory.outcome(self.lookup, self.asked, run.instance, result, search.sources)

    def finished(self, run: Explaining, result: SearchResult) -> dict[str, Any]:
        used = self.use or self.lookup.use
        if not run.budget_exhausted:
            self.memory.remember(run.instance, run.target, result, self.lookup.vector, empty_anchor=True)
            used = self.memory.count(used, run.stats.queries)
        return {"memory_hit": bool(self.lookup.similar), "memory": used}
