"""The ``infill`` perturbation: a hidden word is replaced by a word a language model would put there.

An explanation pays for a pool, not a fill per sample: before its search, each content word of the
input is blanked once (``___``) and the filler model (an `LLMClassifier`-like `Filler` over any
`Backend`: the embedded local LLM, an OpenAI-compatible server) is asked for the word, its
alternatives for the first token read as the pool (their probabilities renormalised, the original word
left out). Every perturbation then draws a hidden word's stand-in from its pool, with the explanation's
generator: the rules of that input reuse it. Stop words (and a word whose pool is empty) take the
fallback, the mask. The filler's calls go through their own `QueryEngine`, reserving against the same
cap as the model's, and are reported apart (``meta.infill``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from ..models.backend import Backend, Completion, CompletionParams
from ..models.classifier import UNPARSED, Label, Probabilities
from ..models.llm import LLMClassifier
from ..money.pricing import Price
from ..money.tokens import TokenCounter
from .similar import StandIns, drawn_as
from .words import WORD

__all__ = ["FILL_PROMPT", "STOP_WORDS", "Filler", "fill_prompt", "pool_of"]

FILL_PROMPT = """Fill in the blank with one word.

Text: a ___ , funny and moving film
Word: charming

Text: the plot is ___ from start to finish and the acting is wooden
Word: predictable

Text: {text}
Word:"""
"""The few-shot prompt a base model completes with the blank's word (a template with ``{text}``)."""

STOP_WORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been it its this that these "
    "those i you he she we they me him her us them my your his our their not no so than then there here".split()
)
"""Words not filled (their fills are other stop words): they take the fallback."""

BLANK = "___"


class Filler(LLMClassifier):
    """Asks a model for the word of a blank: a completion's alternatives for its first token, as one
    label (``"word=logprob"`` pairs, tab-separated). ``backend``: where (any `Backend`); ``prompt``: a
    template with ``{text}`` (default `FILL_PROMPT`); ``top_logprobs``: alternatives per blank; ``price``,
    ``token_counter``: as `LLMClassifier`'s (what every call reserves and is billed at)."""

    def __init__(
        self,
        backend: Backend,
        prompt: str = FILL_PROMPT,
        *,
        top_logprobs: int = 10,
        price: Price | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        params = CompletionParams(max_tokens=1, top_logprobs=top_logprobs)
        super().__init__(backend, prompt, ("fill", "word"), params=params, price=price, token_counter=token_counter)

    @property
    def identity(self) -> str:
        digest = hashlib.sha256(self.prompt.encode()).hexdigest()[:16]
        return f"infill:{self.backend.identity}|prompt:{digest}|top_logprobs:{self.params.top_logprobs}"

    def __repr__(self) -> str:
        return f"Filler({self.backend.identity!r})"

    def _say_cut(self, items: Sequence[Completion]) -> None:
        """Nothing to say: a blank's answer is its first token, so every answer ends at the bound."""

    def answer(self, completion: Completion) -> tuple[Label, Probabilities | None]:
        """The alternatives as ``word=logprob`` pairs, or `UNPARSED` when none is a word (an answer cut at the
        bound too: a blank's answer is its first token); the probabilities as any answer's."""
        return self._fills(completion), super().answer(completion)[1]

    @staticmethod
    def _fills(completion: Completion) -> Label:
        alternatives = completion.alternatives or ({completion.text: 0.0} if completion.text.strip() else {})
        pairs = [f"{t.strip()}={lp:.4f}" for t, lp in alternatives.items() if WORD.fullmatch(t.strip())]
        return "\t".join(pairs) if pairs else UNPARSED


def fill_prompt(text: str, span: tuple[int, int]) -> str:
    """``text`` with the word at ``span`` blanked."""
    return f"{text[: span[0]]}{BLANK}{text[span[1] :]}"


def pool_of(answer: Label, word: str) -> StandIns:
    """A blank's stand-ins from the filler's answer: its words other than ``word``, probabilities
    renormalised, capitalised as ``word`` is (None: no word)."""
    if not isinstance(answer, str) or answer == UNPARSED:
        return None
    scores: dict[str, float] = {}
    for pair in answer.split("\t"):
        fill, _, logprob = pair.rpartition("=")
        fill = fill.lower()
        if fill and fill != word.lower() and WORD.fullmatch(fill):
            scores[fill] = max(scores.get(fill, -math.inf), _logprob(logprob))
    return drawn_as(word, scores)


def _logprob(text: str) -> float:
    """A pair's log-probability (NaN when it is not a number: `drawn_as` leaves it out)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def fillable(words: Sequence[str]) -> list[int]:
    """The positions of the words that are filled: single words, not stop words."""
    return [i for i, w in enumerate(words) if WORD.fullmatch(w) and w.lower() not in STOP_WORDS]
