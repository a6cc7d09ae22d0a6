"""Bedrock Converse answers as agentkit stream events: a ``Converse`` response, the
events of a ``ConverseStream`` (``contentBlockStart`` / ``contentBlockDelta`` /
``contentBlockStop``, ``messageStop``, ``metadata``), and the cancel that shuts a blocked
stream's socket down (private)."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..cancel import CancelToken
from ..errors import CancelledError, ProviderUnavailableError
from ..messages import ReasoningPart
from ..usage import Usage
from ._common import parse_tool_arguments
from .base import (
    FinishEvent,
    FinishReason,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content-filter",
    "content_filtered": "content-filter",
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
}


# -- responses -------------------------------------------------------------------------


def _usage(raw: Mapping[str, Any] | None) -> Usage:
    """Converse usage: ``inputTokens`` leaves out the tokens read from or written to the
    prompt cache; agentkit's ``input_tokens`` counts them."""
    raw = raw or {}
    read = int(raw.get("cacheReadInputTokens") or 0)
    write = int(raw.get("cacheWriteInputTokens") or 0)
    total_in = int(raw.get("inputTokens") or 0) + read + write
    output = int(raw.get("outputTokens") or 0)
    return Usage(input_tokens=total_in, output_tokens=output, total_tokens=total_in + output,
                 cache_read_tokens=read, cache_write_tokens=write)


def _finish(stop_reason: str | None) -> FinishEvent:
    return FinishEvent(_FINISH.get(stop_reason or "", "other"), stop_reason)


def converse_events(response: Mapping[str, Any]) -> Iterator[StreamEvent]:
    """A whole ``Converse`` answer as the events a stream of it would have given."""
    message = (response.get("output") or {}).get("message") or {}
    for block in message.get("content") or []:
        if "text" in block:
            if block["text"]:
                yield TextDelta(block["text"])
        elif "reasoningContent" in block:
            part = _reasoning_part(block["reasoningContent"])
            if part.text:
                yield ReasoningDelta(part.text)
            yield ReasoningDone(part)
        elif "toolUse" in block:
            use = block["toolUse"]
            value = use.get("input")
            error = None if isinstance(value, dict) else f"the arguments must be a JSON object, got {value!r}"
            yield ToolCallEvent(tool_call_id=use["toolUseId"], tool_name=use["name"],
                                input=value if error is None else json.dumps(value), input_error=error)
    yield UsageEvent(_usage(response.get("usage")))
    yield _finish(response.get("stopReason"))


def _reasoning_part(content: Mapping[str, Any]) -> ReasoningPart:
    if "redactedContent" in content:
        return ReasoningPart(text="", redacted_data=base64.b64encode(content["redactedContent"]).decode("ascii"))
    text_block = content.get("reasoningText") or {}
    return ReasoningPart(text=text_block.get("text", ""), signature=text_block.get("signature") or None)


class _Block:
    __slots__ = ("kind", "id", "name", "parts", "signature", "redacted")

    def __init__(self, kind: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.id = call_id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""
        self.redacted = b""


def stream_events(stream: Any, cancel: CancelToken) -> Iterator[StreamEvent]:
    """The events of a ``ConverseStream`` answer (botocore's ``EventStream``): text and
    reasoning as they come, a tool call or a reasoning block when its block stops, then
    usage (from ``metadata``) and the finish (from ``messageStop``, which must come)."""
    blocks: dict[int, _Block] = {}
    stop_reason: str | None = None
    usage: Usage | None = None
    seen = 0
    stopped = False
    for event in stream:
        if cancel.cancelled:
            raise CancelledError(cancel.reason)
        seen += 1
        if "contentBlockStart" in event:
            body = event["contentBlockStart"]
            use = (body.get("start") or {}).get("toolUse")
            if use is not None:
                blocks[body["contentBlockIndex"]] = _Block("tool", use["toolUseId"], use["name"])
        elif "contentBlockDelta" in event:
            body = event["contentBlockDelta"]
            delta = body.get("delta") or {}
            index = body["contentBlockIndex"]
            if delta.get("text"):
                yield TextDelta(delta["text"])
            elif "toolUse" in delta:
                blocks.setdefault(index, _Block("tool")).parts.append(delta["toolUse"].get("input", ""))
            elif "reasoningContent" in delta:
                yield from _reasoning_delta(blocks.setdefault(index, _Block("reasoning")), delta["reasoningContent"])
        elif "contentBlockStop" in event:
            done = blocks.pop(event["contentBlockStop"]["contentBlockIndex"], None)
            if done is not None:
                yield _finish_block(done)
        elif "messageStop" in event:
            stop_reason = event["messageStop"].get("stopReason")
            stopped = True
        elif "metadata" in event:
            usage = _usage(event["metadata"].get("usage"))
    if seen == 0:
        raise ProviderUnavailableError(
            "the Bedrock API answered 200 but the stream ended without any event", provider="bedrock",
            status_code=200,
        )
    if not stopped:
        raise ProviderUnavailableError(
            "the Bedrock stream ended before messageStop; the answer may be cut off", provider="bedrock"
        )
    yield UsageEvent(usage or Usage())
    yield _finish(stop_reason)


def _reasoning_delta(block: _Block, delta: Mapping[str, Any]) -> Iterator[StreamEvent]:
    if delta.get("text"):
        block.parts.append(delta["text"])
        yield ReasoningDelta(delta["text"])
    if delta.get("signature"):
        block.signature += delta["signature"]
    if delta.get("redactedContent"):
        block.redacted += delta["redactedContent"]


def _finish_block(block: _Block) -> StreamEvent:
    if block.kind == "reasoning":
        if block.redacted:
            return ReasoningDone(ReasoningPart(text="", redacted_data=base64.b64encode(block.redacted).decode("ascii")))
        return ReasoningDone(ReasoningPart(text="".join(block.parts), signature=block.signature or None))
    value, error = parse_tool_arguments("".join(block.parts))
    return ToolCallEvent(tool_call_id=block.id, tool_name=block.name, input=value, input_error=error)


class StreamInterrupter:
    """Shuts down the socket under a ConverseStream response, from the cancelling thread,
    so a read blocked on a silent server returns at once (the reading thread then closes
    the response). Never after the response was closed: its connection may be back in the
    pool, serving another request."""

    def __init__(self, stream: Any) -> None:
        self._lock = threading.Lock()
        self._closed = False
        raw = getattr(stream, "_raw_stream", None)  # the urllib3 response under botocore's EventStream
        connection = getattr(raw, "_connection", None) or getattr(raw, "connection", None)
        sock = getattr(connection, "sock", None)
        self._sock = sock if isinstance(sock, socket.socket) else None
        if self._sock is not None:  # the response says when it lets go of its connection
            for name in ("release_conn", "close"):
                setattr(raw, name, self._marking(getattr(raw, name)))

    def _marking(self, original: Callable[[], None]) -> Callable[[], None]:
        def wrapped() -> None:
            with self._lock:
                self._closed = True
            original()

        return wrapped

    def __call__(self) -> None:
        with self._lock:
            if self._sock is None or self._closed:
                return
            try:
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
