"""Web helpers: Server-Sent Events from an agent stream, and async front doors.

- :func:`sse` turns an :class:`~agentkit.AgentStream` into Server-Sent Events text for a
  sync framework's streaming response (Flask ``Response``, Django
  ``StreamingHttpResponse``); :func:`sse_async` does the same for an async one
  (FastAPI/Starlette ``StreamingResponse``). One ``data: <json>`` record per agent event
  (``event.to_dict()``). When the client disconnects, the server closes the iterator:
  that closes the stream, which cancels the generation.
- :func:`ask_async` and :func:`stream_async` are the async doors of
  :meth:`Session.ask <agentkit.Session.ask>` and :meth:`Session.ask_stream
  <agentkit.Session.ask_stream>` (the sync runtime on worker threads via
  ``anyio.to_thread``; never a second runtime).

:class:`~agentkit.SessionPool` (one live Session per conversation per process) is
exported from the top-level package.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

from ..errors import ConfigurationError
from ..messages import Prompt
from ..results import GenerateResult
from ..session._session import Session
from ..streaming._events import AgentEvent, GenerationEndEvent, _messages_json, _output_json
from ..streaming._stream import AgentStream

__all__ = [
    "KEEP_ALIVE", "SSE_HEADERS", "AsyncSSEIterator", "SSEIterator", "ask_async", "sse", "sse_async", "sse_record",
]

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""Headers for an SSE response: no caching, no proxy buffering (nginx)."""


def sse_record(event: AgentEvent, *, include_messages: bool = False) -> str:
    """One Server-Sent Events record: ``data: <json>`` and a blank line. The JSON is
    ``event.to_dict()``, except for a ``generation-end`` with a result: its ``result``
    holds ``text``, ``output``, ``finish_reason`` and ``usage`` only (a bounded payload,
    whatever the history's length; no tool outputs), and ``include_messages=True`` adds
    ``messages``, the transcript."""
    if type(event) is GenerationEndEvent and event.result is not None:
        r = event.result
        result: dict[str, Any] = {
            "text": r.text,
            "output": None if r.output is None else _output_json(r.output),
            "finish_reason": r.finish_reason,
            "usage": r.usage.to_dict(),
        }
        if include_messages:
            result["messages"] = _messages_json(r.messages)
        data: dict[str, Any] = {"type": event.type, "result": result}
    else:
        data = event.to_dict()
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


KEEP_ALIVE = ": keep-alive\n\n"
"""An SSE comment line: browsers ignore it; writing it is how a WSGI server finds out
that the client went away while the agent is quiet (a long tool call)."""


def sse(stream: AgentStream, *, heartbeat: float | None = 15.0, include_messages: bool = False) -> SSEIterator:
    """The events of ``stream`` as Server-Sent Events text, one record per event (see
    :func:`sse_record`; ``include_messages=True`` adds the transcript to
    ``generation-end``), and a :data:`KEEP_ALIVE` comment every ``heartbeat / 2`` quiet
    seconds: a WSGI server finds a client that went away at the second write after it
    left, so within ``heartbeat`` seconds. Closing this iterator early (WSGI servers do
    when a write fails), even before its first item, closes the stream and cancels its
    generation; so does dropping it::

        return flask.Response(sse(session.ask_stream(message)), mimetype="text/event-stream")
    """
    _check_heartbeat(heartbeat)
    return SSEIterator(stream, heartbeat, include_messages)


def sse_async(
    stream: AgentStream, *, heartbeat: float | None = 15.0, include_messages: bool = False
) -> AsyncSSEIterator:
    """:func:`sse` for async frameworks (FastAPI/Starlette ``StreamingResponse``): each
    wait for an event runs on a worker thread. A client disconnect (the server cancels or
    closes this iterator, also before its first item, or drops it) closes the stream and
    cancels its generation."""
    _check_heartbeat(heartbeat)
    return AsyncSSEIterator(stream, heartbeat, include_messages)


_GONE = "the client went away"


class _SSEBase:
    def __init__(self, stream: AgentStream, heartbeat: float | None, include_messages: bool) -> None:
        self._stream = stream
        # TCP reports a peer that closed only at the second write after it (the first
        # brings back the reset), so two keep-alives per heartbeat notice it within one
        self._wait = None if heartbeat is None else heartbeat / 2
        self._include_messages = include_messages
        self._closed = False

    def _text(self, event: AgentEvent | Literal[False]) -> str:
        return KEEP_ALIVE if event is False else sse_record(event, include_messages=self._include_messages)


class SSEIterator(_SSEBase, Iterator[str]):
    """What :func:`sse` returns: Server-Sent Events text. Its ``close()`` works at any
    time, before the first item too, and closes the stream (cancelling the generation)."""

    def __iter__(self) -> SSEIterator:
        return self

    def __next__(self) -> str:
        if self._closed:
            raise StopIteration
        try:
            event = self._stream._next_within(self._wait)
        except BaseException:
            self.close()
            raise
        if event is None:
            self.close()
            raise StopIteration
        return self._text(event)

    def close(self) -> None:
        """Close the stream: cancel the generation if it still runs, and wait for it to stop."""
        if not self._closed:
            self._closed = True
            self._stream.close(_GONE)


class AsyncSSEIterator(_SSEBase, AsyncIterator[str]):
    """What :func:`sse_async` returns: Server-Sent Events text for async servers. Its
    ``aclose()`` works at any time, before the first item too, and closes the stream."""

    def __aiter__(self) -> AsyncSSEIterator:
        return self

    async def __anext__(self) -> str:
        if self._closed:
            raise StopAsyncIteration
        try:
            event = await self._stream._anext_within(self._wait)
        except BaseException:
            await self.aclose()
            raise
        if event is None:
            await self.aclose()
            raise StopAsyncIteration
        return self._text(event)

    async def aclose(self) -> None:
        """Close the stream: cancel the generation if it still runs, and wait for it to stop."""
        if not self._closed:
            self._closed = True
            await self._stream.aclose(_GONE)


def _check_heartbeat(heartbeat: float | None) -> None:
    if heartbeat is not None and (
        isinstance(heartbeat, bool) or not isinstance(heartbeat, (int, float)) or not heartbeat > 0
    ):
        raise ConfigurationError(f"heartbeat must be a number of seconds > 0 (or None: never), got {heartbeat!r}")


async def ask_async(session: Session[Any, Any], prompt: Prompt, **generate_kwargs: Any) -> GenerateResult[Any]:
    """``await ask_async(session, prompt)``: the same as ``await session.ask_async(prompt)``."""
    return await session.ask_async(prompt, **generate_kwargs)
