"""agentkit messages as OpenAI Chat Completions messages: user content parts (images,
audio, files), assistant tool calls, tool messages (private)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigurationError
from ..messages import FilePart, ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from ._common import b64, data_url, is_text_media, text_of_file, tool_result_text
from .base import ModelRequest

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def to_openai_messages(request: ModelRequest, system_role: str = "system") -> list[dict[str, Any]]:
    """agentkit messages in Chat Completions shape."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": system_role, "content": request.system})
    for m in request.messages:
        if m.role == "system":
            out.append({"role": system_role, "content": m.text})
        elif m.role == "user":
            out.append({"role": "user", "content": _user_content(m.content)})
        elif m.role == "assistant":
            msg = _assistant(m)
            if msg is not None:
                out.append(msg)
        else:
            out.extend(_tool_messages(m))
    return out


def _user_content(parts: tuple[Any, ...]) -> str | list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            blocks.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            url = p.url if p.url is not None else data_url(p.data or b"", p.media_type)
            blocks.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(p, FilePart):
            blocks.append(_file_block(p))
    if all(b["type"] == "text" for b in blocks):
        return "".join(b["text"] for b in blocks)
    return blocks


def _file_block(p: FilePart) -> dict[str, Any]:
    if p.data is None:
        raise ConfigurationError(
            f"OpenAI Chat Completions cannot fetch a file by URL ({p.url}); download it and "
            f"pass FilePart(data=..., media_type=...)"
        )
    if is_text_media(p.media_type):
        return {"type": "text", "text": text_of_file(p.data, p.filename)}
    if p.media_type in _AUDIO_FORMATS:
        audio = {"data": b64(p.data), "format": _AUDIO_FORMATS[p.media_type]}
        return {"type": "input_audio", "input_audio": audio}
    return {
        "type": "file",
        "file": {"file_data": data_url(p.data, p.media_type), "filename": p.filename or "file"},
    }


def _assistant(m: Message) -> dict[str, Any] | None:
    text = "".join(p.text for p in m.content if isinstance(p, TextPart))
    calls = [p for p in m.content if isinstance(p, ToolCallPart)]
    if not text and not calls:
        return None  # reasoning-only turns are not sent back to Chat Completions
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        # content stays "" (never null): several OpenAI-compatible servers reject null
        msg["tool_calls"] = [
            {
                "id": c.tool_call_id,
                "type": "function",
                "function": {"name": c.tool_name, "arguments": _arguments(c)},
            }
            for c in calls
        ]
    return msg


def _arguments(call: ToolCallPart) -> str:
    if call.input_error is not None:
        return "{}"  # the raw text was invalid; servers that parse history would reject it
    return json.dumps(call.input, ensure_ascii=False)


def _tool_messages(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for p in m.content:
        if not isinstance(p, ToolResultPart):
            continue
        out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": tool_result_text(p.output)})
        if p.output.kind == "content":
            pics = [x for x in p.output.value if isinstance(x, (ImagePart, FilePart))]
            if pics:
                note = f"Attachments returned by tool call {p.tool_call_id}:"
                images.append({"type": "text", "text": note})
                content = _user_content(tuple(pics))
                images.extend(content if isinstance(content, list) else [{"type": "text", "text": content}])
    if images:
        # tool messages carry text only; images a tool returned follow as a user message
        out.append({"role": "user", "content": images})
    return out
