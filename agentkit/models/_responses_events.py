"""OpenAI Responses API output as agentkit stream events (private).

One reader serves a streamed response (its server-sent events, in order) and a whole
one (its ``output`` items): output items become reasoning, text and tool-call events as
they finish; the response's usage and status end it. An ``error`` event or a failed
response raises :class:`ResponseFailed`, which the adapter's error seam translates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import CancelledError, ProviderUnavailableError
from ..messages import ReasoningPart
from ..usage import Usage
from ._common import parse_tool_arguments
from ._responses_items import encode_token
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

_INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content-filter"}
# error codes of a failed response or an error event, as the error seam's types
_CODE_TYPES = {"rate_limit_exceeded": "rate_limit_error", "server_error": "server_error",
               "internal_error": "server_error"}


class ResponseFailed(Exception):
    """An ``error`` event, or a response whose status is ``failed``: shaped like an SDK
    ``APIError`` (``body``, ``message``, no status) for the error seam."""

    status_code = None
    response = None

    def __init__(self, message: str, code: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.body = {"message": message, "code": code, "type": _CODE_TYPES.get(code or "")}


class ResponseReader:
    """Assembles one response into stream events. ``chain`` (server-side state on) is
    recorded in the response's receipt; a receipt is also written whenever the response
    holds reasoning, whose items the API pairs with the items that followed them."""

    def __init__(self, chain: str | None) -> None:
        self.chain = chain
        self.response_id: str | None = None
        self.streamed: set[str] = set()  # items whose text or reasoning came as deltas
        self.summary_at: tuple[str, int] | None = None
        self.arguments: dict[str, str] = {}
        self.messages: list[str] = []
        self.calls: dict[str, str] = {}
        self.reasoned = False
        self.has_calls = False
        self.events = 0
        self.final: Any = None

    # -- a streamed response -------------------------------------------------------------

    def read_stream(self, stream: Any, cancel: Any) -> Iterator[StreamEvent]:
        try:
            for event in stream:
                if cancel.cancelled:
                    raise CancelledError(cancel.reason)
                self.events += 1
                yield from self._on_event(event)
        finally:
            stream.close()
        if self.events == 0:
            raise ProviderUnavailableError(
                "the OpenAI Responses API answered 200 but the stream ended without any event; the "
                "server may have crashed or cut the connection", provider="openai", status_code=200,
            )
        if self.final is None:
            raise ProviderUnavailableError(
                "the OpenAI Responses stream ended before response.completed; the answer may be cut off",
                provider="openai",
            )
        yield from self._finish(self.final)

    def _on_event(self, event: Any) -> Iterator[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind in ("response.created", "response.in_progress"):
            self.response_id = getattr(event.response, "id", None) or self.response_id
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if event.delta:
                self.streamed.add(event.item_id)
                yield TextDelta(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta:
                at = (event.item_id, getattr(event, "summary_index", 0))
                if self.summary_at is not None and self.summary_at[0] == at[0] and self.summary_at != at:
                    yield ReasoningDelta("\n\n")  # the next summary part of the same item
                self.summary_at = at
                self.streamed.add(event.item_id)
                yield ReasoningDelta(event.delta)
        elif kind == "response.function_call_arguments.done":
            self.arguments[event.item_id] = event.arguments
        elif kind == "response.output_item.done":
            yield from self.item(event.item)
        elif kind in ("response.completed", "response.incomplete"):
            self.final = event.response
        elif kind == "response.failed":
            raise _failure(event.response)
        elif kind == "error":
            raise ResponseFailed(f"{event.message}", getattr(event, "code", None))

    # -- a whole response ----------------------------------------------------------------

    def read_response(self, response: Any) -> Iterator[StreamEvent]:
        if getattr(response, "status", None) == "failed":
            raise _failure(response)
        self.response_id = response.id
        for item in getattr(response, "output", None) or ():
            yield from self.item(item)
        yield from self._finish(response)

    # -- items and the end ---------------------------------------------------------------

    def item(self, item: Any) -> Iterator[StreamEvent]:
        kind = getattr(item, "type", None)
        item_id: str = getattr(item, "id", None) or ""
        if kind == "reasoning":
            self.reasoned = True
            summary = [s.text for s in getattr(item, "summary", None) or ()]
            text = "\n\n".join(summary) or "".join(c.text for c in getattr(item, "content", None) or ())
            if text and item_id not in self.streamed:
                yield ReasoningDelta(text)
            token: dict[str, Any] = {"id": item_id, "summary": summary}
            if getattr(item, "encrypted_content", None):
                token["encrypted_content"] = item.encrypted_content
            yield ReasoningDone(ReasoningPart(text=text, signature=encode_token(token)))
        elif kind == "message":
            self.messages.append(item_id)
            if item_id not in self.streamed:
                text = "".join(getattr(c, "text", None) or getattr(c, "refusal", None) or ""
                               for c in item.content or ())
                if text:
                    yield TextDelta(text)
        elif kind == "function_call":
            self.has_calls = True
            if item_id:
                self.calls[item.call_id] = item_id
            value, error = parse_tool_arguments(item.arguments or self.arguments.get(item_id, ""))
            yield ToolCallEvent(tool_call_id=item.call_id, tool_name=item.name, input=value, input_error=error)
        # other items (built-in tools the adapter does not offer) are not agentkit's

    def _finish(self, response: Any) -> Iterator[StreamEvent]:
        response_id = getattr(response, "id", None) or self.response_id
        if response_id and (self.reasoned or self.chain is not None):
            receipt: dict[str, Any] = {"response_id": response_id, "messages": self.messages, "calls": self.calls}
            if self.chain is not None:
                receipt["chain"] = self.chain
            yield ReasoningDone(ReasoningPart(signature=encode_token(receipt)))
        if getattr(response, "usage", None) is not None:
            yield UsageEvent(usage_of(response.usage))
        status = getattr(response, "status", None)
        if status == "incomplete":
            reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
            yield FinishEvent(_INCOMPLETE.get(reason or "", "other"), reason or status)
        else:
            yield FinishEvent("tool-calls" if self.has_calls else "stop", status)


def usage_of(u: Any) -> Usage:
    """Responses usage: ``input_tokens`` include the cached ones, ``output_tokens`` the
    reasoning ones."""
    inp = int(getattr(u, "input_tokens", 0) or 0)
    out = int(getattr(u, "output_tokens", 0) or 0)
    details = getattr(u, "input_tokens_details", None)
    out_details = getattr(u, "output_tokens_details", None)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=int(getattr(u, "total_tokens", 0) or 0) or inp + out,
        cache_read_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        cache_write_tokens=int(getattr(details, "cache_write_tokens", 0) or 0),
        reasoning_tokens=int(getattr(out_details, "reasoning_tokens", 0) or 0),
    )


def _failure(response: Any) -> ResponseFailed:
    error = getattr(response, "error", None)
    message = getattr(error, "message", None) or "the response failed without a message"
    return ResponseFailed(message, getattr(error, "code", None))
