"""LangChain content blocks <-> agentkit content parts, both directions: text,
reasoning (Anthropic's signed and redacted thinking kept as such), and the multimodal
blocks (LangChain's standard and older ``source_type`` blocks, OpenAI's and Anthropic's
own) as :class:`~agentkit.messages.ImagePart` / :class:`~agentkit.messages.FilePart` (private)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any

from ...errors import ConfigurationError
from ...messages import ContentPart, FilePart, ImagePart, ReasoningPart, TextPart
from ...models._responses_items import decode_token

_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*);base64,(?P<data>.*)$", re.S)


# -- agentkit -> LangChain -------------------------------------------------------------


def block_from_part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        block: dict[str, Any] = {"type": "image", "mime_type": part.media_type}
        if part.url is not None:
            block["url"] = part.url
        else:
            block["base64"] = part.base64()
        return block
    if isinstance(part, FilePart):
        kind = part.media_type.split("/", 1)[0]
        block = {"type": kind if kind in ("audio", "video") else "file", "mime_type": part.media_type}
        if part.url is not None:
            block["url"] = part.url
        else:
            block["base64"] = base64.b64encode(part.data or b"").decode("ascii")
        if part.filename is not None:
            block["extras"] = {"filename": part.filename}
        return block
    if isinstance(part, ReasoningPart):
        return _reasoning_block(part)
    raise ConfigurationError(f"a {type(part).__name__} is not message content")  # pragma: no cover


def _reasoning_block(part: ReasoningPart) -> dict[str, Any]:
    """Signed or redacted reasoning (Anthropic extended thinking) as Anthropic's own
    ``thinking`` / ``redacted_thinking`` blocks: ChatAnthropic sends them back as the API
    requires, and ChatOpenAI leaves ``thinking`` out. Other reasoning is a standard
    ``reasoning`` block, which integrations do not send to their API (also reasoning
    signed by the OpenAI Responses adapter, which Anthropic would refuse)."""
    if part.redacted_data and not part.text and not part.signature:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature and not part.redacted_data and decode_token(part.signature) is None:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    block: dict[str, Any] = {"type": "reasoning", "reasoning": part.text}
    extras = {k: v for k, v in (("signature", part.signature), ("redacted_data", part.redacted_data)) if v}
    if extras:
        block["extras"] = extras
    return block


def content_from_parts(parts: Sequence[ContentPart]) -> str | list[Any]:
    """A lone text part becomes a plain string, as LangChain users write it."""
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [block_from_part(p) for p in parts]


# -- LangChain -> agentkit -------------------------------------------------------------


def _decode(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ConfigurationError(f"{where}: the base64 data is not valid base64") from None


def _from_data_url(url: str) -> tuple[bytes, str] | None:
    m = _DATA_URL.match(url)
    if m is None:
        return None
    return _decode(m.group("data"), "data URL"), m.group("mime") or "application/octet-stream"


def _media_part(kind: str, *, data: bytes | None = None, url: str | None = None,
                mime: str | None = None, filename: str | None = None) -> ContentPart:
    if kind == "image":
        if url is not None and mime is None and url.startswith("data:"):
            decoded = _from_data_url(url)
            mime = decoded[1] if decoded else None
        return ImagePart(data=data, url=url, media_type=mime or "image/png")
    default = {"audio": "audio/wav", "video": "video/mp4"}.get(kind, "application/octet-stream")
    return FilePart(data=data, url=url, media_type=mime or default, filename=filename)


def _no_file_ids(where: str) -> ConfigurationError:
    return ConfigurationError(
        f"{where}: the block refers to a provider file id, which agentkit cannot express; "
        f"pass the data inline (base64) or as a URL instead"
    )


def _data_block(block: dict[str, Any], kind: str, where: str) -> ContentPart:
    """LangChain's standard (v1) and older (``source_type``) multimodal blocks, and
    Anthropic ``source`` blocks."""
    extras = block.get("extras") or block.get("metadata") or {}
    filename = block.get("filename") or extras.get("filename") or block.get("title")
    mime = block.get("mime_type")
    if kind == "text-plain":
        if "text" in block and "base64" not in block and "url" not in block:
            return FilePart(data=str(block["text"]).encode(), media_type=mime or "text/plain", filename=filename)
        kind, mime = "file", mime or "text/plain"
    source = block.get("source")
    if isinstance(source, dict):  # Anthropic image / document
        stype = source.get("type")
        mime = source.get("media_type") or mime
        if stype == "base64":
            return _media_part(kind, data=_decode(source.get("data", ""), where), mime=mime, filename=filename)
        if stype == "url":
            return _media_part(kind, url=source["url"], mime=mime, filename=filename)
        if stype == "text":
            return _media_part(kind, data=str(source.get("data", "")).encode(), mime=mime or "text/plain",
                               filename=filename)
        raise _no_file_ids(where) if stype == "file" else ConfigurationError(
            f"{where}: unsupported {kind} source type {stype!r}; use base64 data or a URL"
        )
    stype = block.get("source_type")
    if block.get("file_id") or stype == "id":
        raise _no_file_ids(where)
    if "base64" in block:
        return _media_part(kind, data=_decode(block["base64"], where), mime=mime, filename=filename)
    if stype == "base64" and "data" in block:
        return _media_part(kind, data=_decode(block["data"], where), mime=mime, filename=filename)
    if "url" in block:
        return _media_part(kind, url=block["url"], mime=mime, filename=filename)
    raise ConfigurationError(f"{where}: a {kind!r} block needs base64 data or a url")


def _part_from_block(block: Any, where: str, *, assistant: bool) -> ContentPart | None:
    """One content block as an agentkit part; None for blocks that are carried elsewhere
    (tool-call blocks duplicate ``AIMessage.tool_calls``)."""
    if isinstance(block, str):
        return TextPart(text=block)
    if not isinstance(block, dict):
        raise ConfigurationError(f"{where}: a content block must be a str or dict, not {type(block).__name__}")
    btype = block.get("type")
    if btype == "text":
        return TextPart(text=str(block.get("text", "")))
    if btype == "image_url":  # OpenAI chat format
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str):
            raise ConfigurationError(f"{where}: an image_url block needs image_url.url")
        return _media_part("image", url=url)
    if btype == "file" and isinstance(block.get("file"), dict):  # OpenAI chat format
        spec = block["file"]
        if spec.get("file_id"):
            raise _no_file_ids(where)
        decoded = _from_data_url(str(spec.get("file_data", "")))
        if decoded is None:
            raise ConfigurationError(f"{where}: an OpenAI file block needs file.file_data as a data URL")
        return FilePart(data=decoded[0], media_type=decoded[1], filename=spec.get("filename"))
    if btype in ("image", "file", "audio", "video", "text-plain"):
        return _data_block(block, btype, where)
    if btype == "document":  # Anthropic
        return _data_block(block, "file", where)
    if btype == "input_audio":  # OpenAI chat format
        spec = block.get("input_audio") or {}
        fmt = spec.get("format", "wav")
        return FilePart(data=_decode(spec.get("data", ""), where), media_type=f"audio/{fmt}")
    if assistant:
        if btype == "reasoning":
            extras = block.get("extras") or {}
            return ReasoningPart(
                text=str(block.get("reasoning", "")),
                signature=extras.get("signature") or block.get("signature"),
                redacted_data=extras.get("redacted_data"),
            )
        if btype == "thinking":  # Anthropic
            return ReasoningPart(text=str(block.get("thinking", "")), signature=block.get("signature"))
        if btype == "redacted_thinking":  # Anthropic
            return ReasoningPart(redacted_data=block.get("data"))
        if btype in ("tool_use", "tool_call", "tool_call_chunk", "invalid_tool_call", "function_call"):
            return None
    raise ConfigurationError(
        f"{where}: agentkit has no equivalent for a {btype!r} content block; "
        f"supported: text, image, file, audio, video"
        + (", reasoning; tool calls go in AIMessage.tool_calls" if assistant else "")
    )


def parts_from_content(content: Any, where: str, *, assistant: bool = False) -> tuple[ContentPart, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    parts = (_part_from_block(b, f"{where}, block {j}", assistant=assistant) for j, b in enumerate(content))
    return tuple(p for p in parts if p is not None)
