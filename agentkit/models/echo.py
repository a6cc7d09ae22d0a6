"""``EchoModel``: a deterministic, offline demo model (spec ``"echo"``).

It needs no key and no network, so a new user can try ``agentkit chat --model echo``
and a test can drive the CLI end to end. It is not a language model: it reads the last
user message and follows these rules (the first word decides)::

    call <tool> [<json object>]   call tool <tool> with that input (default {}); when the
                                  result comes back, answer "<tool> returned: <result>"
    count <n>                     stream "1 2 ... n", one number every `delay` seconds
                                  (0.1 by default): a slow generation to interrupt
    fail                          fail the model call with a ModelError
    help                          list these rules
    anything else                 answer "echo: <the message>"
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigurationError, ModelError
from ..messages import Message, TextPart, ToolResultPart
from ..usage import Usage
from .base import FinishEvent, ModelRequest, StreamEvent, TextDelta, ToolCallEvent, UsageEvent

_RULES = (
    "I am the echo demo model (no key, no network). Say:\n"
    "  call <tool> {json input}  - I call that tool and report its result\n"
    "  count <n>                 - I count to n slowly (try Ctrl-C)\n"
    "  fail                      - my model call fails\n"
    "  anything else             - I echo it"
)

_MAX_COUNT = 1_000_000


def _text(message: Message) -> str:
    return "".join(p.text for p in message.content if isinstance(p, TextPart))


class EchoModel:
    """The offline demo model: echoes the last user message, calls a tool on
    ``call <tool> {json}``, counts slowly on ``count <n>``, fails on ``fail`` (see the
    module docstring). ``delay`` is the pause between counted numbers, in seconds."""

    def __init__(self, name: str = "echo", *, delay: float = 0.1) -> None:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
            raise ConfigurationError(f"EchoModel delay must be a number of seconds >= 0, got {delay!r}")
        self.model_name = name
        self._delay = float(delay)

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Answer ``request`` by the rules of the module docstring."""
        last = request.messages[-1] if request.messages else None
        if last is not None and any(isinstance(p, ToolResultPart) for p in last.content):
            return self._reply(request, self._report(last))
        text = _text(last).strip() if last is not None else ""
        word, _, rest = text.partition(" ")
        word = word.lower()
        if word == "fail":
            raise ModelError("the echo model failed on purpose (you said 'fail')")
        if word == "call" and rest.strip():
            return self._call(request, rest.strip())
        if word == "count":
            return self._count(request, rest.strip())
        if word == "help":
            return self._reply(request, _RULES)
        return self._reply(request, f"echo: {text}")

    def _report(self, message: Message) -> str:
        lines = []
        for part in message.content:
            if isinstance(part, ToolResultPart):
                status = " (error)" if part.output.is_error else ""
                lines.append(f"{part.tool_name} returned{status}: {part.output.as_text()}")
        return "\n".join(lines)

    def _call(self, request: ModelRequest, rest: str) -> Iterator[StreamEvent]:
        name, _, raw = rest.partition(" ")
        tool_input: Any = {}
        if raw.strip():
            try:
                tool_input = json.loads(raw)
            except ValueError:
                return self._reply(request, f"echo: the input of 'call {name}' is not JSON: {raw.strip()}")
        if not isinstance(tool_input, dict):
            return self._reply(request, f"echo: the input of 'call {name}' must be a JSON object")
        # unique across processes: a resumed conversation must never see a call id twice
        call = ToolCallEvent(tool_call_id=f"echo_{uuid.uuid4().hex[:16]}", tool_name=name, input=tool_input)
        return iter((call, _usage(request, len(rest)), FinishEvent("tool-calls")))

    def _count(self, request: ModelRequest, rest: str) -> Iterator[StreamEvent]:
        try:
            n = int(rest)
        except ValueError:
            n = -1
        if not 0 <= n <= _MAX_COUNT:
            return self._reply(request, f"echo: 'count' takes a whole number from 0 to {_MAX_COUNT}")
        return self._counting(request, n)

    def _counting(self, request: ModelRequest, n: int) -> Iterator[StreamEvent]:
        cancel = request.cancel
        for i in range(1, n + 1):
            if i > 1 and self._delay:
                cancel.wait(self._delay)
            cancel.raise_if_cancelled()
            yield TextDelta(f"{i}" if i == 1 else f" {i}")
        yield _usage(request, 2 * n)
        yield FinishEvent("stop")

    def _reply(self, request: ModelRequest, text: str) -> Iterator[StreamEvent]:
        for i in range(0, len(text), 16):
            request.cancel.raise_if_cancelled()
            yield TextDelta(text[i : i + 16])
        yield _usage(request, len(text))
        yield FinishEvent("stop")


def _usage(request: ModelRequest, out_chars: int) -> UsageEvent:
    chars = sum(len(_text(m)) for m in request.messages) + len(request.system or "")
    inp, out = max(1, chars // 4), max(1, out_chars // 4)
    return UsageEvent(Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out))
