"""Turn an MCP ``CallToolResult`` into an agentkit :class:`~agentkit.messages.ToolOutput`.

Pure functions over the result's attributes (``content``, ``structured_content``,
``is_error``); no mcp import, no I/O.

* only text blocks, no structured content -> ``text`` output (blocks joined by newlines)
* structured content and no blocks, or text blocks that are its JSON serialisation ->
  ``json`` output (the structured value)
* text blocks that render a one-key wrapper of themselves (``{"result": value}``, what SDK
  servers send for a tool returning a non-object; ``{"content": text}``, what the
  filesystem reference server sends) -> ``text`` output, not the same text twice; text
  that says something else keeps the structured value too, appended as JSON text, so
  nothing the server sent is lost
* images, audio, embedded resources, resource links -> ``content`` output with
  TextPart / ImagePart / FilePart (structured content is appended as JSON text)
* ``isError`` -> ``error-text`` output carrying the server's text
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..messages import FilePart, ImagePart, TextPart, ToolOutput

__all__ = ["content_block_to_parts", "resource_contents_to_parts"]


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return base64.b64decode(data + "=" * (-len(data) % 4))


def _filename(uri: str) -> str | None:
    tail = uri.rstrip("/").rsplit("/", 1)[-1]
    return tail or None


def resource_contents_to_parts(res: Any) -> list[TextPart | ImagePart | FilePart]:
    """Convert one resource's contents (text, or a base64 blob) to agentkit parts: text
    becomes a TextPart, an image blob an ImagePart, any other blob a FilePart named after
    the URI's last segment."""
    uri = str(res.uri)
    mime = getattr(res, "mime_type", None)
    text = getattr(res, "text", None)
    if text is not None:
        return [TextPart(text=text)]
    data = _b64(res.blob)
    if mime and mime.startswith("image/"):
        return [ImagePart(data=data, media_type=mime)]
    return [FilePart(data=data, media_type=mime or "application/octet-stream", filename=_filename(uri))]


def content_block_to_parts(block: Any) -> list[TextPart | ImagePart | FilePart]:
    """Convert one MCP content block to agentkit content parts (unknown kinds become a
    short text note so nothing is silently lost)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return [TextPart(text=block.text)]
    if kind == "image":
        return [ImagePart(data=_b64(block.data), media_type=block.mime_type or "image/png")]
    if kind == "audio":
        return [FilePart(data=_b64(block.data), media_type=block.mime_type or "application/octet-stream")]
    if kind == "resource":
        return resource_contents_to_parts(block.resource)
    if kind == "resource_link":
        label = getattr(block, "name", None) or str(block.uri)
        desc = getattr(block, "description", None)
        return [TextPart(text=f"[resource link: {label} <{block.uri}>]" + (f" {desc}" if desc else ""))]
    return [TextPart(text=f"[unsupported MCP content block of type {kind!r}]")]


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json can parse
        return False


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _texts_render(texts: list[str], value: Any) -> bool:
    """True when the text blocks say exactly ``value``: its JSON, the string itself, or
    (for a list) one block per item."""
    joined = "\n".join(texts)
    if _same_json(joined, value) or (isinstance(value, str) and joined == value):
        return True
    if isinstance(value, list) and value and len(value) == len(texts):
        return all(_texts_render([t], v) for t, v in zip(texts, value, strict=True))
    return False


def _text_with_structured(texts: list[str], structured: Any) -> ToolOutput:
    if _texts_render(texts, structured):
        return ToolOutput(kind="json", value=structured)
    joined = "\n".join(texts)
    if isinstance(structured, dict) and len(structured) == 1 and _texts_render(texts, next(iter(structured.values()))):
        return ToolOutput.text(joined)  # a one-key wrapper of the text: {"result": ...}, {"content": ...}
    return ToolOutput.text(f"{joined}\n{_json_text(structured)}")


def tool_result_to_output(result: Any) -> ToolOutput:
    """The agentkit output for an MCP tool result (see the module docstring)."""
    blocks = list(getattr(result, "content", None) or ())
    structured = getattr(result, "structured_content", None)
    parts: list[TextPart | ImagePart | FilePart] = []
    for block in blocks:
        parts.extend(content_block_to_parts(block))
    only_text = all(isinstance(p, TextPart) for p in parts)
    if getattr(result, "is_error", False):
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart)).strip()
        if not text and structured is not None:
            text = _json_text(structured)
        return ToolOutput.error(text or "the MCP tool reported an error without a message")
    if structured is not None and not parts:
        return ToolOutput(kind="json", value=structured)
    if structured is not None and only_text:
        return _text_with_structured([p.text for p in parts], structured)  # type: ignore[union-attr]
    if only_text:
        return ToolOutput.text("\n".join(p.text for p in parts))  # type: ignore[union-attr]
    if structured is not None:
        parts.append(TextPart(text=_json_text(structured)))
    return ToolOutput(kind="content", value=tuple(parts))
