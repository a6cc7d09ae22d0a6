"""Gemini's streamed answer as agentkit stream events (private): text, thought summaries
(:class:`ReasoningDelta`, closed by a :class:`ReasoningDone`), thought signatures (a signed
:class:`ReasoningDone` before the part they came on; see :mod:`._gemini_messages`),
function calls with ids made up where Gemini gave none, usage and the finish reason."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from ..cancel import CancelToken
from ..errors import CancelledError, ProviderUnavailableError
from ..messages import ReasoningPart
from ..usage import Usage
from ._gemini_messages import GENERATED_ID_PREFIX, encode_signature
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
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "IMAGE_PROHIBITED_CONTENT": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
}


def gemini_events(chunks: Iterator[Any], cancel: CancelToken) -> Iterator[StreamEvent]:
    state = _StreamState()
    for chunk in chunks:
        if cancel.cancelled:
            raise CancelledError(cancel.reason)
        yield from state.feed(chunk)
    yield from state.finish()


class _StreamState:
    """Assembles ``GenerateContentResponse`` chunks into agentkit stream events."""

    def __init__(self) -> None:
        self.chunks = 0
        self.thoughts: list[str] = []
        self.calls = 0
        self.finish_reason: str | None = None
        self.blocked: str | None = None
        self.usage: Any = None

    def feed(self, chunk: Any) -> Iterator[StreamEvent]:
        self.chunks += 1
        if getattr(chunk, "usage_metadata", None) is not None:
            self.usage = chunk.usage_metadata  # cumulative within one response: keep the last
        feedback = getattr(chunk, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            self.blocked = _name(feedback.block_reason)
        candidates = getattr(chunk, "candidates", None) or []
        if not candidates:
            return
        candidate = candidates[0]
        content = getattr(candidate, "content", None)
        for part in (getattr(content, "parts", None) or []) if content is not None else []:
            yield from self._part(part)
        if getattr(candidate, "finish_reason", None):
            self.finish_reason = _name(candidate.finish_reason)

    def _part(self, part: Any) -> Iterator[StreamEvent]:
        signature = getattr(part, "thought_signature", None)
        if getattr(part, "thought", None):
            if part.text:
                self.thoughts.append(part.text)
                yield ReasoningDelta(part.text)
            if signature:  # signed summary: it goes back as it is
                yield ReasoningDone(ReasoningPart(text="".join(self.thoughts), signature=encode_signature(signature)))
                self.thoughts = []
            return
        call = getattr(part, "function_call", None)
        text = getattr(part, "text", None)
        if call is None and text is None and not signature:
            return  # code execution, inline images and the like are not read
        yield from self._close_thoughts()
        if signature:  # the signature of the part that follows it in the message
            yield ReasoningDone(ReasoningPart(text="", signature=encode_signature(signature)))
        if call is not None:
            self.calls += 1
            args = call.args if isinstance(call.args, dict) else {}
            # made up once and stored with the call: unique in the session, whatever the
            # server's responseId (a proxy or cache may repeat one)
            call_id = call.id or f"{GENERATED_ID_PREFIX}{uuid.uuid4().hex[:24]}"
            yield ToolCallEvent(tool_call_id=call_id, tool_name=call.name or "", input=args)
        elif text:
            yield TextDelta(text)

    def _close_thoughts(self) -> Iterator[StreamEvent]:
        if self.thoughts:
            yield ReasoningDone(ReasoningPart(text="".join(self.thoughts)))
            self.thoughts = []

    def finish(self) -> Iterator[StreamEvent]:
        if self.chunks == 0:
            raise ProviderUnavailableError(
                "the Gemini API answered 200 but the stream ended without any chunk; the server may "
                "have crashed or cut the connection",
                provider="google", status_code=200,
            )
        yield from self._close_thoughts()
        if self.usage is not None:
            yield UsageEvent(_usage(self.usage))
        if self.finish_reason is None and self.blocked is not None:
            yield FinishEvent("content-filter", self.blocked)  # the prompt itself was blocked
            return
        if self.finish_reason is None:
            raise ProviderUnavailableError(
                "the Gemini stream ended before the model finished (no chunk carried a finishReason); "
                "the answer may be cut off",
                provider="google",
            )
        reason: FinishReason = _FINISH.get(self.finish_reason, "other")
        if reason == "stop" and self.calls:
            reason = "tool-calls"  # Gemini says STOP after function calls
        yield FinishEvent(reason, self.finish_reason)


def _name(value: Any) -> str:
    """An SDK enum (or a string the SDK did not know) as the API's name for it."""
    return str(getattr(value, "value", value))


def _usage(u: Any) -> Usage:
    def count(name: str) -> int:
        return int(getattr(u, name, None) or 0)

    prompt = count("prompt_token_count") + count("tool_use_prompt_token_count")
    thoughts = count("thoughts_token_count")
    output = count("candidates_token_count") + thoughts  # candidates exclude the thinking
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=count("total_token_count") or prompt + output,
        cache_read_tokens=count("cached_content_token_count"),
        reasoning_tokens=thoughts,
    )
