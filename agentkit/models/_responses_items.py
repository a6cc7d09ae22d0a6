"""agentkit messages as OpenAI Responses API input items, and the Responses data kept on
assistant messages (private).

What must survive a stored session rides on :class:`~agentkit.messages.ReasoningPart`'s
``signature``, the message parts' opaque provider value, as a token written here:

* a reasoning output item becomes a ``ReasoningPart`` (text: its summary) whose token
  holds the item's ``id``, ``summary`` and ``encrypted_content``; it goes back as the
  same reasoning item, in front of what followed it;
* each response ends with one more ``ReasoningPart`` without text, the response's
  *receipt*: its id, the ids of its message and function-call items (the API pairs a
  reasoning item with the items that followed it by their ids) and, with server-side
  state, a digest of the input it answered (:func:`chain_digest`).

Other providers' reasoning (no token) is never sent; other providers leave these parts
out (Anthropic sends only its own signatures).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ._common import data_url, is_text_media, text_of_file, tool_result_text
from ._openai_messages import _arguments

TOKEN_PREFIX = "openai-responses:"
"""How a ``ReasoningPart.signature`` written by the Responses adapter begins."""

Items = list[dict[str, Any]]


def encode_token(data: Mapping[str, Any]) -> str:
    """``data`` as a ``ReasoningPart.signature``."""
    return TOKEN_PREFIX + json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False)


def decode_token(signature: str | None) -> dict[str, Any] | None:
    """The data of a token written by :func:`encode_token`, else None (another
    provider's signature, or none)."""
    if not signature or not signature.startswith(TOKEN_PREFIX):
        return None
    try:
        data = json.loads(signature[len(TOKEN_PREFIX):])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def receipt_of(message: Message) -> dict[str, Any] | None:
    """The receipt of the response ``message`` records (its last one), or None."""
    for part in reversed(message.content):
        if isinstance(part, ReasoningPart):
            data = decode_token(part.signature)
            if data is not None and "response_id" in data:
                return data
    return None


def chain_digest(items: Sequence[Items]) -> str:
    """A digest of the input items of a conversation prefix: two prefixes are the same
    conversation exactly when their digests are equal."""
    raw = json.dumps([i for group in items for i in group], sort_keys=True, separators=(",", ":"),
                     ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def to_input_items(messages: Sequence[Message], system_role: str, stored: bool) -> list[Items]:
    """The input items of each message (a list per message, so a prefix's items are the
    items of the prefix's messages). ``stored``: the server keeps items (not with
    ``store=False``): the output item ids the receipts hold are sent, and reasoning
    without encrypted content can be looked up by its id."""
    out: list[Items] = []
    for m in messages:
        if m.role == "system":
            out.append([{"role": system_role, "content": m.text}])
        elif m.role == "user":
            out.append([{"role": "user", "content": _user_content(m.content)}])
        elif m.role == "assistant":
            out.append(_assistant_items(m, stored))
        else:
            out.append([_call_output(p) for p in m.content if isinstance(p, ToolResultPart)])
    return out


def _user_content(parts: Sequence[Any]) -> str | list[dict[str, Any]]:
    blocks = [b for b in (_content_block(p) for p in parts) if b is not None]
    if all(b["type"] == "input_text" for b in blocks):
        return "".join(b["text"] for b in blocks)
    return blocks


def _content_block(p: Any) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"type": "input_text", "text": p.text}
    if isinstance(p, ImagePart):
        url = p.url if p.url is not None else data_url(p.data or b"", p.media_type)
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if isinstance(p, FilePart):
        if p.data is None:
            return {"type": "input_file", "file_url": p.url}
        if is_text_media(p.media_type):
            return {"type": "input_text", "text": text_of_file(p.data, p.filename)}
        return {"type": "input_file", "file_data": data_url(p.data, p.media_type), "filename": p.filename or "file"}
    return None


def _assistant_items(m: Message, stored: bool) -> Items:
    receipt = receipt_of(m) if stored else None
    message_ids = list(receipt.get("messages", [])) if receipt else []
    call_ids: Mapping[str, str] = receipt.get("calls", {}) if receipt else {}
    items: Items = []
    for p in m.content:
        if isinstance(p, ReasoningPart):
            data = decode_token(p.signature)
            # without encrypted content only a server that kept the item knows it
            if data is not None and "id" in data and (stored or data.get("encrypted_content")):
                items.append(_reasoning_item(data))
        elif isinstance(p, TextPart):
            msg_id = message_ids.pop(0) if message_ids else None
            if msg_id:
                content = [{"type": "output_text", "text": p.text, "annotations": []}]
                items.append({"type": "message", "role": "assistant", "id": msg_id, "status": "completed",
                              "content": content})
            elif p.text.strip():
                items.append({"role": "assistant", "content": p.text})
        elif isinstance(p, ToolCallPart):
            call: dict[str, Any] = {"type": "function_call", "call_id": p.tool_call_id, "name": p.tool_name,
                                    "arguments": _arguments(p)}
            if call_ids.get(p.tool_call_id):
                call["id"] = call_ids[p.tool_call_id]
            items.append(call)
    # a reasoning item must be followed by what it led to: one that led to nothing (a
    # reply cut off while thinking) is left out
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _reasoning_item(data: Mapping[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": data["id"],
        "summary": [{"type": "summary_text", "text": t} for t in data.get("summary", [])],
    }
    if data.get("encrypted_content"):
        item["encrypted_content"] = data["encrypted_content"]
    return item


def _call_output(p: ToolResultPart) -> dict[str, Any]:
    output: Any = tool_result_text(p.output)
    if p.output.kind == "content" and any(isinstance(x, (ImagePart, FilePart)) for x in p.output.value):
        blocks = [b for b in (_content_block(x) for x in p.output.value) if b is not None]
        output = blocks
    return {"type": "function_call_output", "call_id": p.tool_call_id, "output": output}
