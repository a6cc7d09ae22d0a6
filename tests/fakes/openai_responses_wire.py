"""The OpenAI Responses API wire format (``POST /v1/responses``), with its request rules.

:class:`ResponsesAPI` is the server's state: the responses it stored (unless the request
said ``store: false``), the items it knows by id, and the encrypted reasoning it handed
out. ``api.validate`` is a :class:`~tests.fakes.server.FakeServer` ``check`` enforcing
what the real API enforces (its own error messages):

* ``previous_response_id`` names a stored response (``forget()`` drops them, as the
  server does when a response expires or is deleted);
* every ``function_call_output`` answers a ``function_call`` in the input or in the
  previous response, and every such call is answered;
* a reasoning item has a ``summary`` and is followed by what it led to (for a stored
  one: the item with the id that followed it); an item the server knows followed a
  reasoning item comes with that reasoning item before it;
* with ``store: false`` a reasoning item carries the encrypted content it was given;
* tools, ``tool_choice``, ``include`` and ``text.format`` (the Structured Outputs rules).

``api.answer(...)`` queues a response built from :func:`reasoning`, :func:`text` and
:func:`call` outputs: streamed as the API streams it (``response.created``,
``response.output_item.added``, ``response.output_text.delta``,
``response.function_call_arguments.delta``/``.done``, ``response.output_item.done``,
``response.completed``...) when the request asks for a stream, else one JSON body.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import openai_wire
from .server import Recorded, Reply

MODEL = "gpt-5-mini"
INCLUDABLE = {
    "reasoning.encrypted_content", "message.output_text.logprobs", "file_search_call.results",
    "web_search_call.action.sources", "code_interpreter_call.outputs", "message.input_image.image_url",
    "computer_call_output.output.image_url",
}  # fmt: skip


def error(status: int, message: str, *, param: str | None = None, code: str | None = None,
          type_: str = "invalid_request_error", headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=status, json={"error": {"message": message, "type": type_, "param": param, "code": code}},
                 headers=headers or {})


def usage(input_: int = 20, output: int = 8, cached: int = 0, reasoning_: int = 0,
          cache_write: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning_},
        "total_tokens": input_ + output,
    }


def reasoning(*summary: str) -> dict[str, Any]:
    """A reasoning output item with these summary parts (none: an empty summary)."""
    return {"kind": "reasoning", "summary": list(summary)}


def text(*pieces: str) -> dict[str, Any]:
    """An assistant message, streamed in these pieces."""
    return {"kind": "text", "pieces": list(pieces)}


def call(call_id: str, name: str, arguments: Any, pieces: int = 2) -> dict[str, Any]:
    """A function call; its arguments (a dict or raw text) stream in ``pieces`` parts."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    step = max(1, -(-len(raw) // pieces)) if raw else 1
    return {"kind": "call", "call_id": call_id, "name": name,
            "pieces": [raw[i: i + step] for i in range(0, len(raw), step)] or [""]}


@dataclass
class _Known:
    type: str
    reasoning: str | None  # the reasoning item this item followed, in its response
    follower: str | None = None  # a reasoning item's: the item that came next


@dataclass
class ResponsesAPI:
    """What a Responses server remembers; see the module docstring."""

    stored: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """response id -> the conversation it ends (its input chain and its output)."""
    items: dict[str, _Known] = field(default_factory=dict)
    encrypted: dict[str, str] = field(default_factory=dict)
    forgotten: list[str] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def forget(self, response_id: str | None = None) -> None:
        """Forget one stored response (default: all of them)."""
        with self._lock:
            gone = [response_id] if response_id is not None else list(self.stored)
            for rid in gone:
                self.stored.pop(rid, None)
                self.forgotten.append(rid)

    # -- the request rules -----------------------------------------------------------------

    def validate(self, rec: Recorded) -> Reply | None:
        body = rec.body if isinstance(rec.body, dict) else {}
        if not rec.path.endswith("/responses"):
            return error(404, f"Invalid URL (POST {rec.path})")
        if not body.get("model"):
            return error(400, "Missing required parameter: 'model'.", param="model")
        rejected = _check_options(body)
        if rejected is not None:
            return rejected
        prior: list[dict[str, Any]] = []
        previous = body.get("previous_response_id")
        if previous is not None:
            with self._lock:
                known = self.stored.get(previous)
            if known is None:
                return error(400, f"Previous response with id '{previous}' not found.",
                             param="previous_response_id", code="previous_response_not_found")
            prior = known
        raw = body.get("input")
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
        if not isinstance(items, list):
            return error(400, "Missing required parameter: 'input'.", param="input")
        return self._check_items(prior, items, store=body.get("store", True) is not False)

    def _check_items(self, prior: list[dict[str, Any]], items: list[dict[str, Any]], store: bool) -> Reply | None:
        calls = [i["call_id"] for i in prior if i.get("type") == "function_call"]
        answered = {i["call_id"] for i in prior if i.get("type") == "function_call_output"}
        seen_reasoning: list[str] = []
        for n, item in enumerate(items):
            kind = item.get("type", "message")
            if kind == "function_call":
                for key in ("call_id", "name", "arguments"):
                    if not isinstance(item.get(key), str):
                        return error(400, f"Missing required parameter: 'input[{n}].{key}'.", param=f"input[{n}].{key}")
                calls.append(item["call_id"])
            elif kind == "function_call_output":
                if item.get("call_id") not in calls:
                    return error(400, f"No tool call found for function call output with call_id "
                                      f"{item.get('call_id')}.", param="input")
                answered.add(item["call_id"])
            elif kind == "reasoning":
                rejected = self._check_reasoning(n, item, items, store)
                if rejected is not None:
                    return rejected
                seen_reasoning.append(item["id"])
            elif kind == "message":
                if item.get("role") not in ("user", "assistant", "system", "developer"):
                    return error(400, f"Invalid value: '{item.get('role')}'. Supported values are: 'assistant', "
                                      f"'system', 'developer', and 'user'.", param=f"input[{n}].role")
                if item.get("role") == "user":
                    seen_reasoning = []
            else:
                return error(400, f"Invalid value: '{kind}'.", param=f"input[{n}].type")
            known = self.items.get(item.get("id") or "") if store else None
            if known is not None and known.reasoning is not None and known.reasoning not in seen_reasoning:
                return error(400, f"Item '{item['id']}' of type '{known.type}' was provided without its "
                                  f"required 'reasoning' item: '{known.reasoning}'.", param="input")
        unanswered = [c for c in calls if c not in answered]
        if unanswered:
            return error(400, f"No tool output found for function call {unanswered[0]}.", param="input")
        return None

    def _check_reasoning(self, n: int, item: dict[str, Any], items: list[dict[str, Any]], store: bool) -> Reply | None:
        rid = item.get("id")
        if not isinstance(item.get("summary"), list):
            return error(400, f"Missing required parameter: 'input[{n}].summary'.", param=f"input[{n}].summary")
        following = items[n + 1] if n + 1 < len(items) else None
        known = self.items.get(str(rid)) if store else None
        if following is None or following.get("type", "message") not in ("message", "function_call") or (
            following.get("role", "assistant") != "assistant"
        ) or (known is not None and known.follower is not None and following.get("id") != known.follower):
            return error(400, f"Item '{rid}' of type 'reasoning' was provided without its required following item.",
                         param="input")
        encrypted = item.get("encrypted_content")
        if encrypted is not None and self.encrypted.get(str(rid)) != encrypted:
            return error(400, f"The encrypted content for item {rid} could not be verified.",
                         param="input", code="invalid_encrypted_content")
        if encrypted is None and (not store or rid not in self.items):
            why = (" Items are not persisted when `store` is set to false. Try again with `store` set to true, "
                   "or remove this item from your input.") if not store else ""
            return error(404, f"Item with id '{rid}' not found.{why}", param="input")
        return None

    # -- answers ---------------------------------------------------------------------------

    def answer(self, *outputs: dict[str, Any], status: str = "completed", incomplete: str | None = None,
               usage_: dict[str, Any] | None = None, cut: bool = False,
               fail: tuple[str, str] | None = None, error_event: tuple[str, str] | None = None,
               hold: Any = None) -> Any:
        """A responder answering the next request with ``outputs``. ``status`` /
        ``incomplete`` set how it ended; ``cut`` ends the stream before the response's
        last event; ``fail`` = (code, message) ends it with ``response.failed``,
        ``error_event`` = (code, message) with an ``error`` event; ``hold`` (a
        :class:`~tests.fakes.server.Trickle` or ``threading.Event``) pauses the stream
        after its first output item."""

        def respond(rec: Recorded) -> Reply:
            body = rec.body or {}
            n = next(self._ids)
            response = self._build(n, body, outputs, status, incomplete, usage_)
            if body.get("stream"):
                events = _events(response, outputs, cut, fail, error_event)
                if hold is not None:
                    after = next(i for i, (name, _) in enumerate(events) if name == "response.output_item.done")
                    events.insert(after + 1, (None, hold))
                return Reply(events=events)
            return Reply(json=response)

        return respond

    def _build(self, n: int, body: dict[str, Any], outputs: Sequence[dict[str, Any]], status: str,
               incomplete: str | None, usage_: dict[str, Any] | None) -> dict[str, Any]:
        encrypt = "reasoning.encrypted_content" in (body.get("include") or [])
        store = body.get("store", True) is not False
        out: list[dict[str, Any]] = []
        last_reasoning: str | None = None
        with self._lock:
            for k, spec in enumerate(outputs):
                item = _item(n, k, spec)
                if item["type"] == "reasoning":
                    last_reasoning = item["id"]
                    secret = f"gAAAAB-sealed-{item['id']}"
                    self.encrypted[item["id"]] = secret
                    if encrypt:
                        item["encrypted_content"] = secret
                if store:
                    follows = None if item["type"] == "reasoning" else last_reasoning
                    self.items[item["id"]] = _Known(item["type"], follows)
                    if out and out[-1]["type"] == "reasoning":
                        self.items[out[-1]["id"]].follower = item["id"]
                out.append(item)
            previous = body.get("previous_response_id")
            raw = body.get("input")
            inputs = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
            if store:
                self.stored[f"resp_{n}"] = [*self.stored.get(previous or "", []), *inputs, *out]
        return {
            "id": f"resp_{n}", "object": "response", "created_at": 1_700_000_000 + n,
            "model": body.get("model", MODEL), "status": status, "output": out, "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []), "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": body.get("instructions"), "metadata": {}, "temperature": None, "top_p": None,
            "previous_response_id": body.get("previous_response_id"), "store": store, "usage": usage_ or usage(),
        }


def _check_options(body: dict[str, Any]) -> Reply | None:
    tools = body.get("tools") or []
    for n, tool in enumerate(tools):
        if tool.get("type") != "function":
            return error(400, f"Invalid value: '{tool.get('type')}'.", param=f"tools[{n}].type")
        if not tool.get("name") or not isinstance(tool.get("parameters"), dict):
            return error(400, f"Missing required parameter: 'tools[{n}].name' or 'tools[{n}].parameters'.",
                         param=f"tools[{n}]")
    choice = body.get("tool_choice")
    if choice is not None and not tools and choice != "none":
        return error(400, "Tool choice requires tools to be specified.", param="tool_choice")
    if isinstance(choice, dict) and choice.get("name") not in [t["name"] for t in tools]:
        return error(400, f"Tool choice '{choice.get('name')}' not found in 'tools' parameter.", param="tool_choice")
    unknown = [i for i in body.get("include") or [] if i not in INCLUDABLE]
    if unknown:
        return error(400, f"Invalid value: '{unknown[0]}'.", param="include")
    if "instructions" in body and not isinstance(body["instructions"], str):
        return error(400, "Invalid type for 'instructions': expected a string.", param="instructions")
    if "stream_options" in body and not body.get("stream"):
        return error(400, "stream_options may only be set when stream is true.", param="stream_options")
    fmt = (body.get("text") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}
        return openai_wire._check_response_format({"type": "json_schema", "json_schema": spec})
    return None


def _item(n: int, k: int, spec: dict[str, Any]) -> dict[str, Any]:
    if spec["kind"] == "reasoning":
        return {"type": "reasoning", "id": f"rs_{n}_{k}", "status": "completed",
                "summary": [{"type": "summary_text", "text": t} for t in spec["summary"]]}
    if spec["kind"] == "text":
        content = [{"type": "output_text", "text": "".join(spec["pieces"]), "annotations": [], "logprobs": []}]
        return {"type": "message", "id": f"msg_{n}_{k}", "role": "assistant", "status": "completed",
                "content": content}
    return {"type": "function_call", "id": f"fc_{n}_{k}", "call_id": spec["call_id"], "name": spec["name"],
            "arguments": "".join(spec["pieces"]), "status": "completed"}


def _events(response: dict[str, Any], outputs: Sequence[dict[str, Any]], cut: bool,
            fail: tuple[str, str] | None, error_event: tuple[str, str] | None) -> list[tuple[str | None, Any]]:
    seq = itertools.count()
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": next(seq), **data}))

    start = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for index, (item, spec) in enumerate(zip(response["output"], outputs, strict=True)):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index,
                 item={**item, "summary": [], "status": "in_progress"})
            for s, part in enumerate(spec["summary"]):
                emit("response.reasoning_summary_part.added", **where, summary_index=s,
                     part={"type": "summary_text", "text": ""})
                emit("response.reasoning_summary_text.delta", **where, summary_index=s, delta=part)
                emit("response.reasoning_summary_text.done", **where, summary_index=s, text=part)
                emit("response.reasoning_summary_part.done", **where, summary_index=s,
                     part={"type": "summary_text", "text": part})
        elif item["type"] == "message":
            emit("response.output_item.added", output_index=index,
                 item={**item, "content": [], "status": "in_progress"})
            emit("response.content_part.added", **where, content_index=0,
                 part={"type": "output_text", "text": "", "annotations": []})
            for piece in spec["pieces"]:
                emit("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, content_index=0, text=item["content"][0]["text"], logprobs=[])
            emit("response.content_part.done", **where, content_index=0, part=item["content"][0])
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "arguments": "", "status": "in_progress"})
            for piece in spec["pieces"]:
                emit("response.function_call_arguments.delta", **where, delta=piece)
            emit("response.function_call_arguments.done", **where, arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    if cut:
        pass  # the body ends here, without the response's last event
    elif error_event is not None:
        emit("error", code=error_event[0], message=error_event[1], param=None)
    elif fail is not None:
        emit("response.failed", response={**response, "status": "failed",
                                          "error": {"code": fail[0], "message": fail[1]}})
    else:
        emit(f"response.{'incomplete' if response['status'] == 'incomplete' else 'completed'}", response=response)
    return events
