"""What the chat REPL writes to the terminal: agent events as they stream, the history,
and the approval question (read from the terminal on the generation's thread)."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, TextIO

from ..messages import Message, TextPart, ToolCallPart, ToolOutput, ToolResultPart
from ..streaming._events import (
    AgentEvent,
    ReasoningDeltaEvent,
    StepStartEvent,
    TextDeltaEvent,
    ToolEndEvent,
    ToolStartEvent,
)

_SHOW_CHARS = 200


def short(value: Any, limit: int = _SHOW_CHARS) -> str:
    """``value`` on one line, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Screen:
    """Writes to the terminal; remembers whether the cursor is at the start of a line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._at_line_start = True
        self._lock = threading.Lock()
        self.reported: set[str] = set()
        """Ids of tool calls whose outcome was already shown (a denial at Ctrl-C): the
        next turn settles them in the log, and says nothing more about them."""

    def write(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._out.write(text)
            self._out.flush()
            self._at_line_start = text.endswith("\n")

    def line(self, text: str = "") -> None:
        """``text`` on a line of its own."""
        self.write(("" if self._at_line_start else "\n") + text + "\n")

    def typed(self) -> None:
        """The user ended a line at the keyboard: the cursor is at the start of a line."""
        with self._lock:
            self._at_line_start = True

    def end_line(self) -> None:
        if not self._at_line_start:
            self.write("\n")

    def event(self, event: AgentEvent) -> None:
        """Show one agent event: text as it streams, tool calls and results on their own lines."""
        if isinstance(event, TextDeltaEvent):
            self.write(event.text)
        elif isinstance(event, ReasoningDeltaEvent):
            pass  # reasoning is not shown; the answer is
        elif isinstance(event, StepStartEvent) and event.index > 0:
            self.end_line()
        elif isinstance(event, ToolStartEvent):
            if event.call.tool_call_id not in self.reported:
                self.line(f"[tool] {event.call.tool_name} {short(event.call.input)}")
        elif isinstance(event, ToolEndEvent):
            if event.record.tool_call_id in self.reported:
                self.reported.discard(event.record.tool_call_id)  # a call denied earlier: not run now
            else:
                record = event.record
                self.line(f"{_mark(record.output)} {record.tool_name}: {short(record.output.as_text())}")

    def history(self, messages: list[Message]) -> None:
        """The conversation as the model sees it, one line per part."""
        if not messages:
            self.line("(the conversation is empty)")
        for message in messages:
            for part in message.content:
                if isinstance(part, TextPart):
                    self.line(f"{message.role}: {short(part.text, 500)}")
                elif isinstance(part, ToolCallPart):
                    self.line(f"{message.role}: [tool] {part.tool_name} {short(part.input)}")
                elif isinstance(part, ToolResultPart):
                    self.line(f"{message.role}: {_mark(part.output)} {part.tool_name}: {short(part.output.as_text())}")


def _mark(output: ToolOutput) -> str:
    """How a tool result is labelled, live and in the history: ``[error]`` for an error
    result (a denied call too), else ``[result]``."""
    return "[error]" if output.is_error else "[result]"


def read_answer(interactive: bool, abort: threading.Event) -> str | None:
    """One line typed at the terminal, read on a generation's thread while the REPL's
    thread waits for events; None when ``abort`` is set (Ctrl-C) or input ended."""
    if not interactive or os.name != "posix":
        line = sys.stdin.readline()
        return line if line else None
    import select

    fd = sys.stdin.fileno()
    data = b""
    while not abort.is_set():
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready or abort.is_set():
            continue
        chunk = os.read(fd, 1024)
        if not chunk:
            return None
        data += chunk
        if b"\n" in data:
            return data.decode(errors="replace")
    return None
