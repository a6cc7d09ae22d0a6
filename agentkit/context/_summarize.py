"""The shipped compactor: :func:`summarizing_compactor` asks a model for a summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._threads import ModelStream
from ..cancel import CancelToken
from ..errors import ConfigurationError
from ..messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ..models.base import ModelRequest, ModelSettings, TextDelta
from ._view import cap_output

__all__ = ["DEFAULT_INSTRUCTIONS", "summarizing_compactor"]

DEFAULT_INSTRUCTIONS = (
    "You compress a conversation between a user and an AI agent so the agent can continue "
    "the work from your summary alone. Write a concise summary that keeps: the facts "
    "learned, the decisions made and why, the tasks still open and what was about to "
    "happen next, and every file name, path, identifier, URL, number and name that may be "
    "needed again (verbatim). Leave out pleasantries and repetition. Answer with the "
    "summary only."
)

_MAX_PART_CHARS = 4000
"""Each tool result or message part shown to the summariser is cut to this length."""


def _line(role: str, part: Any) -> str:
    if isinstance(part, TextPart):
        return f"{role}: {part.text}"
    if isinstance(part, ToolCallPart):
        return f"{role} called tool {part.tool_name} (call {part.tool_call_id}) with {part.input!r}"
    if isinstance(part, ToolResultPart):
        text = cap_output(part.output, _MAX_PART_CHARS).as_text()
        status = "error" if part.output.is_error else "result"
        return f"tool {part.tool_name} (call {part.tool_call_id}) {status}: {text}"
    if isinstance(part, ReasoningPart):
        return ""
    if isinstance(part, ImagePart):
        return f"{role}: [image]"
    return f"{role}: [{getattr(part, 'kind', 'part')}]"


def transcript(messages: Sequence[Message]) -> str:
    """``messages`` as plain text, one line per part (long tool output cut)."""
    lines = [_line(m.role, p) for m in messages for p in m.content]
    return "\n".join(line if len(line) <= 2 * _MAX_PART_CHARS else line[: 2 * _MAX_PART_CHARS] + " [...]"
                     for line in lines if line)


def summarizing_compactor(
    model: Any, *, instructions: str | None = None, max_tokens: int | None = None
) -> Any:
    """A compactor that asks ``model`` (a ChatModel or a spec string) to summarise the
    covered conversation, keeping facts, decisions, open tasks and file/identifier
    names. ``instructions`` replaces the default system prompt
    (:data:`DEFAULT_INSTRUCTIONS`); ``max_tokens`` bounds the summary's length.

    The conversation is sent as one text transcript, so any model can summarise any
    history (tool calls included) without the tools being declared."""
    from ..session._foreign import model_from

    chat = model_from(model)
    if chat is None or not hasattr(chat, "stream"):
        raise ConfigurationError(
            f"summarizing_compactor needs a ChatModel or a spec string like 'openai:gpt-4.1-mini', "
            f"not {type(model).__name__}"
        )
    if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
        raise ConfigurationError("summarizing_compactor instructions must be a non-empty str")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise ConfigurationError(f"summarizing_compactor max_tokens must be an int >= 1, got {max_tokens!r}")
    system = instructions or DEFAULT_INSTRUCTIONS

    def compact(messages: list[Message], *, reason: str, cancel: CancelToken) -> str:
        prompt = (
            f"Summarise this conversation (compaction reason: {reason}).\n\n"
            f"<conversation>\n{transcript(messages)}\n</conversation>"
        )
        request = ModelRequest(
            messages=(Message(role="user", content=(TextPart(text=prompt),)),),
            system=system,
            settings=ModelSettings(max_tokens=max_tokens),
            cancel=cancel,
            cache=False,
        )
        pieces: list[str] = []
        with ModelStream(chat, request) as stream:
            for ev in stream:
                if isinstance(ev, TextDelta):
                    pieces.append(ev.text)
        return "".join(pieces)

    compact.__qualname__ = f"summarizing_compactor({getattr(chat, 'model_name', type(chat).__name__)})"
    return compact
