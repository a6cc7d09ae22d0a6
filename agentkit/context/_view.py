"""Shaping what the model sees, pure logic: tool-output caps and tool-result clearing.

These change only the messages of one request; the committed events keep every tool
output in full.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import ConfigurationError
from ..messages import ContentPart, Message, TextPart, ToolOutput, ToolResultPart
from ._truncate import truncate_output

__all__ = ["ToolResultClearing", "cap_output", "cap_tool_outputs", "clear_tool_results"]

_NO_LINE_LIMIT = 2**31


@dataclass(frozen=True, kw_only=True)
class ToolResultClearing:
    """``clear_tool_results=ToolResultClearing(keep_last=N, min_chars=...)``: in what the
    model sees, every tool result but the last ``keep_last`` whose text is at least
    ``min_chars`` long is replaced by a short placeholder naming the tool and call id."""

    keep_last: int = 3
    min_chars: int = 200

    def __post_init__(self) -> None:
        for name in ("keep_last", "min_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigurationError(f"ToolResultClearing {name} must be an int >= 0, got {value!r}")


def _output_chars(output: ToolOutput) -> int:
    return len(output.as_text()) if output.kind != "content" else sum(
        len(p.text) for p in output.value if isinstance(p, TextPart)
    )


def _placeholder(part: ToolResultPart, chars: int) -> ToolResultPart:
    text = (
        f"[tool result cleared to save context: {part.tool_name} call {part.tool_call_id}, "
        f"{chars} characters; call the tool again if you need it]"
    )
    return replace(part, output=ToolOutput(kind="text", value=text))


def _map_results(messages: Sequence[Message], fn: Callable[[ToolResultPart], ToolResultPart]) -> list[Message]:
    out: list[Message] = []
    for m in messages:
        if m.role != "tool":
            out.append(m)
            continue
        content: list[ContentPart] = []
        changed = False
        for p in m.content:
            new = fn(p) if isinstance(p, ToolResultPart) else p
            changed = changed or new is not p
            content.append(new)
        out.append(Message(role="tool", content=tuple(content)) if changed else m)
    return out


def clear_tool_results(messages: Sequence[Message], clearing: ToolResultClearing) -> list[Message]:
    """``messages`` with the older large tool results replaced by placeholders."""
    total = sum(1 for m in messages if m.role == "tool" for p in m.content if isinstance(p, ToolResultPart))
    older = total - clearing.keep_last
    if older <= 0:
        return list(messages)
    index = 0

    def clear(part: ToolResultPart) -> ToolResultPart:
        nonlocal index
        index += 1
        if index > older:
            return part
        chars = _output_chars(part.output)
        return _placeholder(part, chars) if chars >= clearing.min_chars else part

    return _map_results(messages, clear)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    # a byte cap of max_chars keeps at most max_chars characters
    return truncate_output(text, _NO_LINE_LIMIT, max_chars).text()


def cap_output(output: ToolOutput, max_chars: int) -> ToolOutput:
    """``output`` with its model-visible text cut to ``max_chars`` characters plus the
    truncation notice (:func:`agentkit.context.truncate_output`); JSON that is too long
    becomes its truncated text."""
    if output.kind in ("text", "error-text"):
        text = str(output.value)
        return output if len(text) <= max_chars else replace(output, value=_cut(text, max_chars))
    if output.kind == "content":
        parts = tuple(
            TextPart(text=_cut(p.text, max_chars)) if isinstance(p, TextPart) and len(p.text) > max_chars else p
            for p in output.value
        )
        return output if all(a is b for a, b in zip(parts, output.value, strict=True)) else replace(output, value=parts)
    text = json.dumps(output.value, ensure_ascii=False, default=str)
    if len(text) <= max_chars:
        return output
    cut = _cut(text, max_chars)
    capped = ToolOutput.error(cut) if output.is_error else ToolOutput.text(cut)
    return replace(capped, metadata=output.metadata)


def cap_tool_outputs(messages: Sequence[Message], max_chars: int) -> list[Message]:
    """``messages`` with every tool result's text cut to ``max_chars`` characters."""

    def cap(part: ToolResultPart) -> ToolResultPart:
        capped = cap_output(part.output, max_chars)
        return part if capped is part.output else replace(part, output=capped)

    return _map_results(messages, cap)
