"""Anthropic Messages API wire format, as Anthropic documents it.

Builders for streamed answers (``message_start``, ``content_block_start`` /
``content_block_delta`` / ``content_block_stop``, ``message_delta``, ``message_stop``,
``ping`` and ``error`` events) and error bodies, plus a validator that enforces the
request rules the real API enforces (alternating roles, tool results answering the
previous turn's tool uses first, no empty or whitespace-only text, at most four
cache_control breakpoints, the extended-thinking constraints).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .server import Recorded, Reply

MODEL = "claude-sonnet-4-5"


def text(value: str, pieces: int = 2) -> tuple[str, Any]:
    return ("text", value, pieces)


def thinking(value: str, signature: str) -> tuple[str, Any]:
    return ("thinking", value, signature)


def redacted(data: str) -> tuple[str, Any]:
    return ("redacted_thinking", data)


def tool_use(call_id: str, name: str, fragments: Sequence[str]) -> tuple[str, Any]:
    return ("tool_use", call_id, name, list(fragments))


def _split(value: str, pieces: int) -> list[str]:
    step = max(1, -(-len(value) // max(1, pieces)))
    return [value[i : i + step] for i in range(0, len(value), step)] or [""]


def stream(
    *blocks: tuple[Any, ...],
    stop_reason: str | None = None,
    input_tokens: int = 25,
    output_tokens: int = 12,
    cache_read: int = 0,
    cache_write: int = 0,
    thinking_tokens: int | None = None,
    message_stop: bool = True,
    pings: bool = True,
) -> Reply:
    """A streamed answer made of content blocks (see the builders above)."""
    events: list[tuple[str | None, Any]] = []
    events.append(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake01",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": cache_write,
                        "cache_read_input_tokens": cache_read,
                    },
                },
            },
        )
    )
    if pings:
        events.append(("ping", {"type": "ping"}))
    has_tool = False
    for index, block in enumerate(blocks):
        kind = block[0]
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _split(block[1], block[2])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _split(block[1], 2)]
            deltas.append({"type": "signature_delta", "signature": block[2]})
        elif kind == "redacted_thinking":
            start = {"type": "redacted_thinking", "data": block[1]}
            deltas = []
        else:
            has_tool = True
            start = {"type": "tool_use", "id": block[1], "name": block[2], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": f} for f in block[3]]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        )
        for d in deltas:
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_reason or ("tool_use" if has_tool else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": output_tokens, **(
                    {} if thinking_tokens is None else {"output_tokens_details": {"thinking_tokens": thinking_tokens}}
                )},
            },
        )
    )
    if message_stop:
        events.append(("message_stop", {"type": "message_stop"}))
    return Reply(events=events, headers={"request-id": "req_fake"})


def error(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        json={"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_fake"},
        headers=headers or {},
    )


def stream_error(type_: str, message: str) -> Reply:
    """A 200 stream that fails right after ``message_start`` with an ``error`` event."""
    start = stream().events[0]  # type: ignore[index]
    return Reply(events=[start, ("error", {"type": "error", "error": {"type": type_, "message": message}})])


def _bad(message: str) -> Reply:
    return error(400, "invalid_request_error", message)


def validate(rec: Recorded) -> Reply | None:
    """The request rules of the Messages API that the adapter must respect."""
    body = rec.body or {}
    if "max_tokens" not in body:
        return _bad("max_tokens: Field required")
    messages = body.get("messages") or []
    if not messages or messages[0]["role"] != "user":
        return _bad("messages: first message must use the user role")
    rejected = _check_thinking(body) or _check_effort(body)
    if rejected is not None:
        return rejected
    rejected = _check_tools(body)
    if rejected is not None:
        return rejected
    breakpoints = 1 if body.get("cache_control") else 0  # top-level automatic caching counts
    if isinstance(body.get("system"), list):
        for b in body["system"]:
            if not b.get("text", "").strip():
                return _bad("system: text content blocks must contain non-whitespace text")
        breakpoints += sum(1 for b in body["system"] if "cache_control" in b)
    breakpoints += sum(1 for t in body.get("tools") or [] if "cache_control" in t)
    previous_tool_uses: list[str] = []
    for i, m in enumerate(messages):
        if i and messages[i - 1]["role"] == m["role"]:
            return _bad(f"messages: roles must alternate between user and assistant (message {i})")
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not content:
            return _bad(f"messages.{i}: content must not be empty")
        has_text = any(b["type"] == "text" and b["text"].strip() for b in content)
        for j, b in enumerate(content):
            breakpoints += "cache_control" in b
            if b["type"] == "tool_use" and not re.match(r"^[a-zA-Z0-9_-]+$", b["id"]):
                return _bad(f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
            if b["type"] == "text" and not b["text"]:
                return _bad(f"messages.{i}: text content blocks must be non-empty")
            if b["type"] == "text" and not has_text:
                return _bad("messages: text content blocks must contain non-whitespace text")
            if b["type"] == "tool_result" and b.get("is_error") and not b.get("content"):
                return _bad(f"messages.{i}.content.0.tool_result: content cannot be empty if `is_error` is true")
            if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                if any(x["type"] == "text" and not x["text"] for x in b["content"]):
                    return _bad(f"messages.{i}: text content blocks must be non-empty")
            if b["type"] == "thinking" and not b.get("signature"):
                return _bad(f"messages.{i}: thinking blocks need their signature")
        if m["role"] == "user" and previous_tool_uses:
            n = len(previous_tool_uses)
            head = content[:n]
            ids = [b.get("tool_use_id") for b in head if b["type"] == "tool_result"]
            if ids != previous_tool_uses:
                return _bad(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {previous_tool_uses}"
                )
        previous_tool_uses = (
            [b["id"] for b in content if b["type"] == "tool_use"] if m["role"] == "assistant" else []
        )
    if breakpoints > 4:
        return _bad(f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.")
    return None


def _check_tools(body: dict[str, Any]) -> Reply | None:
    """Tool definitions and the tool choice: names match ``^[a-zA-Z0-9_-]{1,64}$``, every
    ``input_schema`` is an object schema, and a forced tool is one of the tools."""
    names = []
    for i, t in enumerate(body.get("tools") or []):
        if not re.match(r"^[a-zA-Z0-9_-]{1,64}$", str(t.get("name", ""))):
            return _bad(f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if (t.get("input_schema") or {}).get("type") != "object":
            return _bad(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        names.append(t["name"])
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if choice.get("type") not in ("auto", "any", "tool", "none"):
        return _bad("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
    if choice["type"] in ("any", "tool") and not names:
        return _bad("tool_choice: tool_choice may only be specified while providing tools.")
    if choice["type"] == "tool" and choice.get("name") not in names:
        return _bad(f"Tool '{choice.get('name')}' not found in provided tools")
    return None


def _check_thinking(body: dict[str, Any]) -> Reply | None:
    """The extended-thinking rules: budget at least 1024 and below max_tokens, no forced
    tool use, no sampling changes, and while a tool loop runs the last assistant turn
    starts with its (signed or redacted) thinking block."""
    thinking = body.get("thinking") or {}
    if thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens", 0)
    if budget < 1024:
        return _bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if budget >= body["max_tokens"]:
        return _bad("`max_tokens` must be greater than `thinking.budget_tokens`.")
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return _bad("Thinking may not be enabled when tool_choice forces tool use.")
    if body.get("temperature") not in (None, 1):
        return _bad("`temperature` may only be set to 1 when thinking is enabled.")
    if body.get("top_p") is not None and body["top_p"] < 0.95:
        return _bad("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.")
    if body.get("top_k") is not None:
        return _bad("`top_k` must be unset when thinking is enabled.")
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    answering_tools = last.get("role") == "user" and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last.get("content") or []
    )
    if answering_tools and len(messages) >= 2:
        first = messages[-2]["content"][0]
        if first["type"] not in ("thinking", "redacted_thinking"):
            return _bad(
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{first['type']}`. When `thinking` is enabled, a "
                f"final `assistant` message must start with a thinking block (preceeding the "
                f"lastmost set of `tool_use` and `tool_result` blocks)."
            )
    return None


def _check_effort(body: dict[str, Any]) -> Reply | None:
    """``output_config.effort``: one of the API's levels."""
    config = body.get("output_config")
    if config is None:
        return None
    effort = config.get("effort")
    if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
        return _bad("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
    return None


def dumps(value: Any) -> str:
    return json.dumps(value)
