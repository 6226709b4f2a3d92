"""What an extender implements, and the values that cross those contracts.

``llm_anchors`` exports what explaining a model needs; this module what
writing a new backend, classifier, sampler, cap or memory needs:

- `Backend` / `BaseBackend` (behind `LLMClassifier`), with `Completion` (its first token's
  `Alternatives` as the server said them), `CompletionParams`, `Completions`; `MockBackend` for tests;
- `Classifier` / `BaseClassifier`, with `Batch` and `Label`;
- `Sampler` with `Instance` (`Refines`: a sampler with a finer level of features), and `MemoryFeatures`
  (MAnchors for a new kind of input);
- `TokenCounter` with `TokenCount`;
- `SpendCap` (a cap held elsewhere than a `Budget`), with `Charge`, `Reservation`, `BudgetReport`;
- `Memory` (MAnchors' memory kept elsewhere than a `RuleMemory`), with `MemoryEntry`;
- `Proposer` (rules for MAnchors' guided search to test: it sees the search as a `Guide`, its rules as
  read-only `RuleView`s, and asks it to `Judge` a rule or `Draw` samples), with `Proposals` (rules known
  beforehand);
- `Price`, `FREE` (a model declared free), `LOCAL` (assumed free, refused by a dollar cap);
- `remember` (a credential known by value: `hide` then takes it out of every file and message),
  `refuse_credentials`, `redact`, `scrub`, `header_secrets` and `shown_url`: what a backend's messages
  and errors may show of its credentials and URLs;
- `RequestRejectedError` (a server's 400: a `BackendError`) and `PromptTooLongError` (a prompt
  over the model's context: also an `InvalidInputError`) and `UnreachableError` (no connection: never
  billed), which a backend raises; `NoLabelError`
  (the model's answer to the input names no label), `AnswerWarning` (an answer read leaving
  something out) and `PromptCacheWarning` (a prompt the provider cannot cache), which a classifier or
  backend may raise and warn.

Each protocol's base class (or ``as_backend`` / ``as_classifier``) gives its
optional members safe defaults. The parts the explainers are made of are in
their own packages (`llm_anchors.search`, `.money`, `.models`, `.query`,
`.memory`, `.samplers`, `.explain`); a dataset run is `llm_anchors.run`.
"""

from ._exceptions import (
    AnswerWarning,
    NoLabelError,
    PromptCacheWarning,
    PromptTooLongError,
    RequestRejectedError,
    UnreachableError,
)
from ._secrets import header_secrets, hide, redact, refuse_credentials, remember, scrub, shown_url
from .explain.sources import Opened, Source
from .memory import Memory, MemoryEntry, MemoryFeatures
from .models import (
    Alternatives,
    Backend,
    BaseBackend,
    BaseClassifier,
    Batch,
    Classifier,
    Completion,
    CompletionParams,
    Completions,
    Label,
    MockBackend,
    as_backend,
    as_classifier,
)
from .money import FREE, LOCAL, BudgetReport, Charge, Price, Reservation, SpendCap, TokenCount, TokenCounter
from .propose import Draw, Guide, Judge, Proposals, Proposer
from .samplers import Instance, Refines, Sampler
from .search.base import RuleView

__all__ = [
    "FREE",
    "LOCAL",
    "Alternatives",
    "AnswerWarning",
    "Backend",
    "BaseBackend",
    "BaseClassifier",
    "Batch",
    "BudgetReport",
    "Charge",
    "Classifier",
    "Completion",
    "CompletionParams",
    "Completions",
    "Instance",
    "Label",
    "Memory",
    "MemoryEntry",
    "MemoryFeatures",
    "MockBackend",
    "NoLabelError",
    "Opened",
    "Price",
    "PromptCacheWarning",
    "PromptTooLongError",
    "Draw",
    "Guide",
    "Judge",
    "Proposals",
    "Proposer",
    "Refines",
    "RequestRejectedError",
    "Reservation",
    "RuleView",
    "Sampler",
    "Source",
    "SpendCap",
    "TokenCount",
    "TokenCounter",
    "UnreachableError",
    "as_backend",
    "as_classifier",
    "header_secrets",
    "hide",
    "redact",
    "refuse_credentials",
    "remember",
    "scrub",
    "shown_url",
]
