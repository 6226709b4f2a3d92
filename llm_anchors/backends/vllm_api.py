"""What a vLLM server offers an explainer beyond the OpenAI API, as vLLM 0.32 answers it.

- **It says what it is.** ``GET /version`` (at the server's root) answers ``{"version": "0.32.0"}``;
  ``GET /v1/models`` gives each model's ``max_model_len``. `probe` reads both.
- **Exact label probabilities.** ``logprob_token_ids: [ids]`` (with ``logprobs`` set) returns the
  full-vocabulary log-probability of exactly those tokens, and of the token it chose, *instead of*
  the top ``logprobs``: a label's probability from one token, whatever the top 20 are. The labels'
  first tokens are asked of ``POST /tokenize`` once (`LabelTokens`; ``/tokenize`` and ``/detokenize`` live at
  the server's root, not under ``/v1``). With
  ``return_tokens_as_token_ids`` the alternatives are keyed ``"token_id:N"``, not by their text:
  two ids that spell the same text cannot overwrite each other (`read_label_logprobs` adds them).
  Asking above ``--max-logprobs`` (20) is a 400 with ``param: "logprobs"``.
- **Never a class probability from constrained decoding**: ``structured_outputs: {"choice": [...]}``
  renormalises the log-probabilities over the allowed tokens (" positive" −1.63 read −0.19), and the
  older ``guided_choice`` is silently ignored; neither is sent.
- **Usage.** A list prompt sums ``prompt_tokens`` over its prompts, but ``prompt_tokens_details.
  cached_tokens`` is the *last* prompt's only (and appears only with ``--enable-prompt-tokens-details``;
  the CPU prefix cache hits in whole blocks of 128 tokens). Read as the whole list's cached tokens it is
  at most what was cached, so the bill it makes is never below the true one; calls are reserved as if
  uncached.
- **Errors** are ``{"error": {"message", "type", "param", "code"}}``; a prompt over the context is a 400
  with ``param: "input_tokens"`` (`PromptTooLongError`), which the backend refuses before sending when
  it knows ``max_model_len``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..extend import Alternatives

__all__ = [
    "LabelTokens", "VllmInfo", "answer_spellings", "label_request", "logsumexp", "probe", "read_label_logprobs",
]  # fmt: skip

_ID_PREFIX = "token_id:"

Get = Callable[[str], Awaitable[Any]]
"""GET a URL and return its JSON (None when the server has no such page)."""


@dataclass(frozen=True)
class VllmInfo:
    """A vLLM server: its version, and the context length of the model asked for (None: not said)."""

    version: str
    max_model_len: int | None


async def probe(get: Get, root_url: str, api_url: str, model: str) -> VllmInfo | None:
    """The vLLM server at ``root_url`` (``/version``) serving ``model``; None when it is not vLLM."""
    said = await get(root_url + "/version")
    if not isinstance(said, dict) or not isinstance(said.get("version"), str):
        return None
    models = await get(api_url + "/models")
    data = models.get("data") if isinstance(models, dict) else None
    length = next(
        (m.get("max_model_len") for m in data or [] if isinstance(m, dict) and m.get("id") == model),
        None,
    )
    return VllmInfo(said["version"], length if isinstance(length, int) and length > 0 else None)


def answer_spellings(answers: Sequence[str]) -> dict[str, str]:
    """How a model may begin each answer after a prompt (with a space and without, as written and
    capitalised), each mapped to the answer as written: the texts whose first token is watched."""
    spellings: dict[str, str] = {}
    for answer in answers:
        word = answer.strip()
        for form in (word, word[:1].upper() + word[1:]):
            spellings.setdefault(" " + form, answer)
            spellings.setdefault(form, answer)
    return spellings


class LabelTokens:
    """The first token of each of a classifier's answers, as the server tokenizes them (asked once),
    each mapped to the text it spells: the answer's spelling when that is one token, else what the
    server detokenizes the first token to (a token "pos" is not the answer "positive")."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], dict[int, str]] = {}
        self._asking = asyncio.Lock()  # calls sent at once ask the server once

    async def ids(
        self,
        answers: Sequence[str],
        tokenize: Callable[[str], Awaitable[list[int]]],
        detokenize: Callable[[list[int]], Awaitable[str]],
    ) -> dict[int, str]:
        key = tuple(answers)
        if key in self._known:
            return self._known[key]
        async with self._asking:
            if key in self._known:
                return self._known[key]
            names: dict[int, str] = {}
            for text in answer_spellings(answers):
                tokens = await tokenize(text)
                if tokens and tokens[0] not in names:
                    names[tokens[0]] = text if len(tokens) == 1 else await detokenize(tokens[:1])
            self._known[key] = names
            return names


def label_request(ids: Mapping[int, str]) -> dict[str, Any]:
    """The request fields that ask for exactly these tokens' log-probabilities."""
    return {"logprobs": 1, "logprob_token_ids": sorted(ids), "return_tokens_as_token_ids": True}


def read_label_logprobs(choice: Mapping[str, Any], names: Mapping[int, str]) -> tuple[Alternatives | None, str | None]:
    """A choice's first-token alternatives keyed by text, and the text of the token chosen: the watched
    tokens' (``names``) and the token chosen (named by the answer's text). Ids spelling the same text
    are two tokens: their log-probabilities are added (log-sum-exp) when both are numbers, else the
    text's is unreadable. An id neither watched nor chosen is left out. Values are otherwise as said:
    the classifier's reader judges them."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, Mapping):
        return None, None
    tops, tokens = logprobs.get("top_logprobs") or [None], logprobs.get("tokens") or [None]
    first = tops[0]
    if not isinstance(first, Mapping):
        return None, None
    chosen = _token_id(tokens[0])
    text = str(choice.get("text") or "")
    merged: dict[str, list[Any]] = {}
    said_chosen = None
    for key, value in first.items():
        token = _token_id(key)
        name = names.get(token) if token is not None else None
        if name is None and token is not None and token == chosen:
            name = text
        if name is not None:
            merged.setdefault(name, []).append(value)
            said_chosen = name if token == chosen else said_chosen
    return {name: _added(values) for name, values in merged.items()} or None, said_chosen


def _added(values: list[Any]) -> Any:
    """The log-probability of a text the tokens of ``values`` spell: their sum when every one is a
    number, else the first that is not (which the reader refuses)."""
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
    return logsumexp([float(v) for v in values])


def _token_id(key: Any) -> int | None:
    if not isinstance(key, str) or not key.startswith(_ID_PREFIX):
        return None
    try:
        return int(key.removeprefix(_ID_PREFIX))
    except ValueError:
        return None


def logsumexp(values: list[float]) -> float:
    """The log of the summed probabilities of ``values`` (log-probabilities: two tokens spelling one text);
    NaN if any is NaN, the largest when it is not finite (every one −inf: −inf)."""
    if any(math.isnan(v) for v in values):
        return math.nan
    top = max(values)
    if not math.isfinite(top):
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))
