"""A classifier as its user deploys it: the chat request their code sends, with ``{text}`` in its place, and
where they read the label (`ChatRequest`).

The request is sent as it is, ``{text}`` filled in (as a value of the JSON, so any text is escaped where it
sits inside a string); the engine adds only what it needs to read probabilities where the request allows
them (``logprobs``, ``top_logprobs``). The label is read where the user reads it (`Place`): the message's
content, a field of the JSON a ``response_format`` schema constrains, or an argument of a tool call. Where
the schema (or the one tool ``tool_choice`` forces) has exactly one field whose values are an enum, that is
the place and its values are the labels.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._exceptions import ConfigError
from .answer import Place

__all__ = ["PLACEHOLDER", "ChatRequest"]

PLACEHOLDER = "{text}"

_NOT_SENT = ("stream", "n")
"""Fields a request to be explained cannot have: one answer a request, whole."""


class ChatRequest:
    """A chat completion request as the user's code sends it (``body``: model, messages with ``{text}`` in
    exactly one string, and whatever else the provider takes: ``response_format``, ``tools`` and
    ``tool_choice``, ``temperature``, ``seed``, ``max_completion_tokens``, ``reasoning_effort``...), and where
    its label is read (``label``: a field's name or dotted path; by default the one enum field of the schema
    or forced tool, else the content).

    >>> ChatRequest({"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Route tickets."},
    ...              {"role": "user", "content": "{text}"}], "response_format": {"type": "json_schema", ...}})
    """

    def __init__(self, body: Mapping[str, Any], *, label: str | None = None) -> None:
        if not isinstance(body, Mapping):
            raise ConfigError(f"a request is a JSON object (a dict), got {type(body).__name__}")
        self.body: dict[str, Any] = json.loads(json.dumps(body))  # plain JSON, a copy of its own
        messages = self.body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ConfigError("a request holds its messages: a list of {role, content} objects")
        for name in _NOT_SENT:
            if self.body.get(name) not in (None, False, 1):
                raise ConfigError(f"a request to explain is answered once and whole: drop its {name!r}")
        self._slot = _slot(messages)
        self.place, self.enum = _place(self.body, label)

    @property
    def model(self) -> str | None:
        """The model the request names (None: it names none, the backend's is sent)."""
        model = self.body.get("model")
        return model if isinstance(model, str) and model else None

    def with_model(self, model: str) -> ChatRequest:
        """The same request for another model (one served locally in its place), its label read where it was."""
        label = ".".join(self.place.path) if self.place.kind != "content" else None
        return ChatRequest({**self.body, "model": model}, label=label)

    @property
    def identity(self) -> str:
        """The request as a fingerprint (its JSON, keys sorted), and where its label is read."""
        said = json.dumps(self.body, sort_keys=True, ensure_ascii=False)
        return f"{hashlib.sha256(said.encode()).hexdigest()[:16]}@{self.place.kind}:{'.'.join(self.place.path)}"

    def shown(self) -> dict[str, Any]:
        """What a report may show of it: its `identity`, every field but the messages' contents (their roles and
        lengths), the schema's and tools' names, and where the label is read."""
        shown = {k: v for k, v in self.body.items() if k not in ("messages", "response_format", "tools")}
        shown["messages"] = [{"role": m.get("role"), "chars": len(json.dumps(m.get("content")))}
                             for m in self.body["messages"]]  # fmt: skip
        if (fmt := self.body.get("response_format")) is not None:
            shown["response_format"] = fmt.get("json_schema", {}).get("name", fmt.get("type"))
        if tools := self.body.get("tools"):
            shown["tools"] = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
        shown["label"] = str(self.place)
        return {"id": self.identity, **shown}

    def render(self, text: str) -> dict[str, Any]:
        """The body with ``text`` in the place of ``{text}``."""
        body = copy.deepcopy(self.body)
        index, part = self._slot
        holder = body["messages"][index]
        if part is None:
            holder["content"] = holder["content"].replace(PLACEHOLDER, text)
        else:
            holder["content"][part]["text"] = holder["content"][part]["text"].replace(PLACEHOLDER, text)
        return body

    def constant(self) -> tuple[str, str]:
        """What every request repeats (all of it up to ``{text}``, and after it), as text: its tokens are what
        a provider's prompt cache may hold."""
        said = json.dumps(self.render(PLACEHOLDER), ensure_ascii=False)
        before, _, after = said.partition(PLACEHOLDER)
        return before, after

    @property
    def max_output(self) -> int | None:
        """The output tokens the request itself bounds (``max_completion_tokens``, else ``max_tokens``; None:
        it does not)."""
        for name in ("max_completion_tokens", "max_tokens"):
            value = self.body.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    def schema_output(self) -> str | None:
        """The longest answer the schema (or the forced tool's parameters) allows, as text, when it allows
        no free text (every field an enum or a const, no extra property); None when it does not bound it."""
        schema = _schema_of(self.body)
        if schema is None:
            return None
        longest = _longest(schema)
        return None if longest is None else json.dumps(longest)


def _slot(messages: Sequence[dict[str, Any]]) -> tuple[int, int | None]:
    """The message (and its content part, for a list of parts) that holds ``{text}``: exactly one."""
    found: list[tuple[int, int | None]] = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, str):
            found += [(i, None)] * content.count(PLACEHOLDER)
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    found += [(i, j)] * part["text"].count(PLACEHOLDER)
    if len(found) != 1:
        raise ConfigError(f"a request holds {PLACEHOLDER} exactly once, in one message's text: found it {len(found)} "
                          "times")  # fmt: skip
    return found[0]


def _schema_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer is held to: the ``response_format``'s, or the parameters of the one tool
    ``tool_choice`` forces (or the only tool, when a call is required)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema", {}).get("schema")
        return schema if isinstance(schema, dict) else None
    tool = _forced_tool(body)
    return tool[1] if tool is not None else None


def _forced_tool(body: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    declared = [t.get("function") for t in body.get("tools") or [] if isinstance(t, dict)]
    tools: list[dict[str, Any]] = [t for t in declared if isinstance(t, dict) and isinstance(t.get("name"), str)]
    choice = body.get("tool_choice")
    name = None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
    elif choice == "required" and len(tools) == 1:
        name = tools[0]["name"]
    chosen = [t for t in tools if t["name"] == name]
    if not chosen:
        return None
    parameters = chosen[0].get("parameters")
    return chosen[0]["name"], parameters if isinstance(parameters, dict) else {}


def _place(body: Mapping[str, Any], label: str | None) -> tuple[Place, tuple[str, ...]]:
    """Where the label is read, and the labels the schema names there (() when it names none)."""
    schema, tool = _schema_of(body), _forced_tool(body)
    kind: Literal["json", "tool"] = "tool" if tool is not None and "response_format" not in body else "json"
    name = tool[0] if kind == "tool" and tool is not None else None
    if schema is None:
        if label is not None:
            raise ConfigError(f"the label field {label!r} is named, but the request has no response_format schema "
                              "nor a forced tool: its label is read in the message's content")  # fmt: skip
        return Place(), ()
    fields = _enum_fields(schema)
    if label is not None:
        path = tuple(label.split("."))
        return Place(kind, path, name), fields.get(path, ())
    if len(fields) == 1:
        path, values = next(iter(fields.items()))
        return Place(kind, path, name), values
    raise ConfigError(f"the request's schema has {len(fields)} enum fields: name the one the label is read from "
                      "(label=, --label-field)")  # fmt: skip


def _enum_fields(schema: Mapping[str, Any], path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Every field of an object schema whose values are an enum of strings, by path."""
    found: dict[tuple[str, ...], tuple[str, ...]] = {}
    for key, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        if isinstance(sub.get("enum"), list) and sub["enum"] and all(isinstance(v, str) for v in sub["enum"]):
            found[(*path, key)] = tuple(sub["enum"])
        elif sub.get("type") == "object":
            found |= _enum_fields(sub, (*path, key))
    return found


def _longest(schema: Mapping[str, Any]) -> Any:
    """The longest value ``schema`` allows when it allows no free value (enums, consts, booleans, closed
    objects of them); None otherwise."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return max(schema["enum"], key=lambda v: len(json.dumps(v)))
    if schema.get("type") == "boolean":
        return False
    if schema.get("type") == "object" and schema.get("additionalProperties") is False:
        out = {}
        for key, sub in (schema.get("properties") or {}).items():
            value = _longest(sub) if isinstance(sub, dict) else None
            if value is None:
                return None
            out[key] = value
        return out
    return None
