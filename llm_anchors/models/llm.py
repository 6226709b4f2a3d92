"""`LLMClassifier`: a prompt template, label words and a backend."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._exceptions import AnswerWarning, BadResponseError, ConfigError, OutputCutWarning, PromptCacheWarning
from ..money.charge import Charge
from ..money.pricing import CACHE_MINIMUM, LOCAL, Price, check_service_tier, price_for
from ..money.tokens import EstimateCounter, TokenCounter
from .answer import MIN_PREFIX, LabelReader, answered, normal
from .backend import Backend, Completion, CompletionParams, as_backend
from .classifier import UNPARSED, BaseClassifier, Batch, Label, Probabilities
from .request import ChatRequest

__all__ = ["PROMPT_SLACK", "LLMClassifier"]

_MILLION_EACH = Charge(prompt_tokens=1_000_000, completion_tokens=1_000_000)  # to compare two prices

PROMPT_SLACK = 8
"""Prompt tokens a prompt's worst case adds to an exact count: what a server's own tokenizer or
chat template may add (a BOS token, a role marker). More than that is not believed."""


class LLMClassifier(BaseClassifier):
    """Classifies a text by asking an LLM to complete ``prompt``.

    ``prompt`` holds ``{text}`` where the text goes; ``labels`` are the
    words the model answers with. The label is the one the answer's text
    names (`answer.LabelReader`), case, spacing and a leading quote aside:
    the label it spells up to a word's end (the longest: "pos" names
    ``pos``, not ``positive``), else the one label it begins by three
    letters or more (an answer cut short). A text that names no label, or
    begins several, is `UNPARSED`, a class of its own, however likely a
    label was among the first token's alternatives: they score the labels
    (`probabilities`) and never choose one. Labels that may begin with the
    same token (``pos``, ``positive``; ``very good``, ``very bad``) are given
    enough output tokens to spell them by default, and one token is refused
    for labels sharing a word.

    Cost: ``price`` (default: the built-in price of the backend's model, with
    its service tiers, else an error for a hosted model, and for a model on
    this machine `LOCAL`: $0 assumed, which a dollar cap refuses;
    ``price=FREE`` declares it free); ``token_counter`` (default: the
    backend's, else a marked estimate). A call is reserved at its worst
    case (its prompt as counted, plus `PROMPT_SLACK` tokens a prompt for a
    tokenizer's small differences; ``params.max_tokens`` output tokens a
    prompt; the dearest tier) and billed at the tier the server says it
    served, at the tier asked when it does not say. The tier asked
    (``backend.service_tier``) must be one the price knows.

    ``params`` (default: `CompletionParams()`, or for a backend whose model
    reasons, `CompletionParams.for_reasoning()`): how answers are asked for.

    >>> clf = LLMClassifier(backend, "Review: {text}\\nSentiment:", ["negative", "positive"])
    """

    def __init__(
        self,
        backend: Backend,
        prompt: str | ChatRequest,
        labels: Sequence[str] = (),
        *,
        params: CompletionParams | None = None,
        price: Price | None = None,
        prices: dict[str, Price] | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        complete = as_backend(backend)
        self.request = prompt if isinstance(prompt, ChatRequest) else None
        served = getattr(complete, "served_model", getattr(complete, "model", None))
        if self.request is not None and None not in (self.request.model, served) and self.request.model != served:
            raise ConfigError(f"the request names model {self.request.model!r}, the backend serves {served!r}: the "
                              "price and the cache are the backend's, so they must be one")  # fmt: skip
        if self.request is None and (not isinstance(prompt, str) or "{text}" not in prompt):
            raise ConfigError("the prompt template must contain {text}")
        labels = _labels_of(self.request, labels)
        clean = [str(label).strip() for label in labels]
        if len(clean) < 2 or len({normal(c) for c in clean}) != len(clean) or not all(clean):
            raise ConfigError(f"need at least two distinct, non-empty labels, got {list(labels)!r}")
        if UNPARSED in clean:
            raise ConfigError(f"{UNPARSED!r} is reserved for answers that name no label")
        self.backend = complete
        self.prompt = prompt if isinstance(prompt, str) else json.dumps(prompt.body, sort_keys=True)
        self.labels = clean
        self._reader = LabelReader(clean)
        if not all(normal(label) for label in clean):
            raise ConfigError(f"a label must hold a letter or a digit, got {list(labels)!r}")
        self.unbounded = False
        """A request whose output neither a field nor its schema bounds: a dollar cap cannot hold it."""
        self.params = params or self._default_params()
        if self.request is not None and self.request.max_output is not None:  # what the server is sent bounds it
            self.params = replace(self.params, max_tokens=self.request.max_output)
        if (self.params.top_logprobs or getattr(complete, "decides", False)) and not self.params.answers:
            self.params = replace(self.params, answers=tuple(clean))
        if not isinstance(self.params.max_tokens, int) or self.params.max_tokens < 1:
            raise ConfigError(f"params.max_tokens must be an int >= 1, got {self.params.max_tokens!r}")
        alike = _alike(clean)
        if alike and self.params.max_tokens == 1 and alike[0].split()[0].lower() == alike[1].split()[0].lower():
            raise ConfigError(
                f"labels {alike[0]!r} and {alike[1]!r} begin with the same word: one output token cannot tell "
                f"them apart. Allow more (params.max_tokens, --max-output-tokens; by default "
                f"{_spelling_bound(clean)}) or name them apart by their first word"
            )
        self._prices = prices
        self._price = price or self._default_price(prices)
        self._served: dict[str, Price | None] = {}  # another model an answer named: its price, if known
        self._free = self._price.cost(_MILLION_EACH) == 0  # declared free, or assumed free on this machine
        check_service_tier(self._price, complete.service_tier, str(complete.model or complete.identity))
        self.token_counter = token_counter or self._default_counter()
        self._usage_partial = False
        self._layout_checked = False
        self._cut_said = False

    def _default_params(self) -> CompletionParams:
        """One token, unless two labels may begin with the same one (then enough to spell them), or
        a reasoning model's room to reason; for a request, the output it bounds (`ChatRequest.max_output`,
        else the longest answer its schema allows, in bytes, twice, and room for spacing, when it does not
        reason: reasoning tokens are billed as output, and only ``max_completion_tokens`` bounds them)."""
        if self.request is not None:
            bound = self.request.max_output
            longest = self.request.schema_output()
            if bound is None and longest is not None and "reasoning_effort" not in self.request.body:
                bound = 2 * len(longest.encode()) + 16
            self.unbounded = bound is None
            return CompletionParams(max_tokens=bound or _UNBOUNDED)
        if getattr(self.backend, "decides", False):
            return CompletionParams.for_decisions()
        if self.backend.reasoning_effort is not None:
            return CompletionParams.for_reasoning()
        return CompletionParams(max_tokens=_spelling_bound(self.labels) if _alike(self.labels) else 1)

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
        return price_for(str(model), local=local, prices=prices, api_url=self.backend.api_url)

    @property
    def price(self) -> Price:
        """What its tokens cost (per million, at each service tier; its source and date), recorded
        with each explanation."""
        return self._price

    def _default_counter(self) -> TokenCounter:
        """The backend's counter (given the labels when it asks for them: a decision endpoint bills the
        question's choices as input), else a marked estimate."""
        counter = self.backend.token_counter()
        if counter is not None and callable(with_answers := getattr(counter, "with_answers", None)):
            counter = with_answers(tuple(self.labels))
        return counter if counter is not None else EstimateCounter()

    @property
    def identity(self) -> str:
        said = f"request:{self.request.identity}" if self.request is not None else "prompt:" + hashlib.sha256(
            self.prompt.encode()).hexdigest()[:16]  # fmt: skip
        p = self.params
        effort = self.backend.reasoning_effort
        return (
            f"llm:{self.backend.identity}|{said}|labels:{','.join(self.labels)}"
            f"|max_tokens:{p.max_tokens}|temperature:{p.temperature}|top_logprobs:{p.top_logprobs}"
            + (f"|reasoning_effort:{effort}" if effort is not None else "")
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

    def render(self, text: str) -> Any:
        """What is sent for ``text``: the prompt with it in place, or the request's body (`ChatRequest.render`);
        a request that bounds its output by its schema only is sent that bound (``max_tokens``, which every
        OpenAI-compatible server honours: JSON may hold any whitespace), so the worst case reserved is one the
        server keeps."""
        if self.request is None:
            return self.prompt.replace("{text}", text)
        body = self.request.render(text)
        if self.request.max_output is None and not self.unbounded:
            body["max_tokens"] = self.params.max_tokens
        return body

    def _billed_text(self, rendered: Any) -> str:
        """What is billed as input of a rendered prompt, as text to count: a request's every message, its schema
        and its tools (as JSON: more tokens than a provider's own rendering of them)."""
        if isinstance(rendered, str):
            return rendered
        return json.dumps({k: rendered[k] for k in ("messages", "tools", "response_format") if k in rendered},
                          ensure_ascii=False)  # fmt: skip

    def billed_at(self, served: str | None) -> Price | None:
        """The rates of a call the server says it served at ``served`` (None: it did not say, so the
        tier asked; "auto" said, or asked and not said: None). None: a tier the price does not know,
        which the call cannot be billed at: its usage is billed at the model's dearest tier."""
        tier = served if served is not None else self.backend.service_tier
        return None if tier == "auto" else self.price.at(tier)

    async def quote(self, texts: Sequence[str]) -> Charge:
        """Worst-case cost of classifying ``texts`` (``estimated`` when its tokens are): every prompt
        as counted (`PROMPT_SLACK` more a prompt when counted exactly), ``params.max_tokens`` output
        tokens each, at the dearest rates of the dearest tier (a server may serve another than asked)."""
        rendered = [self.render(t) for t in texts]
        count = await self.token_counter.count([self._billed_text(r) for r in rendered])
        slack = sum(PROMPT_SLACK * len(r["messages"]) if isinstance(r, dict) else PROMPT_SLACK for r in rendered)
        prompt = count.total + (0 if count.estimated else slack)
        completion = len(texts) * self.params.max_tokens
        usd = max(p.worst_case(prompt, completion) for p in (self.price, *self._other_models()))
        return Charge(len(texts), prompt, completion, usd, count.estimated, unpriced=not self.price.known)

    async def _counted(self, texts: Sequence[str]) -> Charge:
        """The tokens of a call the server did not say (or not all of): the prompts as counted,
        ``params.max_tokens`` output tokens each."""
        count = await self.token_counter.count([self._billed_text(self.render(t)) for t in texts])
        return Charge(len(texts), count.total, len(texts) * self.params.max_tokens, estimated=count.estimated)

    async def cacheable_share(self, texts: Sequence[str]) -> float | None:
        """The share of ``texts``' prompt tokens that is the constant prefix (all up to ``{text}``) a provider's
        prompt cache may hold: 0 below its minimum; None for a provider that caches none."""
        minimum = CACHE_MINIMUM.get(self.price.provider)
        if minimum is None or not texts:
            return None
        before = self.request.constant()[0] if self.request is not None else self.prompt.split("{text}", 1)[0]
        prefix = (await self.token_counter.count([before])).total
        total = (await self.token_counter.count([self._billed_text(self.render(t)) for t in texts])).total
        return 0.0 if prefix < minimum or not total else min(1.0, prefix * len(texts) / total)

    async def check_cache_layout(self) -> str:
        """Why the provider's prompt cache cannot serve this prompt well ("" when it can), said once as a
        `PromptCacheWarning`: its static part must come first (the text last) and reach the provider's
        minimum (OpenAI: 1,024 tokens)."""
        minimum = CACHE_MINIMUM.get(self.price.provider)
        if self._layout_checked or minimum is None:
            return ""
        self._layout_checked = True
        before, after = self.request.constant() if self.request is not None else self.prompt.split("{text}", 1)
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
        counting = asyncio.ensure_future(self._counted(texts)) if self._usage_partial else None
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
        usage, disputed = result.usage, result.usage_error
        self._usage_partial = result.usage_prompts != len(prompts) and not disputed
        if self._usage_partial or disputed:
            usage = await (counting or self._counted(texts))
        else:
            _discard(counting)
        self._say_cut(result.items)
        price = self.billed_at(result.service_tier)
        dearest = price is None  # a tier the price lacks ("auto" said, or asked and none said): the dearest
        if price is None:
            price = self.price.dearest(usage)
        if (served := self._served_price(result.served_model)) is not None:  # another model, dearer: as it
            at = served.at(result.service_tier or self.backend.service_tier) or served.dearest(usage)
            price = max(price, at, key=lambda p: p.cost(usage))
        usd = price.cost(usage)  # at the tier served; cache reads and writes at theirs
        charge = replace(usage, queries=len(texts), usd=usd, saved_by_caching=price.uncached(usage) - usd)
        labels, probabilities = zip(*(self.answer(c) for c in result.items), strict=True) if result.items else ((), ())
        return Batch(
            list(labels),
            charge,
            disputed=disputed,
            dearest_tier=dearest,
            probabilities=list(probabilities) if any(p is not None for p in probabilities) else None,
        )

    def _other_models(self) -> list[Price]:
        """The prices of the other models answers have named (`_served_price`)."""
        return [p for p in self._served.values() if p is not None]

    def _served_price(self, said: str | None) -> Price | None:
        """The price of ``said``, the model an answer names, when it is not the model asked and its price
        is known (None otherwise: the model asked, a dated snapshot of it, one with no price, or any when
        the model asked costs nothing: a model of this machine's). Said once per model (`AnswerWarning`);
        a call is billed at the dearer of the two prices, and reserved at it from then on."""
        if said is None or self.backend.model is None or self._free:
            return None
        if said in self._served:
            return self._served[said]
        asked = str(self.backend.model)
        sent = getattr(self.backend, "served_model", None)  # the name sent, where it is not the priced one
        price = None
        if not any(_same_model(said, name) for name in (asked, sent) if isinstance(name, str)):
            try:
                local = self.backend.is_local is True
                price = price_for(said, local=local, prices=self._prices, api_url=self.backend.api_url)
            except ConfigError:
                price = None
            price = price if price is not None and price.known else None
            self._say_served(said, asked, price)
        self._served[said] = price
        return price

    def _say_served(self, said: str, asked: str, price: Price | None) -> None:
        if price is not None and price.cost(_MILLION_EACH) > self.price.cost(_MILLION_EACH):
            how = f"billed at {said}'s prices, which are dearer, and every call from now reserved at them"
        elif price is not None:
            how = f"billed at {asked}'s prices ({said}'s are not dearer)"
        else:
            how = f"billed at {asked}'s prices: {said} has none here (--price-file gives one)"
        warnings.warn(f"the server answered as model {said!r}, not {asked!r} as asked: {how}", AnswerWarning,
                      stacklevel=3)  # fmt: skip

    def _say_cut(self, items: Sequence[Completion]) -> None:
        """Warn once when answers end at the output bound before any text (they are `UNPARSED`)."""
        cut = sum(c.cut for c in items)
        if cut and not self._cut_said:
            self._cut_said = True
            warnings.warn(
                f"{cut} of {len(items)} answers ended at the output bound (max_tokens={self.params.max_tokens}) "
                "before naming a label, and are counted as unparsed: a reasoning model spent it reasoning. "
                "Raise the bound (--max-output-tokens) or lower the reasoning effort (--reasoning-effort)",
                OutputCutWarning,
                stacklevel=2,
            )

    def answer(self, completion: Completion) -> tuple[Label, Probabilities | None]:
        """The label a completion names where it is read, and each label's probability its tokens give
        (`answer.answered`: one rule, one read)."""
        return answered(self._reader, self.request.place if self.request is not None else None, completion)


def _same_model(said: str, asked: str) -> bool:
    """Whether an answer naming ``said`` names the model ``asked``: the same name (a provider's prefix
    and case aside), or a dated snapshot of it (``gpt-4o-mini-2024-07-18`` for ``gpt-4o-mini``)."""
    said, asked = said.rpartition("/")[2].lower(), asked.rpartition("/")[2].lower()
    return said == asked or re.sub(r"-(\d{4}-\d{2}-\d{2}|\d{4})$", "", said) == asked


_UNBOUNDED = 4096
"""The output tokens reserved for a request that bounds its output neither by a field nor by its schema
(`LLMClassifier.unbounded`: a dollar cap refuses such a request)."""


def _labels_of(request: ChatRequest | None, given: Sequence[str]) -> Sequence[str]:
    """The labels: those given, else the ones the request's schema names where its label is read; the same
    ones when both say (in any order)."""
    named = request.enum if request is not None else ()
    if named and given and sorted(str(g).strip() for g in given) != sorted(named):
        raise ConfigError(f"the labels {list(given)!r} are not the values the request's schema allows at "
                          f"{request.place if request is not None else ''}: {list(named)!r}")  # fmt: skip
    return list(given) or list(named)


def _spelling_bound(labels: Sequence[str]) -> int:
    """Output tokens that spell any of ``labels`` whole: two a word, and one more (a leading space)."""
    return 1 + 2 * max(len(label.split()) for label in labels)


def _alike(labels: Sequence[str]) -> tuple[str, str] | None:
    """Two labels whose first token may be the same (they share their first word, or their first
    `MIN_PREFIX` letters), which one output token may not tell apart; None if there are none."""
    said = [normal(label) for label in labels]
    for i, a in enumerate(said):
        for j in range(i + 1, len(said)):
            b = said[j]
            if a.split()[0] == b.split()[0] or a[:MIN_PREFIX] == b[:MIN_PREFIX] or a.startswith(b) or b.startswith(a):
                return labels[i], labels[j]
    return None


def _discard(task: asyncio.Future[Any] | None) -> None:
    """Drop a task whose result is not needed, without leaving its error unread."""
    if task is None:
        return
    if task.done():
        if not task.cancelled():
            task.exception()
    else:
        task.cancel()
