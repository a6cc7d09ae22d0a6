"""agentkit messages as Bedrock Converse messages: alternating roles, ``toolUse`` /
``toolResult`` blocks matched by ``toolUseId``, images and documents as bytes (private)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from ..errors import ConfigurationError
from ..messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ._anthropic_messages import _tool_id as _anthropic_tool_id
from ._anthropic_messages import merge_turns
from ._common import is_text_media, text_of_file, user_blocks

_OPENING = "(conversation continues)"
_MAX_ID = 64
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
                  "image/webp": "webp"}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
_DOC_NAME = re.compile(r"[^A-Za-z0-9 ()\[\]-]+")


def to_bedrock_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """agentkit messages as Converse ``messages``: roles alternate (consecutive same-role
    messages merge), the first is a user message, and tool results lead the user message
    after the assistant message whose ``toolUse`` blocks they answer."""
    return merge_turns(
        messages,
        assistant_blocks=_assistant_blocks,
        user_blocks=_user_blocks,
        is_result=lambda b: "toolResult" in b,
        opening={"text": _OPENING},
    )


def tool_use_id(call_id: str) -> str:
    """A tool-call id as Converse accepts it (``[a-zA-Z0-9_.:-]+``, at most 64 characters),
    rewritten the same way in a call and in its result."""
    safe = _anthropic_tool_id(call_id)
    if len(safe) <= _MAX_ID:
        return safe
    digest = hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:10]
    return f"{safe[: _MAX_ID - 11]}_{digest}"


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, ReasoningPart):
            if p.redacted_data is not None:
                blocks.append({"reasoningContent": {"redactedContent": _unbase64(p.redacted_data)}})
            elif p.signature:
                blocks.append({"reasoningContent": {"reasoningText": {"text": p.text, "signature": p.signature}}})
            # reasoning without a signature (another provider's) cannot be sent back
        elif isinstance(p, TextPart):
            if p.text.strip():  # the service rejects blank text blocks
                blocks.append({"text": p.text})
        elif isinstance(p, ToolCallPart):
            value = p.input if isinstance(p.input, dict) and p.input_error is None else {}
            blocks.append({"toolUse": {"toolUseId": tool_use_id(p.tool_call_id), "name": p.tool_name,
                                       "input": value}})
    return blocks


def _unbase64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode("utf-8")  # not ours (another provider's opaque value): as it is


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    return user_blocks(m, tool_result=_tool_result, content_block=_content_block, api="Bedrock's Converse API")


def _tool_result(p: ToolResultPart) -> dict[str, Any]:
    out = p.output
    content: list[dict[str, Any]]
    if out.kind == "content":
        content = [b for b in (_content_block(x) for x in out.value) if b is not None]
    elif out.kind == "json" and isinstance(out.value, dict):
        content = [{"json": out.value}]
    else:
        text = out.as_text()
        content = [{"text": text}] if text.strip() else []
    if not content:  # content is required and may not be blank
        content = [{"text": "Error: the tool failed without a message" if out.is_error else "(no output)"}]
    result: dict[str, Any] = {"toolUseId": tool_use_id(p.tool_call_id), "content": content}
    if out.is_error:
        result["status"] = "error"
    return {"toolResult": result}


def _content_block(p: Any) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"text": p.text} if p.text.strip() else None
    if isinstance(p, ImagePart):
        data, media_type = _bytes_of(p.data, p.url, p.media_type, "an image")
        fmt = _IMAGE_FORMATS.get(media_type)
        if fmt is None:
            raise ConfigurationError(
                f"Bedrock's Converse API takes png, jpeg, gif and webp images, not {media_type!r}; convert it"
            )
        return {"image": {"format": fmt, "source": {"bytes": data}}}
    if isinstance(p, FilePart):
        if p.media_type not in _DOCUMENT_FORMATS and is_text_media(p.media_type) and p.data is not None:
            return {"text": text_of_file(p.data, p.filename)}
        data, media_type = _bytes_of(p.data, p.url, p.media_type, "a file")
        fmt = _DOCUMENT_FORMATS.get(media_type)
        if fmt is None:
            raise ConfigurationError(
                f"Bedrock's Converse API takes documents in {', '.join(sorted(set(_DOCUMENT_FORMATS.values())))} "
                f"and text files, not {media_type!r}; convert the file or pass its text"
            )
        name = _DOC_NAME.sub(" ", (p.filename or "document").rsplit(".", 1)[0]).strip() or "document"
        return {"document": {"format": fmt, "name": name[:200], "source": {"bytes": data}}}
    return None


def _bytes_of(data: bytes | None, url: str | None, media_type: str, what: str) -> tuple[bytes, str]:
    """The bytes of a part (inline, or a base64 ``data:`` URL) and its media type."""
    if data is not None:
        return data, media_type
    assert url is not None
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        if ";base64" not in header:
            raise ConfigurationError("a data: URL for Bedrock must be base64-encoded")
        return base64.b64decode(payload), header[5:].split(";")[0] or media_type
    raise ConfigurationError(
        f"Bedrock's Converse API takes {what} as bytes, not by URL ({url[:60]!r}); download it and "
        f"pass data= (bytes)"
    )
