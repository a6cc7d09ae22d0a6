"""A Chrome DevTools Protocol connection over the browser's debugging pipe (private).

Chromium started with ``--remote-debugging-pipe`` reads commands from its fd 3 and writes
answers and events to its fd 4, each message a JSON object ended by a NUL byte. No port
is opened, so no other local process can drive the browser.

* :meth:`CdpConnection.call` sends a command and waits for its answer, from any thread
  (writes are serialised by a lock; answers are matched by id). It gives up when the
  timeout passes or the caller's cancel token is cancelled.
* :meth:`CdpConnection.send` sends without waiting: event handlers use it, because they
  run on the reader thread, which is the thread that would deliver the answer.
* A reader thread parses messages and hands events to the handler registered for their
  method. When the pipe closes (the browser exited) every waiting call fails.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Callable
from typing import Any

from ..cancel import CancelToken
from ..errors import BrowserError, CancelledError

EventHandler = Callable[[dict[str, Any], "str | None"], None]
"""Called on the reader thread with an event's params and the session id it came from."""


class CdpTimeout(BrowserError):
    """The browser did not answer a command in time."""


class _Pending:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class CdpConnection:
    """Commands and events over a pair of pipe file descriptors (owned from now on)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._reader = os.fdopen(read_fd, "rb", buffering=0)
        self._writer = os.fdopen(write_fd, "wb", buffering=0)
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._handlers: dict[str, EventHandler] = {}
        self._closed: str | None = None
        self._thread = threading.Thread(target=self._read_loop, name="agentkit-browser-cdp", daemon=True)
        self._thread.start()

    def on(self, method: str, handler: EventHandler) -> None:
        """Call ``handler`` for every ``method`` event (one handler per method)."""
        self._handlers[method] = handler

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None) -> int:
        """Send a command without waiting for its answer; returns its id."""
        msg_id = next(self._ids)
        self._write(msg_id, method, params, session)
        return msg_id

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float, cancel: CancelToken | None = None) -> dict[str, Any]:
        """Send a command and return its result; BrowserError when the browser answers
        with an error, does not answer within ``timeout`` seconds or has exited;
        CancelledError when ``cancel`` is cancelled first."""
        pending = _Pending()
        msg_id = next(self._ids)
        with self._lock:
            if self._closed is not None:
                raise BrowserError(f"the browser is gone ({self._closed}); start a new one")
            self._pending[msg_id] = pending
        forget = cancel._on_cancel(pending.done.set) if cancel is not None else None
        try:
            self._write(msg_id, method, params, session)
            pending.done.wait(timeout)
        finally:
            if forget is not None:
                forget()
            with self._lock:
                self._pending.pop(msg_id, None)
        reply = pending.reply
        if reply is None:
            if cancel is not None and cancel.cancelled:
                raise CancelledError(cancel.reason)
            if self._closed is not None:
                raise BrowserError(f"the browser is gone ({self._closed}); start a new one")
            raise CdpTimeout(f"the browser did not answer {method} within {timeout:g}s")
        if "error" in reply:
            error = reply["error"]
            raise BrowserError(f"{method}: {error.get('message', error)}")
        result: dict[str, Any] = reply.get("result") or {}
        return result

    @property
    def closed(self) -> bool:
        """True once the pipe closed (the browser exited or :meth:`close` ran)."""
        return self._closed is not None

    def close(self) -> None:
        """Fail waiting calls, close the pipes and stop the reader thread. Call it after
        the browser exited: the reader ends at the end of the pipe. Idempotent."""
        self._fail_all("the connection was closed")
        with self._write_lock:
            try:
                self._writer.close()
            except OSError:  # a failed write left it broken; nothing more to release
                pass
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        if not self._thread.is_alive():  # never close an fd a running read() still uses
            self._reader.close()

    def _write(self, msg_id: int, method: str, params: dict[str, Any] | None, session: str | None) -> None:
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        data = json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\0"
        with self._write_lock:
            if self._closed is not None:
                raise BrowserError(f"the browser is gone ({self._closed}); start a new one")
            try:
                self._writer.write(data)
            except (OSError, ValueError) as exc:  # a closed pipe: the browser exited
                self._fail_all(f"writing to it failed: {exc}")
                raise BrowserError(f"the browser is gone ({exc}); start a new one") from None

    def _read_loop(self) -> None:
        buffer = b""
        try:
            while True:
                chunk = self._reader.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\0" in buffer:
                    raw, buffer = buffer.split(b"\0", 1)
                    self._dispatch(json.loads(raw))
        except (OSError, ValueError):  # the pipe was closed under us, or garbage: end
            pass
        self._fail_all("it exited")

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg:
            with self._lock:
                pending = self._pending.get(msg["id"])
            if pending is not None:
                pending.reply = msg
                pending.done.set()
            return
        handler = self._handlers.get(msg.get("method", ""))
        if handler is not None:
            try:
                handler(msg.get("params") or {}, msg.get("sessionId"))
            except BrowserError:  # the browser exited while a handler answered it
                pass

    def _fail_all(self, why: str) -> None:
        with self._lock:
            if self._closed is None:
                self._closed = why
            pending = list(self._pending.values())
        for p in pending:
            p.done.set()
