"""`Charge`: what calls cost (queries, tokens by kind, dollars), and what a bill that cannot be true is counted at."""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

__all__ = ["Charge", "disputed", "implausible", "minus"]


@dataclass(frozen=True)
class Charge:
    """Queries, tokens and dollars: of one call (its worst case before it is
    sent, or what it cost), or a sum of calls (``a + b``).

    The one accounting value of the library: a classifier's `Batch` and
    quote, a backend's `Completions`, the budget's ledger, an explanation's
    `Cost` and its progress reports all carry a `Charge`. ``usd`` is an
    exact `Decimal` (a string in JSON); ``estimated`` is True when a token
    count is an estimate rather than the model tokenizer's.
    """

    queries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: Decimal = Decimal(0)
    estimated: bool = False
    unpriced: bool = False
    """True when ``usd`` is not a price but a guess of $0 (a model served on this machine
    under a name with no price): a dollar cap refuses to reserve it."""
    cache_read_tokens: int = 0
    """Of ``prompt_tokens``, those read from the provider's prompt cache (billed at its cached rate)."""
    cache_write_tokens: int = 0
    """Of ``prompt_tokens``, those written to the provider's prompt cache (billed at its write rate)."""
    reasoning_tokens: int = 0
    """Of ``completion_tokens``, a reasoning model's hidden reasoning (billed as output)."""
    disputed: int = 0
    """Calls whose reported usage could not be true (see `implausible`): each is counted at the
    client's own worst case for it, not at what the server said."""
    saved_by_caching: Decimal = Decimal(0)
    """What the provider's prompt cache saved on these calls: their price with every prompt token
    at the input rate of the tier billed, less what they were billed."""

    def __post_init__(self) -> None:  # from JSON: exact decimals from strings
        for name in ("usd", "saved_by_caching"):
            if not isinstance(getattr(self, name), Decimal):
                object.__setattr__(self, name, Decimal(str(getattr(self, name))))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Charge) -> Charge:
        return Charge(
            self.queries + other.queries,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.usd + other.usd,
            self.estimated or other.estimated,
            self.unpriced or other.unpriced,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.disputed + other.disputed,
            self.saved_by_caching + other.saved_by_caching,
        )


def implausible(billed: Charge, worst: Charge | None = None) -> str:
    """Why ``billed`` (one call's usage as its server reported it, priced) cannot be what the call
    cost, "" when it can: a part below zero, cached or written tokens beyond the prompt, reasoning
    beyond the completion; and against ``worst``, the call's worst case counted by the client
    before it was sent (when it counted tokens), more prompt tokens than were sent or more
    completion tokens than the request allowed. The reasons are short and fixed, to be counted."""
    counts = (billed.queries, billed.prompt_tokens, billed.completion_tokens, billed.cache_read_tokens,
              billed.cache_write_tokens, billed.reasoning_tokens)  # fmt: skip
    if min(counts) < 0 or not billed.usd.is_finite() or billed.usd < 0:
        return "a count or a price below zero"
    if billed.cache_read_tokens + billed.cache_write_tokens > billed.prompt_tokens:
        return "more cached tokens than prompt tokens"
    if billed.reasoning_tokens > billed.completion_tokens:
        return "more reasoning tokens than completion tokens"
    if worst is not None and worst.tokens > 0:
        if billed.prompt_tokens > worst.prompt_tokens:
            return "more prompt tokens than were sent"
        if billed.completion_tokens > worst.completion_tokens:
            return "more completion tokens than the request allowed"
    return ""


def disputed(worst: Charge, reported: Charge | None = None) -> Charge:
    """What a call whose usage could not be true is counted at: each part at the larger of the
    client's worst case and what the server ``reported`` (a part that is no count, or below zero,
    says nothing). A server that bills past what the request allowed is recorded at its bill, never
    below it: the cap cannot stop money already billed, but the ledger says it (`Budget.passed`)."""

    def larger(a: int, b: int) -> int:
        return max(a, b) if isinstance(b, int) and b >= 0 else a

    if reported is None:
        return replace(worst, disputed=1, saved_by_caching=Decimal(0))
    usd = reported.usd if reported.usd.is_finite() and reported.usd > worst.usd else worst.usd
    return replace(
        worst,
        prompt_tokens=larger(worst.prompt_tokens, reported.prompt_tokens),
        completion_tokens=larger(worst.completion_tokens, reported.completion_tokens),
        reasoning_tokens=min(larger(worst.reasoning_tokens, reported.reasoning_tokens),
                             larger(worst.completion_tokens, reported.completion_tokens)),
        usd=usd, disputed=1, saved_by_caching=Decimal(0),
    )  # fmt: skip


def minus(a: Charge, b: Charge) -> Charge:
    """``a - b`` (never below zero): a worst case counted earlier, replaced by what was billed."""
    return Charge(
        max(0, a.queries - b.queries),
        max(0, a.prompt_tokens - b.prompt_tokens),
        max(0, a.completion_tokens - b.completion_tokens),
        max(Decimal(0), a.usd - b.usd),
        a.estimated,
        a.unpriced,
        max(0, a.cache_read_tokens - b.cache_read_tokens),
        max(0, a.cache_write_tokens - b.cache_write_tokens),
        max(0, a.reasoning_tokens - b.reasoning_tokens),
        max(0, a.disputed - b.disputed),
        max(Decimal(0), a.saved_by_caching - b.saved_by_caching),
    )
