"""The fault server answering as vLLM 0.32 does (what the real one answered on this machine).

- ``GET /version`` ``{"version": "0.32.0"}``; ``GET /v1/models`` with ``max_model_len``.
- ``POST /tokenize`` takes ``{"model", "prompt", "add_special_tokens"}`` (llama-server's ``{"content"}``
  is a 400) and answers ``{"count", "max_model_len", "tokens", "token_strs"}``; ``POST /detokenize``.
  One token a whitespace-separated word (a leading space kept with it), ``<bos>`` (id 2) first.
- ``/v1/completions``: the legacy logprob shape keyed by token text; with ``logprob_token_ids`` the
  chosen token's and exactly those tokens' log-probabilities *instead of* the top ones, keyed
  ``"token_id:N"`` under ``return_tokens_as_token_ids``; ``logprobs`` above 20 and a prompt over the
  context are 400s in vLLM's error shape (``param`` "logprobs", "input_tokens"); a list prompt sums
  ``prompt_tokens`` but its ``cached_tokens`` is the last prompt's only (``cached(prompt)`` says a
  prompt's); ``/v1/chat/completions`` is a 400 (no chat template).
- ``answer(prompt) -> word`` and ``logprob(prompt, word) -> float`` say each token's log-probability
  (default: the answer −0.1, every other word −4.0).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fault_server import FaultServer

BOS = 2
VERSION = "0.32.0"


def _error(message: str, param: str | None) -> web.Response:
    body = {"error": {"message": message, "type": "BadRequestError", "param": param, "code": 400}}
    return web.json_response(body, status=400)


class FakeVllm(FaultServer):
    def __init__(
        self,
        *,
        answer: Callable[[str], str],
        logprob: Callable[[str, str], float] | None = None,
        cached: Callable[[str], int] | None = None,
        max_model_len: int = 4096,
        served: tuple[str, ...] = ("gemma-3-270m",),
        **kwargs: Any,
    ) -> None:
        super().__init__(answer=answer, served=served, **kwargs)
        self.logprob = logprob or (lambda prompt, word: -0.1 if word == " " + answer(prompt) else -4.0)
        self.cached = cached or (lambda prompt: 0)
        self.max_model_len = max_model_len
        self.vocab: dict[str, int] = {"<bos>": BOS}
        self.tokenized: list[str] = []  # every text /tokenize was asked for

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_post("/v1/chat/completions", self._no_chat)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_post("/detokenize", self._detokenize)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/version", self._version)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self.base_url

    def token_ids(self, text: str, special: bool = True) -> list[int]:
        """One token a word, its leading space with it (" positive"), <bos> first when ``special``."""
        words = re.findall(r"\s*\S+", text)
        return [BOS] * special + [self.vocab.setdefault(w, 1000 + len(self.vocab)) for w in words]

    def text_of(self, token: int) -> str:
        return next(w for w, i in self.vocab.items() if i == token)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "owned_by": "vllm", "max_model_len": self.max_model_len}
                for m in self.served]  # fmt: skip
        return web.json_response({"object": "list", "data": data})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "prompt" not in body:
            return _error("1 validation error: body.prompt Field required", "body.prompt")
        self.tokenized.append(body["prompt"])
        tokens = self.token_ids(body["prompt"], body.get("add_special_tokens", True))
        answer = {"count": len(tokens), "max_model_len": self.max_model_len, "tokens": tokens, "token_strs": None}
        return web.json_response(answer)

    async def _detokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"prompt": "".join(self.text_of(t) for t in body["tokens"])})

    async def _no_chat(self, request: web.Request) -> web.Response:
        return _error("As of transformers v4.44, default chat template is no longer allowed", None)

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        if (asked := body.get("logprobs")) is not None and asked > 20:
            return _error(f"Requested sample logprobs of {asked}, which is greater than max allowed: 20", "logprobs")
        if body.get("logprob_token_ids") and body.get("logprobs") is None:
            return _error("when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids")
        longest = max(len(self.token_ids(p)) for p in prompts)
        if longest > self.max_model_len:
            message = f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt contains at least {longest} input tokens"  # noqa: E501
            return _error(message, "input_tokens")
        return await super()._respond(request)

    def _reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        self.prompts_served += len(prompts)
        self.prompts.extend(prompts)
        choices = [self._choice(i, p, body) for i, p in enumerate(prompts)]
        prompt_tokens = sum(len(self.token_ids(p)) for p in prompts)
        usage = {
            "prompt_tokens": prompt_tokens, "completion_tokens": len(prompts),
            "total_tokens": prompt_tokens + len(prompts),
            "prompt_tokens_details": {"cached_tokens": self.cached(prompts[-1]), "created_cache_tokens": None},
            "completion_tokens_details": None,
        }  # fmt: skip
        return {"id": "cmpl-fake", "object": "text_completion", "model": body["model"], "choices": choices,
                "service_tier": None, "system_fingerprint": f"vllm-{VERSION}", "usage": usage}  # fmt: skip

    def _choice(self, index: int, prompt: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.answer is not None
        word = " " + self.answer(prompt)
        chosen = self.token_ids(word, special=False)[0]
        logprobs = None
        if body.get("logprobs") is not None:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            wanted = body.get("logprob_token_ids")
            others = [t for t in self.vocab.values() if t not in (BOS, chosen)][: max(0, body["logprobs"] - 1)]
            shown = [chosen, *(wanted if wanted else others)]
            key = (lambda t: f"token_id:{t}") if as_ids else self.text_of
            top = {key(t): self.logprob(prompt, self.text_of(t)) for t in dict.fromkeys(shown)}
            logprobs = {"text_offset": [0], "token_logprobs": [top[key(chosen)]], "tokens": [key(chosen)],
                        "top_logprobs": [top]}  # fmt: skip
        return {"index": index, "text": word, "logprobs": logprobs, "finish_reason": "length", "stop_reason": None}
