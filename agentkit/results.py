"""What a run returns."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Generic, cast

from typing_extensions import TypeVar

from .events import Event
from .messages import Message, ToolOutput
from .usage import Usage

OutputT = TypeVar("OutputT", default=Any, covariant=True)
"""The type of a result's ``output``: the ``output_type`` a run was given (None without
one; ``Any`` where a bare ``RunResult`` is named)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallRecord:
    """One tool call of a run and what came of it. Named as the call is everywhere else
    (``ToolCallPart``, ``ToolResultEvent``, the stream's JSON): ``tool_call_id`` and
    ``tool_name``."""

    tool_call_id: str
    tool_name: str
    input: Any
    output: ToolOutput
    reused: bool = False
    """True when a repeated call id with identical input reused the first result."""
    cache: dict[str, Any] | None = None
    """Set when the output came from the tool's cache (the result event's ``cache``)."""

    @property
    def is_error(self) -> bool:
        """True when the call produced an error result."""
        return self.output.is_error

    @property
    def id(self) -> str:
        """Deprecated name of :attr:`tool_call_id` (0.1.0)."""
        _renamed("id", "tool_call_id")
        return self.tool_call_id

    @property
    def name(self) -> str:
        """Deprecated name of :attr:`tool_name` (0.1.0)."""
        _renamed("name", "tool_name")
        return self.tool_name

    @property
    def error(self) -> str | None:
        """The error text, or None on success."""
        return self.output.as_text() if self.output.is_error else None


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"ToolCallRecord.{old} is deprecated; use ToolCallRecord.{new}", DeprecationWarning, stacklevel=3)


@dataclass(frozen=True, kw_only=True)
class Step:
    """One model call of a run."""

    index: int
    text: str
    tool_calls: tuple[ToolCallRecord, ...]
    usage: Usage
    finish_reason: str


@dataclass(frozen=True, kw_only=True)
class RunResult(Generic[OutputT]):
    """The outcome of ``run_agent`` (and of ``Session.generate``). ``RunResult[City]``
    is the result of a run with ``output_type=City``: its ``output`` is a ``City``."""

    text: str
    """The final assistant text."""
    finish_reason: str
    """``stop``, ``length``, ``content-filter``, ``error``, ``other``, ``max-steps``,
    ``budget-exceeded`` (a :class:`~agentkit.Limits` limit), ``approval-required``
    (tool calls wait for ``Session.approve``/``deny``), ``input-required`` (a tool
    asked a person with ``ctx.ask_human``: ``Session.answer_input``) or ``nothing-to-answer``
    (``Session.generate`` found nothing new to answer and called no model)."""
    steps: tuple[Step, ...]
    messages: tuple[Message, ...]
    """The whole conversation as the model sees it (without the system prompt). Pass it
    back as ``messages=`` to continue."""
    usage: Usage
    """Summed over every step of this run."""
    tool_calls: tuple[ToolCallRecord, ...]
    output: OutputT = cast("OutputT", None)
    """The structured output, a validated instance of ``output_type``; None without an
    ``output_type`` (or when the run ended before the model gave one: ``max-steps``,
    ``budget-exceeded``, ``approval-required``, ``input-required``)."""


@dataclass(frozen=True, kw_only=True)
class GenerateResult(RunResult[OutputT]):
    """A RunResult plus a snapshot of the session's events when the generation ended."""

    events: tuple[Event, ...]
