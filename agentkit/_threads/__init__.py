"""agentkit's threads, written once (private): every thread the runtime starts or waits
for goes through here.

- :mod:`._pool`: the one bounded pool implementation, :class:`WorkerPool`, and the
  process-wide pools built from it: tool calls (:func:`tool_pool`, reached per session
  through a :class:`SessionExecutor`), listener delivery (:func:`delivery_pool`) and
  stream generations (:func:`stream_pool`).
- :mod:`._wait`: run on a thread and wait, honouring a CancelToken
  (:func:`run_and_wait`, :func:`wait_future`, :class:`CallTimeout`), the one reader of
  ``ChatModel.stream`` (:class:`ModelStream`) and the async front doors' bridge
  (:func:`run_sync_cancellable`).
- :mod:`._listeners`: the one listener queue (:class:`ListenerQueue`): bounded, in
  order, delivered on the delivery pool, so a slow listener never blocks the others.
- :mod:`._eventloop`: the one background event loop implementation for async-only
  dependencies (:class:`LoopThread`): one per MCP toolset, and :func:`shared_loop`, the
  process's one for coroutine-only tools.
"""

from __future__ import annotations

from ._eventloop import LoopThread, shared_loop
from ._listeners import ListenerQueue
from ._pool import SessionExecutor, WorkerPool, delivery_pool, stream_pool, tool_pool
from ._wait import (
    CallTimeout,
    ModelStream,
    anyio_module,
    run_and_wait,
    run_sync_cancellable,
    wait_future,
)

__all__ = [
    "CallTimeout",
    "ListenerQueue",
    "LoopThread",
    "ModelStream",
    "SessionExecutor",
    "WorkerPool",
    "anyio_module",
    "delivery_pool",
    "run_and_wait",
    "run_sync_cancellable",
    "shared_loop",
    "stream_pool",
    "tool_pool",
    "wait_future",
]
