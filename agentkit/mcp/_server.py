"""One MCP server connection, living on the toolset's event-loop thread.

``ServerConnection.run()`` is a long-lived task: it opens the transport and the client
(inside a deadline), lists the tools page by page, then serves until asked to stop,
refreshing the listing on ``tools/list_changed``. When a connection is lost the server
is ``disconnected``; the next call (:meth:`ServerConnection.usable_client`) wakes
``run()`` for a reconnect round: up to ``max_retries`` connects with exponential backoff,
each one a fresh session (tools listed again, subscriptions renewed). Everything here
runs on the loop thread except the read-only snapshot properties, which take a lock.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from ..models._retry import RetryPolicy
from ._callbacks import HostCallbacks, Roots
from ._failures import (
    NotConnected,
    OutcomeUnknown,
    connect_hint,
    describe_error,
    is_connection_loss,
)
from ._incoming import forward, invalid_output, listen, resubscribe, subscribe_resource
from ._reconnect import ATTEMPT, Attempt, session_closed
from .config import HttpServer, LogLevel, StdioServer

__all__: list[str] = []

log = logging.getLogger("agentkit.mcp")

Notify = Callable[[dict[str, Any]], None]

class ServerConnection:
    """Connection state and async lifecycle of one named MCP server."""

    def __init__(self, name: str, spec: Any, *, connect_timeout: float, max_list_pages: int,
                 log_level: LogLevel | None, notify: Notify, tools_changed: Callable[[str], None],
                 host: HostCallbacks | None = None, roots: Roots | None = None,
                 reconnect: RetryPolicy | None = None) -> None:
        self.name = name
        self._host = host
        self.roots = roots
        """The roots announced to this server (None: the roots capability is not offered)."""
        self.session_roots = False
        """True with ``roots="session"``: the roots follow the execution context of the calls."""
        self._roots_asked = 0
        self._roots_waiters: list[anyio.Event] = []
        self.spec = spec
        self.transport = getattr(spec, "transport", "client")
        self._connect_timeout = connect_timeout
        self._max_pages = max_list_pages
        self._log_level = log_level
        self._notify = notify
        self._tools_changed = tools_changed
        self._lock = threading.Lock()
        self.status = "connecting"
        self.error: str | None = None
        self.warnings: list[str] = []
        self.tools: list[Any] = []
        self.protocol_version: str | None = None
        self.server_name: str | None = None
        self.ready = threading.Event()
        self.client: Any = None
        self._stop: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._dirty: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._resource_uris: set[str] = set()
        self._wanted_uris: set[str] = set()
        """Resources subscribed to; renewed after a reconnect."""
        self._reconnect = reconnect
        self._ever_connected = False
        self._session_end: anyio.Event | None = None
        self._wake: anyio.Event | None = None
        self._next_round: anyio.Event | None = None
        self._this_round: anyio.Event | None = None
        self.tracked = False
        """True while HTTP deliveries of this connection are tracked (calls that never
        reached the server can be told apart)."""
        self.holding = 0
        """How many authorizations are waiting for a person (the connect deadline is paused)."""
        self._stop_requested = False
        self._invalid_output_seen = False

    # -- state (any thread) ------------------------------------------------------------

    def _set(self, **fields: Any) -> None:
        with self._lock:
            for k, v in fields.items():
                setattr(self, k, v)

    def fail(self, error: str) -> None:
        """Mark the server failed (the first error wins) and release connect waiters."""
        with self._lock:
            if self.status in ("connecting", "connected"):
                self.status = "failed"
                self.error = error
        self.ready.set()

    def warn(self, message: str) -> None:
        """Record a non-fatal problem (pagination cut short, a tool skipped...) once."""
        with self._lock:
            if message in self.warnings:
                return
            self.warnings.append(message)
        log.warning("MCP server %r: %s", self.name, message)

    # -- lifecycle (loop thread) -------------------------------------------------------

    def request_stop(self) -> None:
        """Ask :meth:`run` to disconnect (loop thread only)."""
        self._stop_requested = True
        for event in (self._stop, self._session_end, self._wake):
            if event is not None:
                event.set()
        if self._scope is not None and self.status != "connected":
            self._scope.cancel()

    def _can_reconnect(self) -> bool:
        return (self._reconnect is not None and self._reconnect.max_retries > 0 and self._ever_connected
                and not self._stop_requested and isinstance(self.spec, (StdioServer, HttpServer)))

    async def run(self) -> None:
        """Connect, list tools, serve until :meth:`request_stop`; after a lost connection,
        reconnect whenever a call asks (:meth:`usable_client`). Never raises."""
        self._stop = anyio.Event()
        self._wake = anyio.Event()
        if self._stop_requested:
            self.fail("the toolset was closed before the server connected")
            return
        try:
            await self._session(None)
            while self._can_reconnect():
                await self._wake.wait()
                self._wake = anyio.Event()
                if self._stop_requested:
                    break
                await self._reconnect_round()
        finally:
            for event in (self._next_round, self._this_round):
                if event is not None:
                    event.set()
            with self._lock:
                if self.status in ("connected", "disconnected", "reconnecting"):
                    self.status = "closed"
            self.ready.set()

    async def _reconnect_round(self) -> None:
        """Up to ``max_retries`` connects with exponential backoff between them, within
        ``max_elapsed`` seconds; the calls waiting for this round hear its outcome as soon
        as it is known."""
        policy = self._reconnect
        assert policy is not None
        outcome = self._next_round or anyio.Event()
        self._next_round, self._this_round = None, outcome
        self._set(status="reconnecting")
        attempts = 0
        started = anyio.current_time()
        for attempts in range(1, policy.max_retries + 1):
            if attempts > 1:
                delay = policy.backoff(attempts - 2)
                if anyio.current_time() + delay - started > policy.max_elapsed:
                    attempts -= 1
                    break  # the round's time budget (max_elapsed) is spent
                with anyio.move_on_after(delay):
                    assert self._stop is not None
                    await self._stop.wait()
            if self._stop_requested:
                break
            log.info("MCP server %r: reconnecting (attempt %d of %d)", self.name, attempts, policy.max_retries)
            if await self._session(outcome):
                return  # connected, served, and lost again (or stopped)
        with self._lock:
            if self.status == "reconnecting":
                self.status = "failed"
                self.error = f"reconnecting failed after {attempts} attempt(s): {self.error}"
        log.warning("MCP server %r: %s", self.name, self.error)
        self._announce_tools_changed()  # a failed server's tools leave the toolset
        self._this_round = None
        outcome.set()

    async def _session(self, outcome: anyio.Event | None) -> bool:
        """One connection: connect and list the tools within ``connect_timeout``, then serve
        until stopped or lost. True when it connected. ``outcome`` (a reconnect round's) is
        set once connected."""
        scope = anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout)
        self._scope = scope
        self._session_end = anyio.Event()
        self._dirty = anyio.Event()
        connected = False
        reconnect = outcome is not None
        try:
            with scope:
                async with self._open() as client:
                    self.client = client
                    session = client.session
                    self._set(protocol_version=session.protocol_version,
                              server_name=getattr(session.server_info, "name", None))
                    tools = await self._list_tools()
                    scope.deadline = math.inf
                    with self._lock:
                        if self.status not in ("connecting", "reconnecting"):  # timed out meanwhile, or stopped
                            return False
                        self.tools = tools
                        self.status = "connected"
                        self.error = None
                    connected = self._ever_connected = True
                    self.ready.set()
                    if reconnect:
                        self._announce_tools_changed()
                        assert outcome is not None
                        self._this_round = None
                        outcome.set()
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        tg.start_soon(self._refresher)
                        tg.start_soon(listen, self)
                        for uri in sorted(self._wanted_uris):
                            tg.start_soon(resubscribe, self, uri)
                        await self._session_end.wait()
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and not connected:
                if self._stop_requested:
                    self.fail("the toolset was closed before the server connected")
                else:
                    self._connect_failed(f"did not connect and list its tools within {self._connect_timeout:g}s "
                                         f"(connect_timeout)", reconnect)
        except Exception as exc:  # noqa: BLE001 - reported in the server's status
            if connected and self._stop_requested:  # a hiccup while disconnecting on purpose
                log.debug("MCP server %r: error while disconnecting", self.name, exc_info=True)
                return True
            log.debug("MCP server %r %s", self.name, "lost its connection" if connected else "failed to connect",
                      exc_info=True)
            if connected:
                self.lost(exc)
            else:
                self._connect_failed(f"failed to connect: {describe_error(exc)}{connect_hint(self.spec, exc)}",
                                     reconnect)
        finally:
            self._tg = None
            self.client = None
            self._resource_uris.clear()
        return connected

    def _connect_failed(self, error: str, reconnect: bool) -> None:
        if reconnect:
            self._set(error=error)
        else:
            self.fail(error)

    def lost(self, exc: BaseException) -> None:
        """The connection is gone (loop thread): with reconnecting enabled the server is
        ``disconnected`` and the next call reconnects; otherwise it failed. Its session ends."""
        with self._lock:
            if self.status != "connected":
                return
            self.status = "disconnected" if self._can_reconnect() else "failed"
            self.error = f"lost its connection: {describe_error(exc)}"
        log.warning("MCP server %r %s", self.name, self.error)
        self._announce_tools_changed()
        if self._session_end is not None:
            self._session_end.set()

    async def usable_client(self) -> Any:
        """The live client, after reconnecting when the connection is known to be gone
        (loop thread). Raises :class:`NotConnected` when there is none to be had."""
        client = self.client
        if self.status == "connected" and client is not None:
            if not session_closed(client):
                return client
            self.lost(ConnectionError("the server closed the connection"))
        if not self._can_reconnect() or self.status == "connecting":
            raise NotConnected(self.error or f"status is {self.status!r}")
        if self.status == "reconnecting" and self._this_round is not None:
            outcome = self._this_round
        else:
            if self._next_round is None:
                self._next_round = anyio.Event()
            outcome = self._next_round
            if self._wake is not None:
                self._wake.set()
        await outcome.wait()
        client = self.client
        if self.status != "connected" or client is None:
            raise NotConnected(self.error or f"status is {self.status!r}")
        return client

    @asynccontextmanager
    async def hold_deadline(self) -> AsyncIterator[None]:
        """Pause the connect deadline (a person is authorizing)."""
        scope = self._scope
        if scope is None or scope.deadline == math.inf:
            yield
            return
        remaining = scope.deadline - anyio.current_time()
        scope.deadline = math.inf
        with self._lock:
            self.holding += 1
        try:
            yield
        finally:
            with self._lock:
                self.holding -= 1
            scope.deadline = anyio.current_time() + max(remaining, 1.0)

    def _open(self) -> AbstractAsyncContextManager[Any]:
        from ._transport import open_client

        return open_client(self, self.spec, self._host or HostCallbacks())

    async def _list_tools(self) -> list[Any]:
        """Every tool of the server, following ``nextCursor`` page by page."""
        client = self.client
        return await self.paginate(
            "tools/list", lambda cursor: client.list_tools(cursor=cursor, cache_mode="bypass"),
            lambda page: page.tools, key=lambda tool: tool.name, noun="tool")

    async def paginate(self, method: str, fetch: Callable[[str | None], Any], items: Callable[[Any], Any],
                       *, key: Callable[[Any], str], noun: str) -> list[Any]:
        """Every item of a paginated ``method``, following ``nextCursor`` for at most
        ``max_list_pages`` pages; an item listed twice (by ``key``) is kept once."""
        found: list[Any] = []
        seen_keys: set[str] = set()
        seen_cursors: set[str] = set()
        cursor: str | None = None
        for _ in range(self._max_pages):
            page = await fetch(cursor)
            for item in items(page) or ():
                if key(item) in seen_keys:
                    self.warn(f"{noun} {key(item)!r} is listed twice; the second listing was ignored")
                    continue
                seen_keys.add(key(item))
                found.append(item)
            cursor = page.next_cursor
            if cursor is None:
                return found
            if cursor in seen_cursors:
                self.warn(f"{method} returned cursor {cursor!r} a second time; stopped listing "
                          f"after {len(found)} {noun}(s) to avoid a loop")
                return found
            seen_cursors.add(cursor)
        self.warn(f"{method} still had more pages after max_list_pages={self._max_pages}; "
                  f"kept the first {len(found)} {noun}(s)")
        return found

    async def refresh(self) -> None:
        """List the tools again now (loop thread)."""
        with anyio.fail_after(self._connect_timeout):
            tools = await self._list_tools()
        self._set(tools=tools)
        self._announce_tools_changed()

    def _announce_tools_changed(self) -> None:
        try:
            self._tools_changed(self.name)
        except Exception:  # noqa: BLE001 - the connection task must not die of it
            log.exception("rebuilding the MCP tool list failed")

    async def _refresher(self) -> None:
        while True:
            assert self._dirty is not None
            await self._dirty.wait()
            self._dirty = anyio.Event()
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - keep serving the old listing
                self.warn(f"refreshing the tool list failed: {describe_error(exc)}")

    async def subscribe_resource(self, uri: str) -> None:
        """Ask the server for ``notifications/resources/updated`` about ``uri`` (loop
        thread); subscribing twice is a no-op (``_incoming.subscribe_resource``)."""
        await subscribe_resource(self, uri)

    def _mark_dirty(self) -> None:
        if self._dirty is not None:
            self._dirty.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ValueError):  # a line that is not a JSON-RPC message
            invalid_output(self, message)
            return
        if isinstance(message, Exception):
            log.debug("MCP server %r transport error: %s", self.name, describe_error(message))
            return
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._mark_dirty()
        forward(self, message)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        progress: Callable[[float, float | None, str | None], None] | None = None) -> Any:
        """Send ``tools/call`` with the server's original tool name (loop thread). The
        request always carries a progress token; ``progress(progress, total, message)``
        hears the server's ``notifications/progress`` for it (it must not block).

        A connection known to be gone is reconnected first. A call whose connection is lost
        on the way is sent again after reconnecting only when it provably never reached the
        server; otherwise :class:`OutcomeUnknown` is raised and it is not repeated."""

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress(value, total, message)

        for _ in range(2):
            client = await self.usable_client()
            attempt = Attempt(tracked=self.tracked)
            token = ATTEMPT.set(attempt)
            try:
                return await client.call_tool(name, arguments, progress_callback=on_progress)
            except Exception as exc:
                if not is_connection_loss(exc):
                    raise
                self.lost(exc)
                if attempt.reached or not self._can_reconnect():
                    raise OutcomeUnknown(describe_error(exc), sent=attempt.reached) from exc
                log.info("MCP server %r: tools/call %r never reached the server; sending it again after "
                         "reconnecting", self.name, name)
            finally:
                ATTEMPT.reset(token)
        raise NotConnected(self.error or "the connection was lost again right after reconnecting")

    def _roots_listed(self) -> None:
        """On the loop: the server asked ``roots/list`` (and is about to get the answer)."""
        self._roots_asked += 1
        waiters, self._roots_waiters = self._roots_waiters, []
        for event in waiters:
            event.set()

    async def set_roots(self, roots: Roots, *, await_ask: float = 0.0) -> None:
        """Replace the announced roots and send ``notifications/roots/list_changed``. With
        ``await_ask`` > 0, a server that has asked for roots before is given that many
        seconds to ask again (so a call sent next meets a server that has the new list)."""
        import warnings

        self.roots = roots
        client = self.client
        if client is None or self.status != "connected":
            return  # the next roots/list (after a connect) answers with the new roots
        asked: anyio.Event | None = None
        if await_ask > 0 and self._roots_asked:
            asked = anyio.Event()
            self._roots_waiters.append(asked)
        with warnings.catch_warnings():  # deprecated on 2026-era connections, not on these
            warnings.simplefilter("ignore")
            await client.send_roots_list_changed()
        if asked is not None:
            with anyio.move_on_after(await_ask):
                await asked.wait()
