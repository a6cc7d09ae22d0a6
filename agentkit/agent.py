"""``run_agent``: one call, a complete tool-using agent loop."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ._foreign import history_from
from .cancel import CancelToken
from .errors import ConfigurationError
from .invariants import check_messages
from .messages import Message, Prompt
from .models.base import ChatModel
from .projection import events_from_messages
from .results import RunResult
from .session import Session
from .stream import AgentStream, Emit

__all__ = ["run_agent", "run_agent_stream"]

def run_agent(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None,
    execution_context: Any = None,
    cancel: CancelToken | None = None,
    _emit: Emit | None = None,
    **options: Any,
) -> RunResult:
    """Send ``prompt`` to ``model`` and run tool calls until the model answers.

    ``model`` is a :class:`~agentkit.models.ChatModel` or a spec such as
    ``"openai:gpt-4.1-mini"``. ``messages`` continues an earlier conversation (pass a
    previous ``result.messages``); system messages in it become the system prompt.
    ``options`` are the per-generation options (:class:`~agentkit.options.GenerationOptions`:
    ``system``, ``max_steps``, ``hooks``, callbacks...). Returns a :class:`RunResult`; a
    thin wrapper over :class:`Session`.
    """
    history = history_from(messages)
    system_texts = [m.text for m in history if isinstance(m, Message) and m.role == "system"]
    if system_texts:
        given = options.get("system")
        options["system"] = "\n\n".join(([given] if given else []) + system_texts)
        history = [m for m in history if not (isinstance(m, Message) and m.role == "system")]
    check_messages(history, what="messages")
    if not isinstance(prompt, str) and isinstance(prompt, Message):
        raise ConfigurationError("prompt must be text or content parts; pass Message history as messages=")
    with Session(
        model, tools=tools, events=events_from_messages(history), execution_context=execution_context, **options
    ) as session:
        session.push_user_message(prompt)
        result = session.generate(cancel=cancel, _emit=_emit)
        return RunResult(**{f: getattr(result, f) for f in RunResult.__dataclass_fields__})


def run_agent_stream(
    model: ChatModel | str, prompt: Prompt, *, max_buffer: int = 1000, cancel: CancelToken | None = None,
    **kwargs: Any,
) -> AgentStream:
    """:func:`run_agent` on a worker thread, as an :class:`~agentkit.AgentStream` of its
    events: iterate it, then read ``.result`` (a :class:`RunResult`). Closing the stream
    early cancels the run. Takes the same keyword arguments as :func:`run_agent`."""
    if "_emit" in kwargs:
        raise ConfigurationError("run_agent_stream() does not take _emit=")

    def run(emit: Emit, token: CancelToken) -> RunResult:
        return run_agent(model, prompt, cancel=token, _emit=emit, **kwargs)

    return AgentStream(run, max_buffer=max_buffer, cancel=cancel)
