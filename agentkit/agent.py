"""``run_agent``: one call, a complete tool-using agent loop."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._foreign import history_from
from .cancel import CancelToken
from .errors import ConfigurationError
from .loop import ToolExecution
from .messages import Message, Prompt, ToolCallPart
from .models.base import ChatModel, ModelSettings, ToolChoice
from .projection import events_from_messages
from .results import RunResult, ToolCallRecord
from .session import Session

__all__ = ["run_agent"]

def run_agent(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    system: str | None = None,
    tools: Iterable[Any] = (),
    max_steps: int = 20,
    messages: Sequence[Message] | None = None,
    on_token: Callable[[str], Any] | None = None,
    on_reasoning: Callable[[str], Any] | None = None,
    on_tool_call_start: Callable[[ToolCallPart], Any] | None = None,
    on_tool_call_update: Callable[[str, Any], Any] | None = None,
    on_tool_call_finish: Callable[[ToolCallRecord], Any] | None = None,
    validate_completion: Callable[[RunResult], str | None] | None = None,
    max_validation_retries: int = 0,
    on_context_overflow: Callable[[list[Message], CancelToken], Sequence[Message]] | None = None,
    max_context_overflow_retries: int = 3,
    cancel: CancelToken | None = None,
    tool_execution: ToolExecution = "parallel",
    tool_choice: ToolChoice = "auto",
    settings: ModelSettings | None = None,
    provider_options: dict[str, Any] | None = None,
    execution_context: Any = None,
) -> RunResult:
    """Send ``prompt`` to ``model`` and run tool calls until the model answers.

    ``model`` is a :class:`~agentkit.models.ChatModel` or a spec such as
    ``"openai:gpt-4.1-mini"``. ``messages`` continues an earlier conversation (pass a
    previous ``result.messages``); system messages in it become the system prompt.
    Returns a :class:`RunResult`; a thin wrapper over :class:`Session`.
    """
    history = history_from(messages)
    system_texts = [m.text for m in history if isinstance(m, Message) and m.role == "system"]
    if system_texts:
        system = "\n\n".join(([system] if system else []) + system_texts)
        history = [m for m in history if not (isinstance(m, Message) and m.role == "system")]
    if not isinstance(prompt, str) and isinstance(prompt, Message):
        raise ConfigurationError("prompt must be text or content parts; pass Message history as messages=")
    with Session(
        model,
        tools=tools,
        system=system,
        events=events_from_messages(history),
        max_steps=max_steps,
        tool_execution=tool_execution,
        tool_choice=tool_choice,
        settings=settings,
        provider_options=provider_options,
        execution_context=execution_context,
    ) as session:
        session.push_user_message(prompt)
        result = session.generate(
            on_token=on_token,
            on_reasoning=on_reasoning,
            on_tool_call_start=on_tool_call_start,
            on_tool_call_update=on_tool_call_update,
            on_tool_call_finish=on_tool_call_finish,
            validate_completion=validate_completion,
            max_validation_retries=max_validation_retries,
            on_context_overflow=on_context_overflow,
            max_context_overflow_retries=max_context_overflow_retries,
            cancel=cancel,
        )
        return RunResult(**{f: getattr(result, f) for f in RunResult.__dataclass_fields__})
