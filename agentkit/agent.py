"""``run_agent``: one call, a complete tool-using agent loop."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .agents import run_once
from .cancel import CancelToken
from .errors import ConfigurationError
from .messages import Message, Prompt
from .models.base import ChatModel
from .options import GenerationOptions, option_names
from .results import RunResult
from .streaming._stream import AgentStream, Emit


def run_agent(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None,
    execution_context: Any = None,
    cancel: CancelToken | None = None,
    deps: Any = None,
    deps_type: Any = None,
    _emit: Emit | None = None,
    **options: Any,
) -> RunResult:
    """Send ``prompt`` to ``model`` and run tool calls until the model answers.

    ``model`` is a :class:`~agentkit.models.ChatModel` or a spec such as
    ``"openai:gpt-4.1-mini"``. ``messages`` continues an earlier conversation (pass a
    previous ``result.messages``); system messages in it become the system prompt.
    ``options`` are the per-generation options (:class:`~agentkit.options.GenerationOptions`:
    ``system``, ``max_steps``, ``hooks``, ``output_type``, callbacks...); ``deps`` reach
    tools and hooks as ``ToolContext.deps``. Returns a :class:`RunResult`. The one-call
    form of :class:`~agentkit.Agent`: ``Agent(model, tools=..., **options).run(prompt)``.
    """
    _check_model(model, "run_agent")
    names = option_names()
    session_kwargs = {k: options.pop(k) for k in list(options) if k not in names}  # store=, retention=...
    return run_once(model, prompt, tools=tools, options=GenerationOptions.build(options), messages=messages,
                    execution_context=execution_context, deps=deps, deps_type=deps_type, cancel=cancel, emit=_emit,
                    session_kwargs=session_kwargs)


def run_agent_stream(
    model: ChatModel | str, prompt: Prompt, *, max_buffer: int = 1000, cancel: CancelToken | None = None,
    **kwargs: Any,
) -> AgentStream:
    """:func:`run_agent` on a worker thread, as an :class:`~agentkit.AgentStream` of its
    events: iterate it, then read ``.result`` (a :class:`RunResult`). Closing the stream
    early cancels the run. Takes the same keyword arguments as :func:`run_agent`."""
    if "_emit" in kwargs:
        raise ConfigurationError("run_agent_stream() does not take _emit=")
    _check_model(model, "run_agent_stream")

    def run(emit: Emit, token: CancelToken) -> RunResult:
        return run_agent(model, prompt, cancel=token, _emit=emit, **kwargs)

    return AgentStream(run, max_buffer=max_buffer, cancel=cancel)


def _check_model(model: Any, function: str) -> None:
    if model is None:
        raise ConfigurationError(
            f"{function}() needs a model as its first argument: a ChatModel or a spec such as "
            f"'openai:gpt-4.1-mini' (got None)"
        )
