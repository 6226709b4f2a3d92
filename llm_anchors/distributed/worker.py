"""One explainer in a Ray actor: the run's ledger as its cap, a view of the run's memory as its memory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .._exceptions import LLMAnchorsError
from ..explain.anchors import AnchorsExplainer
from ..explain.manchors import MAnchorsExplainer
from ..memory.store import MemoryEntry
from ..money.budget import Budget, SpendCap
from ..run.resumable import invalid_reasons, run_config
from .ledger import LedgerView
from .memory import ActorMemory, Entries, ReplicaMemory

__all__ = ["Worker"]


class Worker:
    """One explainer in a Ray actor: explains one input at a time, on its own event loop."""

    def __init__(self, make_explainer: Callable[[], AnchorsExplainer], owner: str) -> None:
        self.explainer = make_explainer()
        self.owner = owner
        self.cap: LedgerView | None = None
        self.view: ActorMemory | ReplicaMemory | None = None
        self.max_usd_per_input: Decimal | None = None

    def memory_identity(self) -> tuple[int, str, str] | None:
        """A MAnchors explainer's memory (dims, embedder, model); None for plain Anchors."""
        e = self.explainer
        return e.memory_proposer.identity if isinstance(e, MAnchorsExplainer) and e.memory_proposer else None

    def config(self, more: dict[str, Any]) -> dict[str, Any]:
        """The run configuration of this worker's explainer (see `run_config`)."""
        return run_config(self.explainer, **more)

    def invalid(self, texts: list[Any]) -> list[str]:
        """Why each text cannot be explained ("" when it can)."""
        return invalid_reasons(self.explainer.sampler, texts)

    def attach(self, ledger: Any, max_usd_per_input: Decimal | None, holder: Any) -> None:
        """Take the run's ledger as the cap (each input capped at ``max_usd_per_input`` too) and
        the run's memory: the memory actor ``holder``, or, given None, a replica."""
        self.cap = LedgerView(ledger, self.owner)  # each input's cap (`explain`): the explainer's own is not touched
        self.max_usd_per_input = max_usd_per_input
        memory = self.explainer.memory_proposer if isinstance(self.explainer, MAnchorsExplainer) else None
        if memory is not None:
            self.view = ActorMemory(holder) if holder is not None else ReplicaMemory(*memory.identity)
            memory.use(self.view)  # its one door

    def pid(self) -> int:
        return os.getpid()

    def answers_repeats(self) -> bool:
        """Whether an exact repeat is answered from the explanations made before (MAnchors' memory on)."""
        return isinstance(self.explainer, MAnchorsExplainer) and self.explainer.repeats is not None

    def embed(self, entries: list[MemoryEntry]) -> Any:
        """The memory vectors of entries' inputs (to put back entries a results file recorded)."""
        assert isinstance(self.explainer, MAnchorsExplainer)
        return self.explainer.entry_vectors(entries)

    def cpu_s(self) -> float:
        """CPU seconds this worker's process used so far (all its threads)."""
        return time.process_time()

    def explain(self, text: Any, seed: int | None, accepted: Entries) -> tuple[str, Entries, LLMAnchorsError | None]:
        """The explanation (JSON) and the memory entries it would store, once the entries the
        run ``accepted`` since this worker's last input are in its replica; or ("", [], the
        error) when it ended with one of llm-anchors' errors (an input that cannot be explained,
        calls that failed past their retries, a cap): returned, not raised, so that it arrives
        without Ray's remote traceback."""
        if self.view is not None:
            self.view.apply(accepted)
        per_input: SpendCap | None = self.cap
        if self.max_usd_per_input is not None:
            per_input = Budget(max_usd=self.max_usd_per_input, parent=self.cap)
        try:
            exp = self.explainer.explain_sync(text, seed=seed, budget=per_input)
        except LLMAnchorsError as exc:
            if self.view is not None:
                self.view.take_added()  # stored by an explanation that did not end: not the run's
            return "", [], exc
        finally:  # its settlements (sent without waiting) are in the ledger before the answer is
            if self.cap is not None:
                self.cap.flush()
        return exp.to_json(), self.view.take_added() if self.view is not None else [], None
