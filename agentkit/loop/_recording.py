"""What a generation records: its tool calls, content and outputs as they are committed
and shown (a tool's own input redaction, then ``redact=``; the tool runs with the call
itself), the tally of its steps, tool-call records and usage, and the result made of
them; the calls a stopped generation left open are closed as interrupted."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from ..context._budget import Budget
from ..context._projection import INTERRUPTED_RESULT
from ..errors import HookError
from ..events import Event, ToolResultEvent
from ..messages import ContentPart, Message, ToolCallPart, ToolOutput
from ..results import RunResult, Step, ToolCallRecord
from ..session._redaction import Redactor
from ..tools.base import ToolRegistry
from ..usage import Usage
from ._host import LoopHost

__all__ = ["GenerationRecord", "close_orphans", "interrupted"]


class GenerationRecord:
    """One generation's record: what it commits of calls, content and outputs, and what
    its result reports (steps, tool-call records, usage)."""

    def __init__(self, tools: ToolRegistry, redactor: Redactor | None, budget: Budget | None) -> None:
        self.tools = tools
        self.redactor = redactor
        self.budget = budget
        self.steps: list[Step] = []
        self.records: list[ToolCallRecord] = []
        self.usage = Usage()
        self.tool_usage = Usage()
        """Tokens tools reported spending on this generation's behalf (child agents)."""
        self.tally = threading.Lock()  # tool threads report usage while the loop adds its own

    # -- what is committed and shown (redaction) ---------------------------------------

    def call(self, call: ToolCallPart) -> ToolCallPart:
        """``call`` as it may be committed and shown: the tool's own input redaction
        (``Tool.redact_input``), then ``redact=``. The tool runs with the call itself."""
        tool = self.tools.get(call.tool_name)
        if tool is not None and tool.redact_input is not None and call.input_error is None:
            try:
                call = replace(call, input=tool.redact_input(call.input))
            except Exception as exc:  # noqa: BLE001 - a tool author's bug, named
                raise HookError(f"redact_input of tool {tool.name!r} raised {type(exc).__name__}: {exc}",
                                hook="redact_input") from exc
        return call if self.redactor is None else self.redactor.call(call)

    def content(self, content: tuple[ContentPart, ...]) -> tuple[ContentPart, ...]:
        """An assistant message's content as it is committed (its tool calls redacted)."""
        return tuple(self.call(p) if isinstance(p, ToolCallPart) else p for p in content)

    def output(self, output: ToolOutput) -> ToolOutput:
        """A tool call's output as it is committed and shown (``redact=``)."""
        return output if self.redactor is None else self.redactor.output(output)

    # -- the tally -----------------------------------------------------------------------

    def add_model_call(self, usage: Usage) -> None:
        """Count a model call's tokens (in the usage and against ``limits``)."""
        with self.tally:
            self.usage = self.usage + usage
            if self.budget is not None:
                self.budget.add_model_call(usage)

    def report_usage(self, usage: Usage) -> bool:
        """``ToolContext.report_usage``: tokens a tool spent for this generation (on its
        thread); False once a token limit is reached."""
        with self.tally:
            self.tool_usage = self.tool_usage + usage
            if self.budget is None:
                return True
            self.budget.add_usage(usage)
            return self.budget.tokens_exceeded() is None

    def result(self, messages: list[Message], text: str, finish: str, output: Any = None) -> RunResult:
        """The generation's result: its conversation ``messages``, last ``text``, why it
        finished and its structured output."""
        return RunResult(
            text=text,
            finish_reason=finish,
            steps=tuple(self.steps),
            messages=tuple(messages),
            usage=self.usage + self.tool_usage,
            tool_calls=tuple(self.records),
            output=output,
        )


def interrupted() -> ToolOutput:
    """The result of a call that was left open and will not run (again)."""
    return ToolOutput.error(INTERRUPTED_RESULT)


def close_orphans(host: LoopHost, pending: dict[str, str]) -> None:
    """Close the open calls ``pending`` (id -> tool name) as interrupted."""
    def decide() -> list[Event]:  # only the calls still open (another process may have closed some)
        still = host.project(for_model=False)[1]
        return [ToolResultEvent(tool_call_id=cid, tool_name=name, output=interrupted())
                for cid, name in pending.items() if cid in still]

    host.decide(decide)
