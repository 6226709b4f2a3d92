"""A small OpenAI-compatible server on 127.0.0.1 that injects faults.

It fails a set fraction of requests, each way a real server fails: 429
with Retry-After, 500, 503, a hang past the client's timeout, a dropped
connection, a 400, a 401 whose body echoes the Authorization header
("echo-key"), a 401 or 500 whose OpenAI-shaped error echoes every header's
value ("echo-401", "echo-500"), or status 200 with a truncated JSON body ("truncated") or
an HTML page ("html"). The rest are answered either by a Python function
(``answer(prompt) -> label word``, replied in llama-server's shape) or by
forwarding to a real upstream server (``upstream="http://127.0.0.1:P/v1"``); ``alternatives``
(``(prompt, answer) -> [(token, logprob)]``) says the first token's alternatives, NaN or not, and
``probabilities`` (``(answer, labels) -> field``) a decision's probabilities as said; ``model_said``
the model every answer names (default: the one asked); ``rate`` (prompts a second, one request at a
time: a server of fixed capacity, whose latency grows with its queue; settable while it runs); ``fail_if``
(``prompts -> kind or None``) fails the requests it picks, every time.

As a hosted provider (``usage``): each answer carries the usage that
function reports, in OpenAI's documented shape (``usage.prompt_tokens``,
``prompt_tokens_details.cached_tokens``, ``completion_tokens_details.
reasoning_tokens``, ``service_tier``), true or not; with
``reasoning_tokens`` the model reasons that many tokens before its one
answer token, within the request's bound (``max_completion_tokens``, else
``max_tokens``), or, when the bound is smaller, answers nothing with
``finish_reason: "length"`` as OpenAI's reasoning models do (with
``honour_bound=False`` it reasons and answers past the bound). What it
really processed, one token a word, is kept per answer in ``answered``
(prompt, completion and reasoning tokens, and the tier it says) whatever
it reports, so a test can price what the provider would bill. Every
request's path, query and headers (lower-cased) are kept in ``requests``;
with ``tokenize=False`` it has no ``/tokenize`` (a gateway's 404).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from aiohttp import web

RETRYABLE = ("429", "500", "503", "timeout", "drop")


class FaultServer:
    def __init__(
        self,
        *,
        fail_rate: float = 0.0,
        kinds: Sequence[str] = RETRYABLE,
        seed: int = 0,
        latency: tuple[float, float] = (0.0, 0.0),
        answer: Callable[[str], str] | None = None,
        upstream: str | None = None,
        hang_s: float = 3.0,
        retry_after: str = "0.05",
        served: Sequence[str] = ("fault-server-model",),
        port: int = 0,
        usage: Callable[[list[str]], dict[str, Any]] | None = None,
        reasoning_tokens: int = 0,
        honour_bound: bool = True,
        tier: str | None = None,
        alternatives: Callable[[str, str], list[tuple[str, float]]] | None = None,
        fail_if: Callable[[list[str]], str | None] | None = None,
        tokenize: bool = True,
        cached_input: int = 0,
        probabilities: Callable[[str, list[str]], Any] | None = None,
        model_said: str | None = None,
        rate: float | None = None,
        logprobs_shape: str = "content",
        refuse: Callable[[str], bool] | None = None,
    ) -> None:
        self.refuse = refuse  # (prompt) -> whether the model refuses it (``message.refusal``)
        # How the first token's alternatives are said: "content" (chat's, with the token generated),
        # "content without token" (the same, not naming it), "legacy without tokens" (completions' older
        # shape, `top_logprobs: [{token: logprob}]` alone).
        self.logprobs_shape = logprobs_shape
        self.rate = rate  # prompts a second it answers, one request at a time (a server of fixed capacity)
        self._busy = asyncio.Lock()
        self.probabilities = probabilities  # (the answer, the labels) -> a decision's probabilities, as said
        self.model_said = model_said  # the model every answer names (None: the one asked)
        self.tokenize = tokenize
        self.cached_input = cached_input  # a decision's input tokens said cached (OpenAI's cached_tokens)
        self.fail_if = fail_if  # (the request's prompts) -> a fault kind to answer with, or None
        self.alternatives = alternatives  # (prompt, answer) -> the first token's alternatives, as said
        self.usage = usage
        self.reasoning_tokens = reasoning_tokens
        self.honour_bound = honour_bound
        self.tier = tier  # the service tier every answer says it was served at
        self.bodies: list[dict[str, Any]] = []  # every request's body, faults included
        self.requests: list[dict[str, Any]] = []  # every request's path, query and headers, faults included
        self.answered: list[dict[str, Any]] = []  # per answer: the tokens it really took, and the tier said
        self.tiers: set[str | None] = set()  # the service tiers requests asked for
        self.served = list(served)
        self.port = port
        self.prompts: list[str] = []  # every prompt answered, in order
        self.fail_rate = fail_rate
        self.kinds = list(kinds)
        self.rng = random.Random(seed)
        self.latency = latency
        self.answer = answer
        self.upstream = upstream
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.counts: Counter[str] = Counter()
        self.prompts_served = 0
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.base_url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/decisions", self._handle)  # OpenAI's decision endpoint
        app.router.add_post("/v1/systemone", self._handle)  # vLLM's and llama-server's
        # Azure OpenAI's paths: the deployment in the path, the API version in the query.
        app.router.add_post("/openai/deployments/{deployment}/completions", self._handle)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._handle)
        if self.tokenize:  # a gateway in front of a hosted model has none
            app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()  # first: no handler may forward after the client closes
        if self._client is not None:
            await self._client.close()

    async def __aenter__(self) -> FaultServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self._idle.clear()
        try:
            return await self._respond(request)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()

    async def idle(self) -> None:
        """Return once no request is being answered (those a dead client sent included)."""
        await self._idle.wait()

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append({"path": request.path, "query": dict(request.query), "headers": headers})
        self.tiers.add(body.get("service_tier"))
        lo, hi = self.latency
        if hi > 0:
            await asyncio.sleep(self.rng.uniform(lo, hi))
        if self.rate is not None:  # requests queue, then take their prompts' time: load makes it slow
            async with self._busy:
                await asyncio.sleep(len(_prompts(request.path, body)) / self.rate)
        chosen = self.fail_if(_prompts(request.path, body)) if self.fail_if is not None else None
        if chosen is not None or self.rng.random() < self.fail_rate:
            kind = chosen or self.rng.choice(self.kinds)
            self.counts[kind] += 1
            if kind == "429":
                return web.Response(status=429, text="slow down", headers={"Retry-After": self.retry_after})
            if kind in ("500", "503", "400"):
                return web.Response(status=int(kind), text=f"injected {kind}")
            if kind in ("echo-401", "echo-500", "echo-split-500", "echo-b64-500"):  # every header's value echoed
                said = " ".join(request.headers.values())  # in an OpenAI-shaped error: as is, split, base64
                if kind == "echo-split-500":
                    said = " ".join(v[: len(v) // 2] + "\n" + v[len(v) // 2 :] for v in request.headers.values())
                elif kind == "echo-b64-500":
                    said = " ".join(base64.b64encode(f"u:{v}".encode()).decode() for v in request.headers.values())
                body = {"error": {"message": f"denied for credentials {said}", "type": "invalid_request_error"}}
                return web.json_response(body, status=int(kind[-3:]))
            if kind == "echo-key":
                echoed = request.headers.get("Authorization", "")
                return web.Response(status=401, text=f'{{"error": "Incorrect API key provided: {echoed}"}}')
            if kind == "truncated":
                return web.Response(status=200, text='{"choices": [{"index": 0, "te', content_type="application/json")
            if kind == "html":
                return web.Response(
                    status=200, text="<html><body>502 Bad Gateway</body></html>", content_type="text/html"
                )
            if kind == "timeout":
                await asyncio.sleep(self.hang_s)
            elif kind == "drop":
                assert request.transport is not None
                request.transport.abort()
                return web.Response()
        self.counts["ok"] += 1
        if self.upstream:
            return await self._forward(request.path, body)
        return web.json_response(self._reply(request.path, body))

    def true_usage(self, answers: int) -> dict[str, Any]:
        """What the last ``answers`` answers took, in OpenAI's documented usage shape."""
        last = self.answered[-answers:]
        prompt, out = sum(a["prompt_tokens"] for a in last), sum(a["completion_tokens"] for a in last)
        reasoning = sum(a["reasoning_tokens"] for a in last)
        return {
            "prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }  # fmt: skip

    async def _models(self, request: web.Request) -> web.Response:
        """Never faulted: what the server serves (``served``), in OpenAI's shape."""
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in self.served]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        """Never faulted: llama-server's shape, one token per whitespace-separated word (+ BOS)."""
        body = await request.json()
        if self.upstream:
            return await self._forward("/tokenize", body, root=True)
        return web.json_response({"tokens": list(range(len(body["content"].split()) + 1))})

    async def _forward(self, path: str, body: dict[str, Any], root: bool = False) -> web.Response:
        if self._client is None:
            self._client = aiohttp.ClientSession()
        base = self.upstream.rstrip("/")  # type: ignore[union-attr]
        url = (base.removesuffix("/v1") if root else base) + path.removeprefix("/v1")
        try:
            async with self._client.post(url, json=body) as response:
                payload = await response.read()
                return web.Response(status=response.status, body=payload, content_type="application/json")
        except aiohttp.ClientError as exc:  # the upstream dropped the call: a fault like any other, counted
            self.counts["upstream"] += 1
            return web.json_response({"error": {"message": f"upstream: {exc!r}"}}, status=502)

    def _decide(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A decision endpoint's answer (OpenAI's /v1/decisions, or /v1/systemone): the answer's label at
        0.9, the other labels sharing 0.1; an answer of "" is a refusal. One token a word, input and question."""
        assert self.answer is not None
        openai = path.endswith("/decisions")
        (prompt,) = _prompts(path, body)
        self.prompts_served += 1
        self.prompts.append(prompt)
        if openai:
            (question,) = body["questions"]
            labels = [c["value"] for c in question["choices"]]
        else:
            ((name, question),) = body["questions"].items()
            labels = list(question["criteria"])
        asked = len(question["instructions"].split()) + len(labels)
        tokens = len(prompt.split()) + asked
        cached = min(self.cached_input, tokens) if openai else 0
        self.answered.append({"prompt_tokens": tokens, "completion_tokens": 1, "tier": self.tier, "reasoning_tokens": 0,
                              "cached_tokens": cached})  # fmt: skip
        word = self.answer(prompt)
        rest = (1 - 0.9) / max(1, len(labels) - 1)
        probabilities: Any = {label: 0.9 if label == word else rest for label in labels}
        if self.probabilities is not None:
            probabilities = self.probabilities(word, labels)
        if openai:
            answer: dict[str, Any] = {"type": "refusal", "name": question.get("name")}
            if word:
                listed = probabilities
                if isinstance(probabilities, dict):
                    listed = [{"value": v, "probability": p} for v, p in probabilities.items()]
                answer = {"type": "choice", "name": question.get("name"), "choice": word, "confidence": 0.9,
                          "probabilities": listed}  # fmt: skip
            usage = {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                     "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": tokens + 1}  # fmt: skip
            return {"answers": [answer], "model": self.model_said or body["model"], "usage": usage}
        said = {"type": "choice", "choice": word, "probabilities": probabilities, "confidence": 0.9}
        return {"id": "decision-fault", "object": "structured_decision", "created": 1_790_000_000,
                "model": self.model_said or body.get("model"), "answers": {name: said},
                "usage": {"input_tokens": tokens, "output_tokens": 1},
                "diagnostics": {name: {"label_mass": 0.95, "argmax_is_label": True}}}  # fmt: skip

    def _reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.answer is not None
        if path.endswith(("/decisions", "/systemone")):
            return self._decide(path, body)
        prompts = _prompts(path, body)
        self.prompts_served += len(prompts)
        self.prompts.extend(prompts)
        bound = body.get("max_completion_tokens", body.get("max_tokens", 1))
        choices = []
        for i, prompt in enumerate(prompts):
            word = " " + self.answer(prompt)
            cut = self.reasoning_tokens > 0 and self.honour_bound and bound < self.reasoning_tokens + 1
            out = bound if cut else self.reasoning_tokens + 1
            billed = _billed(path, body, prompt)
            self.answered.append({"prompt_tokens": billed, "completion_tokens": out, "tier": self.tier,
                                "reasoning_tokens": min(out, self.reasoning_tokens)})  # fmt: skip
            word = "" if cut else word
            finish = "length" if cut or self.reasoning_tokens == 0 else "stop"
            other = " negative" if word != " negative" else " positive"
            pairs = [(word, -0.1), (other, -2.5)] if self.alternatives is None else self.alternatives(prompt, word)
            top = [{"token": t, "logprob": lp} for t, lp in pairs]
            first: dict[str, Any] = {"token": word, "top_logprobs": top}
            first |= next(({"logprob": lp} for t, lp in pairs if t == word), {})  # not said when not listed
            said_as = {
                "content": {"content": [first]},
                "content without token": {"content": [{"top_logprobs": top}]},
                "legacy without tokens": {"top_logprobs": [dict(pairs)], "text_offset": [0]},
            }[self.logprobs_shape]
            logprobs = None if "logprobs" not in body else said_as
            if path.endswith("/chat/completions"):
                message: dict[str, Any] = {"role": "assistant", "content": word}
                if self.refuse is not None and self.refuse(prompt):  # OpenAI's structured outputs refusal
                    message, logprobs = {"role": "assistant", "content": None, "refusal": "I can't help."}, None
                    finish = "stop"
                elif (shaped := _structured(body, word.strip(), pairs, "logprobs" in body)) is not None:
                    message, logprobs = shaped
                    finish = "stop"  # a whole JSON answer (a forced tool call's, too: OpenAI says "stop")
                choices.append({"index": i, "message": message, "logprobs": logprobs, "finish_reason": finish})
            else:
                choices.append({"index": i, "text": word, "logprobs": logprobs, "finish_reason": finish})
        choices.reverse()  # servers may answer out of order: clients must sort by index
        said: dict[str, Any] = {"service_tier": self.tier} if self.tier else {}
        said |= {"id": "cmpl-fault", "object": "chat.completion" if path.endswith("/chat/completions") else
                 "text_completion", "created": 1_790_000_000,
                 "model": self.model_said or body.get("model", "")}  # fmt: skip
        if self.usage is not None:  # a provider's documented usage shape, for every prompt of the request
            return {"choices": choices, **said, **self.usage(prompts)}
        if self.tier or self.reasoning_tokens:
            return {"choices": choices, **said, "usage": self.true_usage(len(prompts))}
        # Like llama-server: for a list of prompts the usage covers the first one only.
        n_tokens = _billed(path, body, prompts[0]) + 1
        held = path.endswith("/chat/completions") and ("response_format" in body or "tool_choice" in body)
        usage = {"prompt_tokens": n_tokens, "completion_tokens": 12 if held else 1}  # a JSON answer: a dozen tokens
        return {"choices": choices, "model": said["model"], "usage": usage}


def _structured(
    body: dict[str, Any], value: str, pairs: list[tuple[str, Any]], logprobs: bool
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """The answer (message and logprobs) of a request held to a JSON schema (``response_format``) or to one
    forced tool, in OpenAI's documented shapes: the label ``value`` in the schema's first enum field; the
    content's tokens with their log-probabilities, ``pairs`` the alternatives of the value's first token (a
    tool call's arguments have none). None for a request held to neither."""
    fmt, choice = body.get("response_format"), body.get("tool_choice")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        field = _enum_field(fmt["json_schema"]["schema"])
        tokens = ['{"', field, '": "', value, '"}']
        content = "".join(tokens)
        entries = []
        for token in tokens:
            top = [(t.strip(), lp) for t, lp in pairs] if token == value else [(token, -0.001)]
            entries.append(
                {
                    "token": token,
                    "logprob": top[0][1] if top else -0.001,
                    "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
                }
            )
        return {"role": "assistant", "content": content, "refusal": None}, ({"content": entries} if logprobs else None)
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice["function"]["name"]
        tool = next(t["function"] for t in body["tools"] if t["function"]["name"] == name)
        arguments = json.dumps({_enum_field(tool["parameters"]): value})
        call = {"id": "call_fault", "type": "function", "function": {"name": name, "arguments": arguments}}
        return {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None}, None
    return None


def _enum_field(schema: dict[str, Any]) -> str:
    return str(next(k for k, v in schema.get("properties", {}).items() if isinstance(v, dict) and "enum" in v))


def _billed(path: str, body: dict[str, Any], prompt: str) -> int:
    """The prompt tokens an answer bills: a chat request's every message (3 tokens of its own each, as
    OpenAI counts them), its schema and its tools, and 3 to prime the reply; else the prompt's words."""
    if not path.endswith("/chat/completions"):
        return len(prompt.split())
    billed = {k: body[k] for k in ("messages", "tools", "response_format") if k in body}
    return len(json.dumps(billed).split()) + 3 * len(body["messages"]) + 3


def _prompts(path: str, body: dict[str, Any]) -> list[str]:
    """The prompts of a completions, chat or decision request."""
    if path.endswith("/decisions"):
        return [body["input"]]
    if path.endswith("/systemone"):
        return [body["state"]]
    if path.endswith("/chat/completions"):
        return [body["messages"][-1]["content"]]
    return body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
