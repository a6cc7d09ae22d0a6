"""The agent event stream: what a running generation does, as it does it.

``Session.stream(...)`` and ``run_agent_stream(...)`` run a generation on a worker
thread and hand the caller an :class:`AgentStream`: an iterator of :class:`AgentEvent`
objects, ending with exactly one ``generation-end``, and a ``.result``. The same events
feed the ``on_token``/``on_tool_call_*`` callbacks, so there is one event path.

Event types, in the order a generation produces them::

    generation-start
      step-start                      one per model call
        text-delta / reasoning-delta  as the model writes
        tool-call                     the model asked for a call (complete input)
      tool-start, tool-update, tool-end   per call, results in model order
      step-end
    generation-end                    .result or .error
"""

from __future__ import annotations

import contextvars
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal

from typing_extensions import TypeVar

from .._threads import anyio_module, stream_pool
from ..cancel import CancelToken
from ..errors import ConfigurationError
from ..messages import Message, ToolCallPart, _output_to_dict, content_to_dict
from ..results import RunResult, Step, ToolCallRecord

__all__ = [
    "AgentEvent",
    "AgentStream",
    "GenerationEndEvent",
    "GenerationStartEvent",
    "ReasoningDeltaEvent",
    "StepEndEvent",
    "StepStartEvent",
    "TextDeltaEvent",
    "ToolCallRequestedEvent",
    "ToolEndEvent",
    "ToolStartEvent",
    "ToolUpdateEvent",
]


def _json_safe(value: Any) -> Any:
    """``value`` if JSON can carry it, else its ``repr`` (progress updates are free-form)."""
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _output_json(value: Any) -> Any:
    """A structured output as JSON (pydantic serialises models, dataclasses...)."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return _json_safe(value)


def _call_dict(call: ToolCallPart) -> dict[str, Any]:
    return {"tool_call_id": call.tool_call_id, "tool_name": call.tool_name, "input": _json_safe(call.input)}


def _record_dict(record: ToolCallRecord) -> dict[str, Any]:
    return {
        "tool_call_id": record.tool_call_id,
        "tool_name": record.tool_name,
        "input": _json_safe(record.input),
        "output": _output_to_dict(record.output),
        "is_error": record.is_error,
        "reused": record.reused,
    }


def _messages_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A transcript as JSON: role and content of each message."""
    return [{"role": m.role, "content": content_to_dict(m.content)} for m in messages]


def _step_dict(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "text": step.text,
        "finish_reason": step.finish_reason,
        "usage": step.usage.to_dict(),
        "tool_calls": [_record_dict(r) for r in step.tool_calls],
    }


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base class of the events an :class:`AgentStream` yields; ``type`` names the kind."""

    type: ClassVar[str] = "agent-event"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``{"type": ..., ...}``), e.g. for Server-Sent Events."""
        return {"type": self.type, **self._payload()}

    def _payload(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, kw_only=True)
class GenerationStartEvent(AgentEvent):
    """The generation holds the gate and is about to make its first model call."""

    type: ClassVar[str] = "generation-start"
    session_id: str | None = None

    def _payload(self) -> dict[str, Any]:
        return {"session_id": self.session_id}


@dataclass(frozen=True, kw_only=True)
class StepStartEvent(AgentEvent):
    """A model call (step ``index``) begins."""

    type: ClassVar[str] = "step-start"
    index: int

    def _payload(self) -> dict[str, Any]:
        return {"index": self.index}


@dataclass(frozen=True, kw_only=True)
class TextDeltaEvent(AgentEvent):
    """A piece of assistant text."""

    type: ClassVar[str] = "text-delta"
    text: str

    def _payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, kw_only=True)
class ReasoningDeltaEvent(AgentEvent):
    """A piece of the model's reasoning (thinking) text."""

    type: ClassVar[str] = "reasoning-delta"
    text: str

    def _payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, kw_only=True)
class ToolCallRequestedEvent(AgentEvent):
    """The model asked for a tool call (its input is complete)."""

    type: ClassVar[str] = "tool-call"
    call: ToolCallPart

    def _payload(self) -> dict[str, Any]:
        return _call_dict(self.call)


@dataclass(frozen=True, kw_only=True)
class ToolStartEvent(AgentEvent):
    """A tool call is about to run (or to be answered: reused, unknown, blocked)."""

    type: ClassVar[str] = "tool-start"
    call: ToolCallPart

    def _payload(self) -> dict[str, Any]:
        return _call_dict(self.call)


@dataclass(frozen=True, kw_only=True)
class ToolUpdateEvent(AgentEvent):
    """A running tool reported progress (``ToolContext.report_progress``)."""

    type: ClassVar[str] = "tool-update"
    tool_call_id: str
    update: Any = None

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "update": _json_safe(self.update)}


@dataclass(frozen=True, kw_only=True)
class ToolEndEvent(AgentEvent):
    """A tool call's result was committed."""

    type: ClassVar[str] = "tool-end"
    record: ToolCallRecord

    def _payload(self) -> dict[str, Any]:
        return _record_dict(self.record)


@dataclass(frozen=True, kw_only=True)
class StepEndEvent(AgentEvent):
    """A step (one model call and its tool calls) is complete."""

    type: ClassVar[str] = "step-end"
    step: Step

    def _payload(self) -> dict[str, Any]:
        return _step_dict(self.step)


@dataclass(frozen=True, kw_only=True)
class GenerationEndEvent(AgentEvent):
    """The generation ended: with ``result``, or with ``error``."""

    type: ClassVar[str] = "generation-end"
    result: RunResult | None = None
    error: BaseException | None = field(default=None, compare=False)

    def _payload(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": {"type": type(self.error).__name__, "message": str(self.error)}}
        assert self.result is not None
        r = self.result
        return {
            "result": {
                "text": r.text,
                "finish_reason": r.finish_reason,
                "usage": r.usage.to_dict(),
                "steps": len(r.steps),
                "tool_calls": [_record_dict(t) for t in r.tool_calls],
                "messages": _messages_json(r.messages),
                **({} if r.output is None else {"output": _output_json(r.output)}),
            }
        }


Emit = Callable[[AgentEvent], None]
"""Where the loop sends agent events."""


def callback_sink(
    *,
    on_token: Callable[[str], Any] | None = None,
    on_reasoning: Callable[[str], Any] | None = None,
    on_tool_call_start: Callable[[ToolCallPart], Any] | None = None,
    on_tool_call_update: Callable[[str, Any], Any] | None = None,
    on_tool_call_finish: Callable[[ToolCallRecord], Any] | None = None,
) -> Emit | None:
    """The classic callbacks as a consumer of the one event path (None when all are None)."""
    table: dict[type[AgentEvent], Callable[[Any], Any]] = {}
    if on_token is not None:
        table[TextDeltaEvent] = lambda e: on_token(e.text)
    if on_reasoning is not None:
        table[ReasoningDeltaEvent] = lambda e: on_reasoning(e.text)
    if on_tool_call_start is not None:
        table[ToolStartEvent] = lambda e: on_tool_call_start(e.call)
    if on_tool_call_update is not None:
        table[ToolUpdateEvent] = lambda e: on_tool_call_update(e.tool_call_id, e.update)
    if on_tool_call_finish is not None:
        table[ToolEndEvent] = lambda e: on_tool_call_finish(e.record)
    if not table:
        return None

    def sink(event: AgentEvent) -> None:
        handler = table.get(type(event))
        if handler is not None:
            handler(event)

    return sink


def fan_out(*sinks: Emit | None) -> Emit | None:
    """One emit function calling each sink in order (None when there is none)."""
    live = [s for s in sinks if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def emit(event: AgentEvent) -> None:
        for sink in live:
            sink(event)

    return emit


class _Buffer:
    """A bounded FIFO between the generation thread (producer) and the consumer. A full
    buffer makes the producer wait; closing it wakes both sides. A side is woken once
    when the other starts waiting for it (not once per event), and the consumer takes
    everything buffered at once, so a consumer that keeps up costs one lock round per
    batch and the producer one uncontended lock per event."""

    def __init__(self, bound: int) -> None:
        self._items: deque[AgentEvent] = deque()
        self._taken: deque[AgentEvent] = deque()  # the consumer's batch (its thread only)
        self._bound = bound
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = False  # the consumer went away: drop what the producer sends
        self._ended = False  # the producer sent its last event
        self._sleepers = 0  # threads waiting on the condition and not yet woken

    def _wait(self, timeout: float | None = None) -> bool:
        """Wait (the lock held) until woken or ``timeout``; the waker clears the count."""
        self._sleepers += 1
        woken = self._cond.wait(timeout)
        if not woken:
            self._sleepers = max(0, self._sleepers - 1)
        return woken

    def _wake(self) -> None:
        if self._sleepers:
            self._sleepers = 0
            self._cond.notify_all()

    def put(self, event: AgentEvent) -> None:
        with self._lock:
            # the consumer's batch counts: at most ``bound`` events wait in all (it
            # takes the next batch, and wakes this thread, when it has used up this one)
            while len(self._items) + len(self._taken) >= self._bound and not self._closed:
                self._wait()
            if self._closed:
                return
            self._items.append(event)
            if self._sleepers:
                self._wake()

    def end(self) -> None:
        with self._lock:
            self._ended = True
            self._sleepers = 0
            self._cond.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._items.clear()
            self._taken.clear()
            self._sleepers = 0
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> AgentEvent | None | Literal[False]:
        """The next event, None when there will be no more, or False when ``timeout``
        seconds passed without one."""
        taken = self._taken
        if taken:
            try:
                return taken.popleft()
            except IndexError:  # closed from another thread just now
                pass
        with self._lock:
            while not self._items and not self._ended and not self._closed:
                if not self._wait(timeout) and timeout is not None:
                    return False
            if not self._items:
                return None
            self._items, self._taken = self._taken, self._items
            if self._sleepers:
                self._wake()
        return self._taken.popleft()


def _submit(fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(*args)`` on a stream thread (:func:`agentkit._threads.stream_pool`), in a
    copy of the caller's context (contextvars), so the generation's tracing span is a
    child of the caller's current span, as without a stream."""
    context = contextvars.copy_context()
    stream_pool().run(lambda: context.run(fn, *args), urgent=True)


class _Run:
    """The generation's side of a stream: all the worker thread holds. It never refers
    to the :class:`AgentStream`, so a stream its consumer dropped can be collected, and
    collecting it cancels the generation (see :func:`_abandoned`)."""

    __slots__ = ("buffer", "cancel", "done", "error", "result")

    def __init__(self, buffer: _Buffer, cancel: CancelToken) -> None:
        self.buffer = buffer
        self.cancel = cancel
        self.done = threading.Event()
        self.result: RunResult | None = None
        self.error: BaseException | None = None

    def work(self, run: Callable[[Emit, CancelToken], RunResult]) -> None:
        ended = False
        put = self.buffer.put

        def emit(event: AgentEvent) -> None:
            nonlocal ended
            if type(event) is GenerationEndEvent:
                ended = True
            put(event)

        try:
            self.result = run(emit, self.cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self.error = exc
        finally:
            if not ended:  # it failed before it started (closed session, bad option)
                self.buffer.put(GenerationEndEvent(result=self.result, error=self.error))
            self.done.set()
            self.buffer.end()

    def stop(self, reason: str) -> None:
        """Cancel the generation if it still runs and drop what is buffered (a producer
        waiting for room goes on at once), without waiting."""
        if not self.done.is_set():
            self.cancel.cancel(reason)
        self.buffer.close()


class _Reaper:
    """Stops the generations of streams collected before their end, on its own daemon
    thread: a weakref callback may run inside the cyclic garbage collector, on any
    thread, while that thread holds any lock (a buffer's, a token's), so it only puts
    the run on a queue (``SimpleQueue.put`` is safe there) and this thread stops it."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Run] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def ensure_running(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():  # not started yet, or lost in a fork
            with self._lock:
                if self._thread is thread:
                    self._thread = threading.Thread(target=self._serve, name="agentkit-stream-reaper", daemon=True)
                    self._thread.start()

    def abandoned(self, run: _Run) -> None:
        if not run.done.is_set():  # a flag read: no lock taken
            self._queue.put(run)

    def _serve(self) -> None:
        while True:
            self._queue.get().stop("the stream was dropped before its end, without close()")


_REAPER = _Reaper()

OutputT = TypeVar("OutputT", default=Any, covariant=True)


class AgentStream(Iterator[AgentEvent], Generic[OutputT]):
    """A generation running on a worker thread, consumed as an iterator of events.

    Iterate it (on any one thread) to receive every :class:`AgentEvent` in order; the
    last is a ``generation-end``. ``.result`` waits for the end and returns the result
    or raises the generation's error. ``close()`` (or leaving a ``with`` block) before
    the end cancels the generation; what it committed stays committed. A stream dropped
    before its end without ``close()`` cancels it too, once it is garbage collected.
    Events wait in a bounded buffer: when the consumer falls ``max_buffer`` events
    behind, the generation waits for it, so a slow consumer loses nothing and memory
    stays bounded.
    """

    def __init__(
        self,
        run: Callable[[Emit, CancelToken], RunResult[OutputT]],
        *,
        max_buffer: int = 1000,
        cancel: CancelToken | None = None,
    ) -> None:
        if not isinstance(max_buffer, int) or max_buffer < 1:
            raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")
        self._buffer = _Buffer(max_buffer)
        self._cancel = CancelToken()
        if cancel is not None:
            cancel.link(self._cancel)
        self._run = _Run(self._buffer, self._cancel)
        self._done = self._run.done
        self._finished = False
        _REAPER.ensure_running()
        weakref.finalize(self, _REAPER.abandoned, self._run).atexit = False
        _submit(self._run.work, run)

    def __iter__(self) -> AgentStream[OutputT]:
        return self

    def __next__(self) -> AgentEvent:
        taken = self._buffer._taken  # the batch in hand: no lock, no wait
        if taken and not self._finished:
            try:
                ready = taken.popleft()
            except IndexError:  # closed from another thread just now
                pass
            else:
                if type(ready) is GenerationEndEvent:
                    self._finished = True
                return ready
        event = self._next_within(None)
        if event is None:
            raise StopIteration
        assert event is not False
        return event

    def _next_within(self, timeout: float | None) -> AgentEvent | None | Literal[False]:
        """The next event, None at the end, or False when ``timeout`` seconds passed
        without one (web helpers send a keep-alive then)."""
        if self._finished:
            return None
        event = self._buffer.get(timeout)
        if event is None:
            self._finished = True
        elif isinstance(event, GenerationEndEvent):
            self._finished = True
        return event

    @property
    def result(self) -> RunResult[OutputT]:
        """The generation's result (waits for its end); raises its error instead when it
        failed or was cancelled. Events not yet consumed are discarded."""
        if not self._done.is_set():
            self._buffer.close()  # nobody will read them: the producer must not wait
            self._done.wait()
        if self._run.error is not None:
            raise self._run.error
        assert self._run.result is not None
        return self._run.result

    @property
    def done(self) -> bool:
        """True once the generation has ended."""
        return self._done.is_set()

    def close(self, reason: str = "stream closed") -> None:
        """Stop consuming: cancel the generation if it is still running and wait for it
        to stop. Idempotent."""
        self._stop(reason)
        self._done.wait()

    def _stop(self, reason: str) -> None:
        """Cancel the generation and drop what is buffered, without waiting."""
        self._finished = True
        self._run.stop(reason)

    def __enter__(self) -> AgentStream[OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async consumers (ASGI views): each wait runs on a worker thread (anyio) -------

    def __aiter__(self) -> AgentStream[OutputT]:
        return self

    async def __anext__(self) -> AgentEvent:
        """The next event, awaited without blocking the event loop. Cancelling the
        awaiting task closes the stream (and so cancels the generation)."""
        event = await self._anext_within(None)
        if event is None:
            raise StopAsyncIteration
        assert event is not False
        return event

    async def _anext_within(self, timeout: float | None) -> AgentEvent | None | Literal[False]:
        anyio = anyio_module()
        try:
            event: AgentEvent | None | Literal[False] = await anyio.to_thread.run_sync(
                self._next_within, timeout, abandon_on_cancel=True
            )
        except BaseException:
            self._stop("the consuming task was cancelled")
            raise
        return event

    async def aclose(self, reason: str = "stream closed") -> None:
        """:meth:`close` for async code: waits for the generation to stop on a worker thread."""
        anyio = anyio_module()
        self._stop(reason)  # at once, even when this task is being cancelled
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._done.wait)
