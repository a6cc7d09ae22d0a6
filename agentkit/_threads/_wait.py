"""Waiting for work on another thread, honouring a CancelToken (private).

- :func:`run_and_wait`: run a blocking call on a thread of its own and wait for it, its
  timeout or its token (an approver's prompt, a tool with a timeout, an SDK call that
  cannot be interrupted before its response headers, JSON too deep for this stack).
- :func:`wait_future`: a future's result, or the token's cancel (a tool call).
- :class:`ModelStream`: read a model's stream, closing it at the end, on an error and
  on a cancel, and checking the token between events.
- :func:`run_sync_cancellable`: the async front doors' bridge: async callers (ASGI
  views) await sync work run on a worker thread through ``anyio.to_thread`` -- never a
  second runtime, never an event loop of agentkit's own. Cancelling the awaiting task
  cancels the work through its token.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError

if TYPE_CHECKING:
    from ..models.base import ChatModel, ModelRequest, StreamEvent

__all__ = ["CallTimeout", "ModelStream", "anyio_module", "run_and_wait", "run_sync_cancellable", "wait_future"]

T = TypeVar("T")


class CallTimeout(Exception):
    """A call waited for did not finish within its timeout (its waiter left it)."""


def run_and_wait(fn: Callable[[], T], *, cancel: CancelToken | None = None, timeout: float | None = None,
                 name: str = "agentkit-wait", abandoned: Callable[[T], object] | None = None) -> T:
    """``fn()`` on a new daemon thread named ``name`` (in a copy of the caller's
    contextvars), waited for here: returns its result or raises its exception.

    Raises :class:`~agentkit.errors.CancelledError` (the token's reason) as soon as
    ``cancel`` is set, and :class:`CallTimeout` after ``timeout`` seconds; nothing is sent
    when the token is already cancelled. A result that arrived first wins over both.
    Threads cannot be killed: a call left behind runs on, and when it later returns a
    result, ``abandoned(result)`` runs on its thread (to close what it opened); its
    errors are dropped.
    """
    if cancel is not None:
        cancel.raise_if_cancelled()
    done = threading.Event()
    lock = threading.Lock()
    outcome: list[Any] = []  # [ok, value], then "left" appended by a waiter that left
    context = contextvars.copy_context()

    def run() -> None:
        try:
            result: Any = (True, context.run(fn))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            result = (False, exc)
        with lock:
            left = bool(outcome)
            outcome.append(result)
        done.set()
        if left and result[0] and abandoned is not None:
            abandoned(result[1])

    forget = cancel._on_cancel(done.set) if cancel is not None else None
    try:
        threading.Thread(target=run, name=name, daemon=True).start()
        done.wait(timeout)
        with lock:
            if not outcome:
                outcome.append("left")
                if cancel is not None and cancel.cancelled:
                    raise CancelledError(cancel.reason)
                raise CallTimeout(f"no answer within {timeout:g}s")
    finally:
        if forget is not None:
            forget()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def wait_future(future: Future[T], cancel: CancelToken) -> T:
    """The future's result, or :class:`~agentkit.errors.CancelledError` as soon as
    ``cancel`` is set (work that ignores its token must not hold its waiter)."""
    if not future.done():
        wake = threading.Event()
        forget = cancel._on_cancel(wake.set)
        future.add_done_callback(lambda _: wake.set())
        try:
            wake.wait()
        finally:
            forget()
        if not future.done():
            raise CancelledError(cancel.reason)
    return future.result()


class ModelStream:
    """The events of ``model.stream(request)``, read in a ``with`` block: each event is
    checked against ``request.cancel`` as it arrives (a cancelled token raises
    :class:`~agentkit.errors.CancelledError`, since a provider may not check it itself),
    and leaving the block closes the stream however reading ended, so an abandoned
    provider stream releases its connection now, not whenever the garbage collector gets
    to it. Every reader of ``ChatModel.stream`` goes through it."""

    __slots__ = ("_cancel", "_stream")

    def __init__(self, model: ChatModel, request: ModelRequest) -> None:
        self._cancel = request.cancel
        self._stream = model.stream(request)

    def __iter__(self) -> Iterator[StreamEvent]:
        cancel = self._cancel
        for event in self._stream:
            if cancel.cancelled:
                raise CancelledError(cancel.reason)
            yield event

    def close(self) -> None:
        """Close the model's stream (when it can be closed). Idempotent."""
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ModelStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def anyio_module() -> ModuleType:
    """anyio, or a ConfigurationError naming the extra that installs it."""
    try:
        import anyio
        import anyio.to_thread  # noqa: F401 - the submodule the callers use
    except ImportError as exc:  # pragma: no cover - anyio comes with every ASGI framework
        raise ConfigurationError(
            "agentkit's async front doors (ask_async, async for over a stream, agentkit.web) "
            "need anyio: pip install 'sync-agentkit[web]'"
        ) from exc
    return anyio


async def run_sync_cancellable(fn: Callable[[CancelToken], T], cancel: CancelToken | None = None) -> T:
    """``fn(token)`` on a worker thread; ``token`` is cancelled when the awaiting task is
    cancelled (or when ``cancel`` is)."""
    anyio = anyio_module()
    token = CancelToken()
    if cancel is not None:
        cancel.link(token)
    try:
        result: T = await anyio.to_thread.run_sync(fn, token, abandon_on_cancel=True)
        return result
    except BaseException:
        token.cancel("the awaiting task was cancelled")  # a no-op when fn itself ended it
        raise
