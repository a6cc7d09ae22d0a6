"""agentkit messages as Gemini ``contents`` (private).

Gemini's rules: roles are ``user`` and ``model`` and alternate (consecutive messages of
one role merge); the system prompt is a separate ``system_instruction``; tool results are
``function_response`` parts in the user turn right after the model turn whose
``function_call`` parts they answer, one per call, in the calls' order and named as
they are (Gemini matches them by name and order: its calls often carry no id).

Thought signatures. Gemini signs its thinking: a ``thought_signature`` comes on a part
(a function call, a text part, or a thought summary) and must go back on the same part.
The adapter records it as a :class:`~agentkit.messages.ReasoningPart` whose
``signature`` is :data:`SIGNATURE_PREFIX` + the signature in base64, stored in the
assistant message like Anthropic's thinking signatures:

* with text (a thought summary): sent back as that thought part, signed;
* without text: it belongs to the part after it in the message (a function call or
  text), or, when nothing follows, to an empty text part, as Gemini sent it.

Reasoning without a Gemini signature (another provider's, or an unsigned summary) is not
sent: Gemini does not need it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..errors import ConfigurationError
from ..messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ._common import is_text_media, text_of_file

SIGNATURE_PREFIX = "gemini:"
"""Marks a ReasoningPart signature as a Gemini thought signature (base64 after it)."""
GENERATED_ID_PREFIX = "gemini-call-"
"""Marks a tool-call id agentkit made up for a Gemini call that came without one; it is
not sent back (Gemini matches by name and order)."""
_OPENING = "(conversation continues)"


def encode_signature(raw: bytes) -> str:
    return SIGNATURE_PREFIX + base64.b64encode(raw).decode("ascii")


def decode_signature(part: ReasoningPart) -> bytes | None:
    """The Gemini signature a reasoning part carries, or None (none, or another provider's)."""
    sig = part.signature
    if not sig or not sig.startswith(SIGNATURE_PREFIX):
        return None
    try:
        return base64.b64decode(sig[len(SIGNATURE_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        return None


def system_instruction(system: str | None, messages: tuple[Message, ...]) -> dict[str, Any] | None:
    """The request's system prompt and system messages as one ``system_instruction``."""
    texts = [system] if system and system.strip() else []
    texts += [m.text for m in messages if m.role == "system" and m.text.strip()]
    if not texts:
        return None
    return {"parts": [{"text": t} for t in texts]}


def to_gemini_contents(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """agentkit messages (system messages left out) as alternating Gemini contents."""
    turns: list[dict[str, Any]] = []
    calls: list[ToolCallPart] = []  # the function calls of the latest model turn
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            role, parts = "model", _model_parts(m)
            calls = list(m.tool_calls)
        elif m.role == "tool":
            role, parts = "user", _responses(m, calls if turns and turns[-1]["role"] == "model" else [])
            calls = []
        else:
            role, parts = "user", [p for p in (_content_part(x) for x in m.content) if p is not None]
            if not parts and m.content:
                raise ConfigurationError(
                    "a user message holds only empty or whitespace text, which Gemini rejects; send "
                    "some text (or leave the message out)"
                )
        if not parts:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    for turn in turns:  # function responses first in their user turn, text after them
        if turn["role"] == "user":
            responses = [p for p in turn["parts"] if "function_response" in p]
            turn["parts"] = responses + [p for p in turn["parts"] if "function_response" not in p]
    if turns and turns[0]["role"] == "model":
        turns.insert(0, {"role": "user", "parts": [{"text": _OPENING}]})
    return turns


def _model_parts(m: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending: bytes | None = None  # a signature for the next part
    for p in m.content:
        if isinstance(p, ReasoningPart):
            signature = decode_signature(p)
            if signature is None:
                continue
            if p.text:
                parts.append({"text": p.text, "thought": True, "thought_signature": signature})
            else:
                pending = signature
            continue
        part: dict[str, Any] | None = None
        if isinstance(p, ToolCallPart):
            call: dict[str, Any] = {
                "name": p.tool_name,
                "args": p.input if isinstance(p.input, dict) and p.input_error is None else {},
            }
            if not p.tool_call_id.startswith(GENERATED_ID_PREFIX):
                call["id"] = p.tool_call_id
            part = {"function_call": call}
        elif isinstance(p, TextPart):
            part = {"text": p.text} if p.text.strip() or pending is not None else None
        elif isinstance(p, (ImagePart, FilePart)):
            part = _content_part(p)
        if part is None:
            continue
        if pending is not None:
            part["thought_signature"] = pending
            pending = None
        parts.append(part)
    if pending is not None:
        parts.append({"text": "", "thought_signature": pending})
    return parts


def _responses(m: Message, calls: list[ToolCallPart]) -> list[dict[str, Any]]:
    """The tool results as ``function_response`` parts, in the order of the calls they
    answer; a result whose call is not in the model turn before becomes text."""
    results = [p for p in m.content if isinstance(p, ToolResultPart)]
    order = {c.tool_call_id: i for i, c in enumerate(calls)}
    answered = sorted((r for r in results if r.tool_call_id in order), key=lambda r: order[r.tool_call_id])
    parts: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    for r in answered:
        call = calls[order[r.tool_call_id]]
        out = r.output
        text = out.as_text()
        value: Any = out.value if out.kind in ("json", "error-json") else text
        response: dict[str, Any] = {"name": call.tool_name, "response": {"error" if out.is_error else "output": value}}
        if not call.tool_call_id.startswith(GENERATED_ID_PREFIX):
            response["id"] = call.tool_call_id
        parts.append({"function_response": response})
        if out.kind == "content":
            extra += [x for x in (_content_part(c) for c in out.value if not isinstance(c, TextPart)) if x]
    for r in results:
        if r.tool_call_id not in order:  # its call is not in the turn before (a shortened history)
            extra.append({"text": f"[result of the earlier tool call {r.tool_name}]: {r.output.as_text()}"})
    return parts + extra


def _content_part(p: Any) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"text": p.text} if p.text.strip() else None
    if isinstance(p, ImagePart):
        return _media(p.data, p.url, p.media_type)
    if isinstance(p, FilePart):
        if is_text_media(p.media_type) and p.data is not None:
            return {"text": text_of_file(p.data, p.filename)}
        return _media(p.data, p.url, p.media_type)
    return None


def _media(data: bytes | None, url: str | None, media_type: str) -> dict[str, Any]:
    """Inline bytes as ``inline_data``; a ``data:`` URL decoded into it; another URL (a
    Files API or ``gs://`` URI, or a public https URL) as ``file_data``."""
    if data is not None:
        return {"inline_data": {"mime_type": media_type, "data": data}}
    assert url is not None
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        if ";base64" not in header:
            raise ConfigurationError("a data: URL for Gemini must be base64-encoded")
        return {"inline_data": {"mime_type": header[5:].split(";")[0] or media_type,
                                "data": base64.b64decode(payload)}}
    return {"file_data": {"file_uri": url, "mime_type": media_type}}
