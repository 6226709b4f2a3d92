"""`LLMClassifier`: a prompt template, label words and a backend."""

from __future__ import annotations

import asyncio
import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._exceptions import BadResponseError, ConfigError, PromptCacheWarning
from ..money.budget import Charge
from ..money.pricing import CACHE_MINIMUM, LOCAL, Price, price_for
from ..money.tokens import EstimateCounter, TokenCounter
from .backend import Backend, Completion, CompletionParams, as_backend
from .classifier import UNPARSED, BaseClassifier, Batch, Label

__all__ = ["LLMClassifier"]

_MIN_PREFIX = 3  # a token shorter than this names a label only if it is the whole label


class LLMClassifier(BaseClassifier):
    """Classifies a text by asking an LLM to complete ``prompt``.

    ``prompt`` holds ``{text}`` where the text goes; ``labels`` are the
    words the model answers with. The label is the one named by the most
    probable first token (a token names a label when it is a prefix of it,
    case and spacing aside; of labels sharing that prefix, the one another
    alternative names with the highest log-probability). When the most
    probable token names no label the answer is `UNPARSED`, a class of its
    own, however likely a label was among the other alternatives: the model
    did not answer with it. Without log-probabilities the generated text's
    first word is parsed the same way.

    Cost: ``price`` (default: the built-in price of the backend's model,
    else an error for a hosted model, and for a model on this machine
    `LOCAL`: $0 assumed, which a dollar cap refuses; ``price=FREE`` declares
    it free);
    ``token_counter`` (default: the backend's, else a marked estimate).

    >>> clf = LLMClassifier(backend, "Review: {text}\\nSentiment:", ["negative", "positive"])
    """

    def __init__(
        self,
        backend: Backend,
        prompt: str,
        labels: Sequence[str],
        *,
        params: CompletionParams | None = None,
        price: Price | None = None,
        prices: dict[str, Price] | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        complete = as_backend(backend)
        if "{text}" not in prompt:
            raise ConfigError("the prompt template must contain {text}")
        clean = [str(label).strip() for label in labels]
        if len(clean) < 2 or len({c.lower() for c in clean}) != len(clean) or not all(clean):
            raise ConfigError(f"need at least two distinct, non-empty labels, got {list(labels)!r}")
        if UNPARSED in clean:
            raise ConfigError(f"{UNPARSED!r} is reserved for answers that name no label")
        self.backend = complete
        self.prompt = prompt
        self.labels = clean
        self.params = params or CompletionParams()
        self._price = price or self._default_price(prices)
        self._prices = prices
        self._by_tier: dict[str, Price] = {}
        self._derived = price is None and self.backend.model is not None and self._price.known
        self.token_counter = token_counter or self._default_counter()
        self._usage_partial = False
        self._layout_checked = False

    def _default_price(self, prices: dict[str, Price] | None) -> Price:
        """The backend's model's price; free only for a backend that says it runs locally.

        Unknown means hosted: a backend without ``is_local`` is priced, and one
        that names no ``model`` needs an explicit ``price=`` (else the dollar
        cap could not hold).
        """
        model, local = self.backend.model, self.backend.is_local is True
        if model is None:
            if local:
                return LOCAL
            raise ConfigError(
                f"cannot price {self.backend.identity!r}: it names no model and does not say it runs locally "
                "(is_local); pass LLMClassifier(..., price=Price(...))"
            )
        backend = self.backend
        return price_for(
            str(model), local=local, prices=prices, api_url=backend.api_url, service_tier=backend.service_tier
        )

    @property
    def price(self) -> Price:
        """What its tokens cost (per million; its source and date), recorded with each explanation."""
        return self._price

    def _default_counter(self) -> TokenCounter:
        counter = self.backend.token_counter()
        return counter if counter is not None else EstimateCounter()

    @property
    def identity(self) -> str:
        digest = hashlib.sha256(self.prompt.encode()).hexdigest()[:16]
        p = self.params
        return (
            f"llm:{self.backend.identity}|prompt:{digest}|labels:{','.join(self.labels)}"
            f"|max_tokens:{p.max_tokens}|temperature:{p.temperature}|top_logprobs:{p.top_logprobs}"
        )

    def __repr__(self) -> str:
        return f"LLMClassifier({self.backend.identity!r}, labels={self.labels!r})"

    @property
    def max_request_size(self) -> int | None:
        """Prompts one request of the backend takes, if it says."""
        limit = self.backend.max_request_size
        return limit if isinstance(limit, int) else None

    async def aclose(self) -> None:
        await self.backend.aclose()
        close = getattr(self.token_counter, "aclose", None)
        if close is not None:
            await close()

    def render(self, text: str) -> str:
        return self.prompt.replace("{text}", text)

    def price_at(self, tier: str | None) -> Price:
        """The price of calls the server says it served at ``tier``: the priced model's rates at that
        tier (genai-prices), so a server that ignores the tier asked, or a project whose default tier
        is another, is billed as it bills. A price given (``price=``) or a tier not said: `price`."""
        if tier is None or not self._derived or tier == self.backend.service_tier:
            return self._price
        if tier not in self._by_tier:
            backend = self.backend
            self._by_tier[tier] = price_for(
                str(backend.model), prices=self._prices, api_url=backend.api_url, service_tier=tier
            )
        return self._by_tier[tier]

    async def quote(self, texts: Sequence[str]) -> Charge:
        """Worst-case cost of classifying ``texts`` (``estimated`` when its tokens are): at the tier
        asked, or at the standard tier when that is dearer (a server may not grant the tier asked)."""
        count = await self.token_counter.count([self.render(t) for t in texts])
        completion = len(texts) * self.params.max_tokens
        asked = self.backend.service_tier
        prices = [self.price, self.price_at("default")] if asked not in (None, "default") else [self.price]
        usd = max(p.worst_case(count.total, completion) for p in prices)
        return Charge(len(texts), count.total, completion, usd, count.estimated, unpriced=not self.price.known)

    async def check_cache_layout(self) -> str:
        """Why the provider's prompt cache cannot serve this prompt well ("" when it can), said once as a
        `PromptCacheWarning`: its static part must come first (the text last) and reach the provider's
        minimum (OpenAI: 1,024 tokens)."""
        minimum = CACHE_MINIMUM.get(self.price.provider)
        if self._layout_checked or minimum is None:
            return ""
        self._layout_checked = True
        before, _, after = self.prompt.partition("{text}")
        counted = await self.token_counter.count([before, after])
        prefix, suffix = counted.tokens
        why = ""
        if prefix < minimum <= prefix + suffix:
            why = f"{suffix:,} of its static tokens come after {{text}}: put them first, the text last"
        elif prefix < minimum:
            why = (f"its static prefix is {prefix:,} tokens, below the {minimum:,} {self.price.provider}'s prompt "
                   "cache needs: every prompt is billed uncached")  # fmt: skip
        if why:
            warnings.warn(f"the prompt cannot be cached: {why}", PromptCacheWarning, stacklevel=2)
        return why

    async def classify(self, texts: Sequence[str]) -> Batch:
        if not self._layout_checked:
            await self.check_cache_layout()
        prompts = [self.render(t) for t in texts]
        # Where the server's usage did not cover a list last time (llama-server),
        # count the tokens while the model answers, not after.
        counting = asyncio.ensure_future(self.quote(texts)) if self._usage_partial else None
        try:
            result = await self.backend.complete(prompts, self.params)
        except BaseException:
            _discard(counting)
            raise
        if len(result.items) != len(prompts):
            _discard(counting)
            raise BadResponseError(
                f"{len(result.items)} completions for {len(prompts)} prompts", classifier=self.identity
            )
        usage = result.usage
        self._usage_partial = result.usage_prompts != len(prompts)
        if self._usage_partial:
            usage = await (counting or self.quote(texts))
        else:
            _discard(counting)
        usd = self.price_at(result.service_tier).cost(usage)  # at the tier served; cache reads and writes at theirs
        return Batch([self.read(c) for c in result.items], replace(usage, queries=len(texts), usd=usd))

    def read(self, completion: Completion) -> Label:
        """The label a completion names, or `UNPARSED`."""
        if alternatives := completion.top_logprobs:
            named = self._named_by(max(alternatives, key=alternatives.__getitem__))
            if len(named) < 2:
                return named[0] if named else UNPARSED
            scores = {label: float("-inf") for label in named}
            for token, logprob in alternatives.items():
                if len(one := [label for label in self._named_by(token) if label in scores]) == 1:
                    scores[one[0]] = max(scores[one[0]], logprob)
            return max(named, key=lambda label: scores[label])
        words = completion.text.strip().split()
        if words:
            named = self._named_by(words[0].strip(".,:;!\"'"))
            if len(named) == 1:
                return named[0]
        return UNPARSED

    def _named_by(self, token: str) -> list[str]:
        t = token.strip().lower()
        if not t:
            return []
        return [
            label
            for label in self.labels
            if label.lower().startswith(t) and (len(t) >= _MIN_PREFIX or t == label.lower())
        ]


def _discard(task: asyncio.Future[Any] | None) -> None:
    """Drop a task whose result is not needed, without leaving its error unread."""
    if task is None:
        return
    if task.done():
        if not task.cancelled():
            task.exception()
    else:
        task.cancel()
