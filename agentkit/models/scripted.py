"""Deterministic models for tests, demos and examples."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Union

from ..errors import ConfigurationError, ScriptExhaustedError
from ..events import new_id
from ..messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from ..usage import Usage
from .base import (
    FinishEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)

_KEEP_REQUESTS = 100


@dataclass(frozen=True)
class ToolCall:
    """A scripted tool call: ``ToolCall(name="add", input={"a": 1})``, or positionally
    ``ToolCall("add", {"a": 1})`` as a convenience in scripts (the one public data type
    with a positional form). Without ``id`` (keyword-only) a fresh one is generated; an
    explicit id lets a test script a provider that repeats a call id."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    id: str | None = None

    def __post_init__(self) -> None:
        if self.input is None:  # 0.1.0 accepted None for "no arguments"
            object.__setattr__(self, "input", {})


@dataclass(frozen=True, kw_only=True)
class Turn:
    """A full scripted reply: optional reasoning, text and tool calls."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None


TurnLike = Union[str, ToolCall, Sequence[ToolCall], Turn, Callable[[ModelRequest], Any]]


def _message_chars(message: Message) -> int:
    n = 0
    for p in message.content:
        if isinstance(p, (TextPart, ReasoningPart)):
            n += len(p.text)
        elif isinstance(p, ToolCallPart):
            n += len(p.tool_name) + 16
        elif isinstance(p, ToolResultPart):
            n += len(p.output.as_text())
    return n


class _CharCounter:
    """Running character counts of a growing conversation, so estimating the input size
    of request N costs O(new messages), not O(history). Projections append messages and
    may only replace the last one, so a prefix is reused when its last message object is
    the same one seen before."""

    def __init__(self) -> None:
        self._messages: tuple[Message, ...] = ()
        self._totals: list[int] = [0]

    def count(self, messages: tuple[Message, ...]) -> int:
        keep = len(self._messages) - 1
        if keep <= 0 or len(messages) <= keep or messages[keep - 1] is not self._messages[keep - 1]:
            keep = 0
        totals = self._totals
        del totals[keep + 1 :]
        for i in range(keep, len(messages)):
            totals.append(totals[-1] + _message_chars(messages[i]))
        self._messages = messages
        return totals[-1]


class ScriptedModel:
    """A model that replays a script of turns.

    A turn is a string (text reply), a :class:`ToolCall` or a list of them, a
    :class:`Turn`, or a callable that receives the :class:`ModelRequest` and returns one
    of those. Text streams in several deltas; usage is estimated at four characters per
    token. The last ``keep_requests`` requests (default 100; ``None`` keeps all) are
    recorded in :attr:`requests`, so a model serving a long-running demo does not grow
    without bound; :attr:`request_count` counts them all. Running out of turns raises
    :class:`~agentkit.errors.ScriptExhaustedError`.
    """

    model_name = "scripted"

    def __init__(
        self, turns: Sequence[TurnLike] = (), *, chunk_size: int = 8, keep_requests: int | None = _KEEP_REQUESTS
    ) -> None:
        if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
            raise ConfigurationError("ScriptedModel takes a list of turns, e.g. ['hello']")
        if chunk_size < 1:
            raise ConfigurationError("chunk_size must be at least 1")
        if keep_requests is not None and (
            isinstance(keep_requests, bool) or not isinstance(keep_requests, int) or keep_requests < 0
        ):
            raise ConfigurationError(
                f"keep_requests must be an int >= 0 (how many recent requests to keep) or None "
                f"(keep all), got {keep_requests!r}"
            )
        self._turns = list(turns)
        self._chunk = chunk_size
        self._keep = keep_requests
        self._count = 0
        self._lock = threading.Lock()
        self._chars = _CharCounter()
        self.requests: list[ModelRequest] = []
        """The most recent requests (at most ``keep_requests``), oldest first."""

    @property
    def request_count(self) -> int:
        """How many requests this model has received, including those no longer kept."""
        return self._count

    @property
    def remaining(self) -> int:
        """How many scripted turns are left."""
        return max(0, len(self._turns) - self._count)

    def _record(self, request: ModelRequest) -> int:
        """Keep ``request`` (dropping the oldest beyond ``keep_requests``); returns its
        0-based index among all requests. Called with the lock held."""
        index = self._count
        self._count += 1
        if self._keep != 0:
            self.requests.append(request)
            if self._keep is not None and len(self.requests) > self._keep:
                del self.requests[0]
        return index

    def _next_turn(self, request: ModelRequest) -> TurnLike:
        with self._lock:
            index = self._record(request)
            if index >= len(self._turns):
                raise ScriptExhaustedError(
                    f"ScriptedModel has no turn left: it was given {len(self._turns)} "
                    f"turn(s) and this is request {index + 1}. Add turns to the script."
                )
            return self._turns[index]

    def _resolve(self, turn: Any, request: ModelRequest) -> Turn:
        if callable(turn) and not isinstance(turn, (ToolCall, Turn)):
            turn = turn(request)
        if isinstance(turn, Turn):
            return turn
        if isinstance(turn, str):
            return Turn(text=turn)
        if isinstance(turn, ToolCall):
            return Turn(tool_calls=(turn,))
        if isinstance(turn, Sequence) and all(isinstance(t, ToolCall) for t in turn) and turn:
            return Turn(tool_calls=tuple(turn))
        raise ConfigurationError(
            f"a scripted turn must be str, ToolCall, a list of ToolCall, Turn or a callable "
            f"returning one; got {turn!r}"
        )

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Replay the next turn as stream events."""
        turn = self._resolve(self._next_turn(request), request)
        return self._emit(turn, request)

    def _emit(self, turn: Turn, request: ModelRequest) -> Iterator[StreamEvent]:
        cancel = request.cancel
        out_chars = 0
        if turn.reasoning:
            yield ReasoningDelta(turn.reasoning)
            yield ReasoningDone(ReasoningPart(text=turn.reasoning))
            out_chars += len(turn.reasoning)
        text = turn.text
        step = self._chunk
        for i in range(0, len(text), step):
            cancel.raise_if_cancelled()
            yield TextDelta(text[i : i + step])
        out_chars += len(text)
        for call in turn.tool_calls:
            cancel.raise_if_cancelled()
            call_id = call.id or _call_id()
            out_chars += len(call.name) + len(json.dumps(call.input, default=str))
            yield ToolCallEvent(tool_call_id=call_id, tool_name=call.name, input=call.input)
        with self._lock:
            chars = len(request.system or "") + self._chars.count(request.messages)
        inp = max(1, chars // 4)
        out = max(1, out_chars // 4) if out_chars else 0
        yield UsageEvent(Usage(input_tokens=inp, output_tokens=out, total_tokens=inp + out))
        yield FinishEvent("tool-calls" if turn.tool_calls else "stop")


def _call_id() -> str:
    """A tool-call id for a call the script gave none: random, as real providers' are,
    so the calls of processes sharing one conversation never share an id."""
    return f"call_{new_id()[:24]}"


class FunctionModel(ScriptedModel):
    """A model whose every reply is computed by ``fn(request)`` (returning any turn a
    :class:`ScriptedModel` accepts). It never runs out; like a ScriptedModel it keeps the
    last ``keep_requests`` requests in :attr:`requests`."""

    model_name = "function"

    def __init__(
        self, fn: Callable[[ModelRequest], Any], *, chunk_size: int = 8, keep_requests: int | None = _KEEP_REQUESTS
    ) -> None:
        if not callable(fn):
            raise ConfigurationError("FunctionModel needs a callable fn(request) -> turn")
        super().__init__((), chunk_size=chunk_size, keep_requests=keep_requests)
        self._fn = fn

    def _next_turn(self, request: ModelRequest) -> TurnLike:
        with self._lock:
            self._record(request)
        return self._fn

    @property
    def remaining(self) -> int:  # pragma: no cover - trivial
        """Always a large number: a function model never runs out."""
        return 2**31
