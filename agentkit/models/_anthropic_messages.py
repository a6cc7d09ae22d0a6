"""agentkit messages as Anthropic Messages API turns: alternating roles, tool-use ids the API
accepts, tool results and content blocks (private)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ._common import b64, is_text_media, text_of_file, user_blocks
from ._gemini_messages import SIGNATURE_PREFIX as _GEMINI_SIGNATURE
from ._responses_items import decode_token

_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_OPENING = "(conversation continues)"


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """agentkit messages as Messages API turns: roles alternate (consecutive same-role
    messages merge), the first turn is a user turn, tool results become ``tool_result``
    blocks at the start of a user turn, and any user text that followed them (runtime
    events) comes after them."""
    return merge_turns(
        messages,
        assistant_blocks=_assistant_blocks,
        user_blocks=_user_blocks,
        is_result=lambda b: b["type"] == "tool_result",
        opening={"type": "text", "text": _OPENING},
    )


def merge_turns(
    messages: tuple[Message, ...],
    *,
    assistant_blocks: Callable[[Message], list[dict[str, Any]]],
    user_blocks: Callable[[Message], list[dict[str, Any]]],
    is_result: Callable[[dict[str, Any]], bool],
    opening: dict[str, Any],
) -> list[dict[str, Any]]:
    """``{"role", "content"}`` turns under the rules the Messages API and Bedrock's
    Converse share: consecutive same-role messages merge, tool results (``is_result``)
    lead their user turn, and a history that opens with the assistant gets a minimal user
    turn (``opening``) before it. System messages are left out (they go to the system
    prompt)."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue  # goes into the system prompt
        role = "assistant" if m.role == "assistant" else "user"
        blocks = assistant_blocks(m) if role == "assistant" else user_blocks(m)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            content = turn["content"]
            results = [b for b in content if is_result(b)]
            if results and content[: len(results)] != results:
                turn["content"] = results + [b for b in content if not is_result(b)]
    if turns and turns[0]["role"] == "assistant":
        # the API wants the user role first (a history that opens with a greeting, or
        # one shortened after a context overflow): a minimal user turn goes before it
        turns.insert(0, {"role": "user", "content": [dict(opening)]})
    return turns


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, ReasoningPart):
            if p.redacted_data is not None:
                blocks.append({"type": "redacted_thinking", "data": p.redacted_data})
            elif p.signature and decode_token(p.signature) is None and not p.signature.startswith(_GEMINI_SIGNATURE):
                blocks.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
            # reasoning without a signature, or with another provider's (the OpenAI Responses
            # adapter's token, a Gemini thought signature), cannot be sent back
        elif isinstance(p, TextPart):
            # whitespace the model wrote around its tool calls ("\n\n") is rejected by
            # the API when sent back on its own
            if p.text.strip():
                blocks.append({"type": "text", "text": p.text})
        elif isinstance(p, ToolCallPart):
            value = p.input if isinstance(p.input, dict) and p.input_error is None else {}
            blocks.append({"type": "tool_use", "id": _tool_id(p.tool_call_id), "name": p.tool_name, "input": value})
    return blocks


def _tool_id(call_id: str) -> str:
    """A tool-call id as the API accepts it (``^[a-zA-Z0-9_-]+$``). Ids written by other
    providers (``functions.add:0``) are rewritten the same way in the call and in its
    result, with a hash of the original so two ids never collapse into one."""
    if _TOOL_ID.match(call_id):
        return call_id
    digest = hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:10]
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', call_id)}_{digest}"


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    return user_blocks(m, tool_result=_tool_result, content_block=_content_block, api='the Anthropic API')


def _tool_result(p: ToolResultPart) -> dict[str, Any]:
    out = p.output
    content: Any
    if out.kind == "content":
        content = [b for b in (_content_block(x) for x in out.value) if b is not None]
    else:
        content = out.as_text()
        content = content if content.strip() else ""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": _tool_id(p.tool_call_id)}
    if out.is_error:
        block["is_error"] = True
        # the API rejects an error result without content
        content = content or "Error: the tool failed without a message"
    if content:  # content is optional; an empty one is left out
        block["content"] = content
    return block


def _content_block(p: Any) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text} if p.text.strip() else None
    if isinstance(p, ImagePart):
        return {"type": "image", "source": _source(p.data, p.url, p.media_type)}
    if isinstance(p, FilePart):
        if p.media_type == "application/pdf":
            return {"type": "document", "source": _source(p.data, p.url, p.media_type)}
        if is_text_media(p.media_type) and p.data is not None:
            return {"type": "text", "text": text_of_file(p.data, p.filename)}
        raise ConfigurationError(
            f"the Anthropic Messages API takes PDF and text files, not {p.media_type!r}"
            + ("" if p.data is not None else " by URL")
            + "; convert the file or pass its text"
        )
    return None


def _source(data: bytes | None, url: str | None, media_type: str) -> dict[str, Any]:
    if data is not None:
        return {"type": "base64", "media_type": media_type, "data": b64(data)}
    assert url is not None
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        mt = header[5:].split(";")[0] or media_type
        if ";base64" not in header:
            raise ConfigurationError("a data: URL for Anthropic must be base64-encoded")
        return {"type": "base64", "media_type": mt, "data": payload}
    return {"type": "url", "url": url}
