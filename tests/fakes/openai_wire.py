"""Chat Completions wire format, as the OpenAI API documents it.

Builders for ``chat.completion`` bodies, ``chat.completion.chunk`` server-sent-event
streams (ending in ``data: [DONE]``) and error bodies, to queue on a FakeServer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .server import Recorded, Reply

MODEL = "gpt-4.1-mini"


def usage(prompt: int = 11, completion: int = 7, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


def chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    *,
    choices: bool = True,
    usage_: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": None,
        "choices": [],
        "usage": usage_,
    }
    if choices:
        body["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
    return body


def sse(
    chunks: Sequence[dict[str, Any]], *, done: bool = True, status: int = 200, hang: float = 0.0
) -> Reply:
    events: list[tuple[str | None, Any]] = [(None, c) for c in chunks]
    if done:
        events.append((None, "[DONE]"))
    return Reply(status=status, events=events, hang=hang)


def text_stream(
    *pieces: str,
    finish: str = "stop",
    usage_: dict[str, Any] | None = None,
    reasoning: Sequence[str] = (),
    reasoning_field: str = "reasoning_content",
    hang: float = 0.0,
) -> Reply:
    """A streamed text answer, one chunk per piece, then finish and usage chunks."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({reasoning_field: r}) for r in reasoning]
    chunks += [chunk({"content": p}) for p in pieces]
    chunks.append(chunk({}, finish))
    chunks.append(chunk(choices=False, usage_=usage_ or usage()))
    return sse(chunks, hang=hang)


def tool_stream(
    calls: Sequence[tuple[str, str, Sequence[str]]],
    *,
    text: str = "",
    repeat_id_and_name: bool = False,
    usage_: dict[str, Any] | None = None,
    finish: str = "tool_calls",
) -> Reply:
    """Streamed tool calls: ``(id, name, argument fragments)`` each. Fragments of
    different calls interleave, as parallel calls do on the wire."""
    chunks = [chunk({"role": "assistant", "content": text or None})]
    for i, (cid, name, _frags) in enumerate(calls):
        first = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [first]}))
    longest = max((len(f) for _, _, f in calls), default=0)
    for j in range(longest):
        for i, (cid, name, frags) in enumerate(calls):
            if j >= len(frags):
                continue
            frag: dict[str, Any] = {"index": i, "function": {"arguments": frags[j]}}
            if repeat_id_and_name:
                frag = {
                    "index": i,
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": frags[j]},
                }
            chunks.append(chunk({"tool_calls": [frag]}))
    chunks.append(chunk({}, finish))
    chunks.append(chunk(choices=False, usage_=usage_ or usage()))
    return sse(chunks)


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[tuple[str, str, Any]] = (),
    finish: str | None = None,
    usage_: dict[str, Any] | None = None,
    reasoning: str | None = None,
) -> Reply:
    """A non-streamed ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for cid, name, args in tool_calls
        ]
    return Reply(
        json={
            "id": "chatcmpl-fake2",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish or ("tool_calls" if tool_calls else "stop"),
                }
            ],
            "usage": usage_ or usage(),
        }
    )


def error(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    return Reply(
        status=status,
        json={"error": {"message": message, "type": type_, "param": None, "code": code}},
        headers=headers or {},
    )


REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def is_reasoning_model(name: str) -> bool:
    return name.startswith(REASONING_MODELS)


def _check_reasoning_effort(body: dict[str, Any]) -> Reply | None:
    """``reasoning_effort`` as the API checks it: a known value, and a reasoning model."""
    if "reasoning_effort" not in body:
        return None
    effort = body["reasoning_effort"]
    if effort not in _EFFORTS:
        return error(400, f"Invalid value: '{effort}'. Supported values are: "
                          f"{', '.join(repr(e) for e in _EFFORTS)}.", code="invalid_value")
    if not is_reasoning_model(str(body.get("model", ""))):
        return error(400, "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                     code="unsupported_parameter")
    return None


def reject_null_content(rec: Recorded) -> Reply | None:
    """A validator like some OpenAI-compatible servers: an assistant message with
    ``content: null`` is a 400."""
    for m in (rec.body or {}).get("messages", []):
        if m.get("role") == "assistant" and "content" in m and m["content"] is None:
            return error(400, "assistant message content must be a string, got null")
    return None


def _unanswered(pending: list[str]) -> Reply:
    return error(
        400,
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        f"{', '.join(pending)}",
    )


def validate(rec: Recorded) -> Reply | None:
    """Request rules the Chat Completions API enforces (its own error messages): tool
    messages answer the tool calls of the assistant message right before them, every
    call gets an answer, and ``stream_options`` needs ``stream: true``."""
    body = rec.body or {}
    rejected = _check_reasoning_effort(body)
    if rejected is not None:
        return rejected
    if body.get("stream_options") is not None and not body.get("stream"):
        return error(400, "The 'stream_options' parameter is only allowed when 'stream' is set to true.")
    if "tool_choice" in body and not body.get("tools"):
        return error(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
    rejected = _check_response_format(body.get("response_format"))
    if rejected is not None:
        return rejected
    pending: list[str] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return error(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    "message with 'tool_calls'.",
                )
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return _unanswered(pending)
        if role == "assistant":
            if m.get("content") is None and not m.get("tool_calls"):
                return error(400, "Invalid value for 'content': expected a string, got null.")
            pending = [c["id"] for c in m.get("tool_calls") or []]
    if pending:
        return _unanswered(pending)
    return None


_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _check_response_format(fmt: Any) -> Reply | None:
    """The ``response_format`` rules of Structured Outputs: a known type; for
    ``json_schema`` a valid name and an object schema; with ``strict: true`` every object
    closed (``additionalProperties: false``) with all its properties required."""
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return error(400, f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object', and 'json_schema'.")
    if kind != "json_schema":
        return None
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not _SCHEMA_NAME.match(str(spec.get("name", ""))):
        return error(400, "Invalid 'response_format.json_schema.name': string does not match pattern "
                          "'^[a-zA-Z0-9_-]+$' (at most 64 characters).")
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return error(400, f"Invalid schema for response_format '{spec['name']}': schema must be a JSON Schema "
                          f"of 'type: \"object\"', got 'type: \"{(schema or {}).get('type')}\"'.")
    if spec.get("strict"):
        return _check_strict(spec["name"], schema, ())
    return None


def _check_strict(name: str, node: Any, context: tuple[str, ...]) -> Reply | None:
    if isinstance(node, list):
        for item in node:
            rejected = _check_strict(name, item, context)
            if rejected is not None:
                return rejected
        return None
    if not isinstance(node, dict):
        return None
    if node.get("type") == "object":
        if node.get("additionalProperties") is not False:
            return error(400, f"Invalid schema for response_format '{name}': In context={context}, "
                              f"'additionalProperties' is required to be supplied and to be false.")
        props = list(node.get("properties") or {})
        missing = [p for p in props if p not in (node.get("required") or [])]
        if missing:
            return error(400, f"Invalid schema for response_format '{name}': In context={context}, 'required' is "
                              f"required to be supplied and to be an array including every key in properties. "
                              f"Missing '{missing[0]}'.")
    for key in ("properties", "$defs"):
        for sub, value in (node.get(key) or {}).items():
            rejected = _check_strict(name, value, (*context, key, sub))
            if rejected is not None:
                return rejected
    for key in ("items", "anyOf"):
        if key in node:
            rejected = _check_strict(name, node[key], (*context, key))
            if rejected is not None:
                return rejected
    return None


_STRICT_FIELDS = {
    "model", "messages", "stream", "stream_options", "tools", "tool_choice", "temperature",
    "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "parallel_tool_calls",
    "n", "response_format", "user", "frequency_penalty", "presence_penalty",
}  # fmt: skip


def reject_unknown_fields(rec: Recorded) -> Reply | None:
    """A validator like the strict compatible servers (Groq, Cerebras): a body field they
    do not know is a 400 naming it."""
    for key in rec.body or {}:
        if key not in _STRICT_FIELDS:
            return Reply(
                status=400,
                json={"error": {"message": f"property '{key}' is unsupported", "type": "invalid_request_error"}},
            )
    return validate(rec)
