"""`LLMClassifier`: a prompt template, label words and a backend."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ._backend import Backend, Completion, CompletionParams
from ._classifier import UNPARSED, Batch, Label
from ._exceptions import BadResponseError, ConfigError

__all__ = ["LLMClassifier"]

_MIN_PREFIX = 3  # a token shorter than this names a label only if it is the whole label


class LLMClassifier:
    """Classifies a text by asking an LLM to complete ``prompt``.

    ``prompt`` holds ``{text}`` where the text goes; ``labels`` are the
    words the model answers with. The label is the one whose first token
    has the highest log-probability among the first generated token's
    alternatives; a token names a label when it is a prefix of it (case and
    spacing aside). Without log-probabilities the generated text is parsed.
    An answer that names no label is the label `UNPARSED`, a class of its
    own.

    >>> clf = LLMClassifier(backend, "Review: {text}\\nSentiment:", ["negative", "positive"])
    """

    def __init__(
        self,
        backend: Backend,
        prompt: str,
        labels: Sequence[str],
        *,
        params: CompletionParams | None = None,
    ) -> None:
        if not isinstance(backend, Backend):
            raise ConfigError(f"{backend!r} is not a Backend (it needs .identity, async .complete and .aclose)")
        if "{text}" not in prompt:
            raise ConfigError("the prompt template must contain {text}")
        clean = [str(label).strip() for label in labels]
        if len(clean) < 2 or len({c.lower() for c in clean}) != len(clean) or not all(clean):
            raise ConfigError(f"need at least two distinct, non-empty labels, got {list(labels)!r}")
        if UNPARSED in clean:
            raise ConfigError(f"{UNPARSED!r} is reserved for answers that name no label")
        self.backend = backend
        self.prompt = prompt
        self.labels = clean
        self.params = params or CompletionParams()

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
    def max_batch(self) -> int | None:
        """Prompts one request of the backend takes, if it says."""
        limit = getattr(self.backend, "max_prompts_per_request", None)
        return limit if isinstance(limit, int) else None

    async def aclose(self) -> None:
        await self.backend.aclose()

    def render(self, text: str) -> str:
        return self.prompt.replace("{text}", text)

    async def classify(self, texts: Sequence[str]) -> Batch:
        prompts = [self.render(t) for t in texts]
        result = await self.backend.complete(prompts, self.params)
        if len(result.items) != len(prompts):
            raise BadResponseError(
                f"{len(result.items)} completions for {len(prompts)} prompts", classifier=self.identity
            )
        return Batch([self.read(c) for c in result.items], result.usage)

    def read(self, completion: Completion) -> Label:
        """The label a completion names, or `UNPARSED`."""
        if completion.top_logprobs:
            scores: dict[str, float] = {}
            for token, logprob in completion.top_logprobs.items():
                for label in self._named_by(token):
                    scores[label] = max(scores.get(label, float("-inf")), logprob)
            if scores:
                return max(self.labels, key=lambda label: scores.get(label, float("-inf")))
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
