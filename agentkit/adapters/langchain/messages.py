"""LangChain message histories <-> agentkit messages and events.

Both directions are lossless where both sides can express the same thing:

* ``SystemMessage`` <-> ``system`` message (text only);
* ``HumanMessage`` <-> ``user`` message: text and multimodal blocks (LangChain's standard
  ``image`` / ``file`` / ``audio`` / ``video`` blocks, the older ``source_type`` blocks,
  OpenAI ``image_url`` / ``file`` blocks, Anthropic ``image`` / ``document`` blocks);
* ``AIMessage`` <-> ``assistant`` message: text, reasoning (``reasoning`` and Anthropic
  ``thinking`` / ``redacted_thinking`` blocks; signed or redacted reasoning goes back to
  LangChain in Anthropic's form, which ChatAnthropic replays as its API requires),
  ``tool_calls`` and ``invalid_tool_calls`` (a
  :class:`~agentkit.messages.ToolCallPart` with ``input_error``). ``usage_metadata`` and
  the finish reason have no place in a :class:`~agentkit.messages.Message`; they are
  kept by :func:`events_from_langchain` on the assistant event;
* ``ToolMessage`` <-> a :class:`~agentkit.messages.ToolResultPart` (``status="error"``
  is an error output, ``artifact`` is kept in ``ToolOutput.metadata["artifact"]``).
  Consecutive tool messages form one agentkit ``tool`` message;
* ``ChatMessage`` with role ``user``/``human``, ``assistant``/``ai`` or
  ``system``/``developer``.

What agentkit cannot express (provider file ids, server-side tool calls, a
``ChatMessage`` with another role, a legacy ``FunctionMessage``) raises
:class:`~agentkit.errors.ConfigurationError` naming the message and what to do.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError
from ...events import AssistantMessageEvent, Event, ToolResultEvent, UserMessageEvent
from ...messages import (
    ContentPart,
    Message,
    TextPart,
    ToolCallPart,
    ToolOutput,
    ToolResultPart,
)
from ._blocks import block_from_part, content_from_parts, parts_from_content
from ._common import finish_reason_from_langchain, jsonable, require_langchain, usage_from_langchain

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

_INVALID_CALL = "the model produced tool call arguments that could not be parsed"
_KIND_KEY = "agentkit"
"""``ToolMessage.response_metadata`` key recording what LangChain cannot say itself: a
JSON output kind, and ToolOutput metadata other than the artifact."""


# -- agentkit -> LangChain -------------------------------------------------------------


def _tool_message(part: ToolResultPart) -> Any:
    from langchain_core.messages import ToolMessage

    out = part.output
    meta = dict(out.metadata or {})
    artifact = meta.pop("artifact", None)
    marker: dict[str, Any] = {}
    content: str | list[Any]
    if out.kind == "content":
        content = [block_from_part(p) for p in out.value]
    elif out.kind in ("json", "error-json"):
        content = out.as_text()
        marker["kind"] = out.kind
    else:
        content = str(out.value)
    if meta:
        marker["metadata"] = meta
    return ToolMessage(
        content=content,
        tool_call_id=part.tool_call_id,
        name=part.tool_name,
        status="error" if out.is_error else "success",
        artifact=artifact,
        response_metadata={_KIND_KEY: marker} if marker else {},
    )


def _ai_message(msg: Message) -> Any:
    from langchain_core.messages import AIMessage

    parts = [p for p in msg.content if not isinstance(p, ToolCallPart)]
    tool_calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in msg.tool_calls:
        if call.input_error is None and isinstance(call.input, dict):
            tool_calls.append(
                {"type": "tool_call", "id": call.tool_call_id, "name": call.tool_name, "args": call.input}
            )
        else:
            raw = call.input if isinstance(call.input, str) else json.dumps(call.input, default=str)
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "id": call.tool_call_id,
                    "name": call.tool_name,
                    "args": raw,
                    "error": call.input_error or "the arguments are not a JSON object",
                }
            )
    return AIMessage(content=content_from_parts(parts), tool_calls=tool_calls, invalid_tool_calls=invalid)


def messages_to_langchain(messages: Iterable[Message]) -> list[BaseMessage]:
    """Convert agentkit messages (for example ``RunResult.messages``) to LangChain
    messages. A ``tool`` message becomes one ``ToolMessage`` per result.

    Multimodal parts use LangChain's standard content blocks (``{"type": "image",
    "url" | "base64": ..., "mime_type": ...}``), which every LangChain chat model
    integration accepts.
    """
    require_langchain("messages_to_langchain")
    from langchain_core.messages import HumanMessage, SystemMessage

    out: list[BaseMessage] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Message):
            raise ConfigurationError(
                f"messages_to_langchain: item {i} is a {type(msg).__name__}, not an agentkit "
                f"Message; pass agentkit messages (e.g. RunResult.messages)"
            )
        if msg.role == "system":
            out.append(SystemMessage(content=content_from_parts(msg.content)))
        elif msg.role == "user":
            out.append(HumanMessage(content=content_from_parts(msg.content)))
        elif msg.role == "assistant":
            out.append(_ai_message(msg))
        else:
            out.extend(_tool_message(p) for p in msg.content if isinstance(p, ToolResultPart))
    return out


# -- LangChain -> agentkit -------------------------------------------------------------


def _tool_output(content: Any, status: str, artifact: Any, response_metadata: Any,
                 where: str) -> ToolOutput:
    marker = response_metadata.get(_KIND_KEY) if isinstance(response_metadata, dict) else None
    marker = marker if isinstance(marker, dict) else {}
    metadata: dict[str, Any] = dict(marker.get("metadata") or {})
    if artifact is not None:
        metadata["artifact"] = jsonable(artifact)
    meta = metadata or None
    error = status == "error"
    if isinstance(content, str):
        if marker.get("kind") in ("json", "error-json"):
            try:
                return ToolOutput(kind="error-json" if error else "json", value=json.loads(content), metadata=meta)
            except ValueError:
                pass
        return ToolOutput(kind="error-text" if error else "text", value=content, metadata=meta)
    try:
        parts = parts_from_content(content, where)
    except ConfigurationError:
        # blocks agentkit cannot hold as parts still reach the model, as JSON
        return ToolOutput(kind="error-json" if error else "json", value=jsonable(content), metadata=meta)
    if error:
        if all(isinstance(p, TextPart) for p in parts):
            return ToolOutput(kind="error-text", value="".join(p.text for p in parts), metadata=meta)  # type: ignore[union-attr]
        return ToolOutput(kind="error-json", value=jsonable(content), metadata=meta)
    return ToolOutput(kind="content", value=parts, metadata=meta)


def tool_output_from_tool_message(message: Any, where: str = "ToolMessage") -> ToolOutput:
    """A LangChain ToolMessage's content, status and artifact as a ToolOutput."""
    return _tool_output(
        message.content,
        getattr(message, "status", "success"),
        getattr(message, "artifact", None),
        getattr(message, "response_metadata", None),
        where,
    )


_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}


def _coerce(messages: Iterable[Any]) -> list[Any]:
    from langchain_core.messages import BaseMessage, convert_to_messages

    items = list(messages) if not isinstance(messages, (str, bytes)) else None
    if items is None:
        raise ConfigurationError("pass a list of LangChain messages, not a string")
    if all(isinstance(m, BaseMessage) for m in items):
        return items
    try:
        return list(convert_to_messages(items))
    except Exception as exc:  # noqa: BLE001 - LangChain raises several types here
        raise ConfigurationError(
            f"could not read the LangChain message history: {exc}. Pass BaseMessage objects, "
            f"(role, content) tuples or role/content dicts"
        ) from None


def _convert(messages: Iterable[Any]) -> list[tuple[Any, Message]]:
    """Each LangChain message with its agentkit message, in order."""
    from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage

    names: dict[str, str] = {}
    out: list[tuple[Any, Message]] = []
    for i, m in enumerate(_coerce(messages)):
        where = f"message {i} ({type(m).__name__})"
        role: str | None
        if isinstance(m, ChatMessage):
            role = _ROLES.get(m.role.lower())
            if role is None:
                raise ConfigurationError(
                    f"{where}: agentkit has no role equivalent to ChatMessage role {m.role!r}; "
                    f"use one of {', '.join(sorted(_ROLES))}, or convert the message first"
                )
        elif isinstance(m, SystemMessage):
            role = "system"
        elif isinstance(m, HumanMessage):
            role = "user"
        elif isinstance(m, AIMessage):
            role = "assistant"
        elif isinstance(m, ToolMessage):
            role = "tool"
        else:
            raise ConfigurationError(
                f"{where}: agentkit cannot express a {type(m).__name__}; use SystemMessage, "
                f"HumanMessage, AIMessage (with tool_calls) and ToolMessage"
            )
        if role == "tool":
            name = m.name or names.get(m.tool_call_id)
            if name is None:
                raise ConfigurationError(
                    f"{where}: tool_call_id {m.tool_call_id!r} answers no tool call of an earlier "
                    f"AIMessage and the message has no name; set ToolMessage.name or include the "
                    f"AIMessage that made the call"
                )
            result = ToolResultPart(
                tool_call_id=m.tool_call_id, tool_name=name, output=tool_output_from_tool_message(m, where)
            )
            out.append((m, Message(role="tool", content=(result,))))
            continue
        if role == "system":
            parts = parts_from_content(m.content, where)
            if not all(isinstance(p, TextPart) for p in parts):
                raise ConfigurationError(f"{where}: a system message can hold text only")
            out.append((m, Message(role="system", content=parts)))
            continue
        if role == "user":
            out.append((m, Message(role="user", content=parts_from_content(m.content, where))))
            continue
        parts = parts_from_content(m.content, where, assistant=True)
        calls: list[ContentPart] = []
        for tc in getattr(m, "tool_calls", None) or ():
            call_id = tc.get("id") or f"call_{uuid.uuid4().hex}"
            names[call_id] = tc["name"]
            calls.append(ToolCallPart(tool_call_id=call_id, tool_name=tc["name"], input=tc.get("args") or {}))
        for tc in getattr(m, "invalid_tool_calls", None) or ():
            call_id = tc.get("id") or f"call_{uuid.uuid4().hex}"
            names[call_id] = tc.get("name") or ""
            calls.append(
                ToolCallPart(
                    tool_call_id=call_id,
                    tool_name=tc.get("name") or "",
                    input=tc.get("args") or "",
                    input_error=tc.get("error") or _INVALID_CALL,
                )
            )
        out.append((m, Message(role="assistant", content=parts + tuple(calls))))
    return out


def messages_from_langchain(messages: Iterable[Any]) -> list[Message]:
    """Convert a LangChain message history to agentkit messages.

    Accepts ``BaseMessage`` objects (and anything ``langchain_core``'s
    ``convert_to_messages`` reads, such as ``("user", "hi")`` tuples). Consecutive
    ``ToolMessage`` objects form one ``tool`` message. A system message stays a
    ``system`` message: ``run_agent(messages=...)`` turns it into the system prompt.
    Raises :class:`~agentkit.errors.ConfigurationError` for content agentkit cannot
    express, naming the message.
    """
    require_langchain("messages_from_langchain")
    out: list[Message] = []
    for _, msg in _convert(messages):
        if msg.role == "tool" and out and out[-1].role == "tool":
            out[-1] = Message(role="tool", content=out[-1].content + msg.content)
        else:
            out.append(msg)
    return out


@dataclass(frozen=True, kw_only=True)
class LangChainHistory:
    """A LangChain history as a Session's starting point::

        history = events_from_langchain(lc_messages)
        session = Session(model, system=history.system, events=history.events)
    """

    system: str | None
    """The text of the history's system messages, joined by blank lines (None without
    any). System messages are not events: pass this as the session's ``system=``."""
    events: tuple[Event, ...]
    """User, assistant and tool-result events, in history order."""


def events_from_langchain(messages: Iterable[Any]) -> LangChainHistory:
    """Seed a Session's canonical events from a LangChain history.

    Every message becomes one event (a ``ToolMessage`` one
    :class:`~agentkit.ToolResultEvent`); a message's LangChain ``id`` becomes the event
    id when it has one. An ``AIMessage``'s ``usage_metadata``, finish reason and model
    name are kept on its :class:`~agentkit.AssistantMessageEvent`. System messages are
    returned separately as :attr:`LangChainHistory.system`.
    """
    require_langchain("events_from_langchain")
    system: list[str] = []
    events: list[Event] = []
    seen: set[str] = set()
    for lc, msg in _convert(messages):
        ident: dict[str, Any] = {}
        lc_id = getattr(lc, "id", None)
        if isinstance(lc_id, str) and lc_id:
            if lc_id in seen:
                raise ConfigurationError(
                    f"two messages of the history have the id {lc_id!r}; event ids must be unique"
                )
            seen.add(lc_id)
            ident["id"] = lc_id
        if msg.role == "system":
            system.append(msg.text)
        elif msg.role == "user":
            events.append(UserMessageEvent(content=msg.content, **ident))
        elif msg.role == "assistant":
            meta = getattr(lc, "response_metadata", None) or {}
            finish = finish_reason_from_langchain(meta)
            model = meta.get("model_name") or meta.get("model")
            events.append(
                AssistantMessageEvent(
                    content=msg.content,
                    usage=usage_from_langchain(getattr(lc, "usage_metadata", None)),
                    finish_reason=finish[0] if finish else None,
                    model=model if isinstance(model, str) else None,
                    **ident,
                )
            )
        else:
            part = msg.content[0]
            assert isinstance(part, ToolResultPart)
            events.append(
                ToolResultEvent(
                    tool_call_id=part.tool_call_id, tool_name=part.tool_name, output=part.output, **ident
                )
            )
    return LangChainHistory(system="\n\n".join(system) if system else None, events=tuple(events))
