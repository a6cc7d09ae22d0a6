"""``connect_mcp``: MCP servers as ordinary agentkit tools, from synchronous code."""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError, McpError, MissingDependencyError, ToolDefinitionError
from ..messages import ToolOutput
from ..tools.base import Tool, ToolContext
from .config import ServerSpec, validate_servers
from .naming import exposed_names
from .results import tool_result_to_output

__all__ = ["AuthorizeToolCall", "McpServerStatus", "McpToolRef", "McpToolset", "connect_mcp"]

log = logging.getLogger("agentkit.mcp")

AuthorizeToolCall = Callable[[str, str, dict[str, Any], "str | None"], Any]
"""``authorize_tool_call(server, tool, arguments, call_id)``: raise (or return False) to
deny a call; it runs in the calling thread before anything is sent to the server."""

_CTX = "_agentkit_mcp_context"
_SHUTDOWN_GRACE = 20.0


@dataclass(frozen=True, kw_only=True)
class McpToolRef:
    """Where an exposed tool name leads: the server and the tool's original name."""

    server: str
    """The server name given to :func:`connect_mcp`."""
    tool: str
    """The tool's name on that server, used verbatim in ``tools/call``."""


@dataclass(frozen=True, kw_only=True)
class McpServerStatus:
    """A snapshot of one server's connection."""

    name: str
    transport: str
    """``stdio``, ``streamable-http`` or ``client`` (a caller-built ``mcp.Client``)."""
    status: str
    """``connecting``, ``connected``, ``failed`` or ``closed``."""
    error: str | None = None
    """Why the server failed (connect error, timeout, lost connection)."""
    tool_count: int = 0
    """How many tools the server listed."""
    protocol_version: str | None = None
    server_name: str | None = None
    """The name the server reported about itself."""
    warnings: tuple[str, ...] = ()
    """Non-fatal problems: listing cut short, tools skipped or listed twice."""

    @property
    def connected(self) -> bool:
        """True while the server is connected."""
        return self.status == "connected"


class _Notifier:
    """Delivers notifications to listeners in order, on one thread of its own, so a slow
    listener (a Session writing to its store) never blocks the event loop."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[dict[str, Any]], Any]] = []
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        with self._lock:
            if self._closed:
                raise McpError("the MCP toolset is closed; notifications cannot be forwarded")
            self._listeners.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._deliver, name="agentkit-mcp-notify", daemon=True)
                self._thread.start()

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def put(self, note: dict[str, Any]) -> None:
        with self._lock:
            if self._closed or not self._listeners:
                return
        self._queue.put(note)

    def _deliver(self) -> None:
        while True:
            note = self._queue.get()
            if note is None:
                return
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    listener(note)
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    log.warning("an MCP notification listener failed and was removed", exc_info=True)
                    with self._lock:
                        if listener in self._listeners:
                            self._listeners.remove(listener)

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class _Runtime:
    """Everything that must be torn down: the loop thread, the connections, the notifier.
    Holds no reference to the toolset, so a finalizer can own it."""

    def __init__(self, loop: Any, conns: dict[str, Any], notifier: _Notifier) -> None:
        self.loop = loop
        self.conns = conns
        self.notifier = notifier
        self.supervisor: Any = None
        self.closed = False
        self.lock = threading.Lock()

    def shutdown(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        loop = self.loop
        try:
            if not loop.stopped:
                try:
                    loop.portal.call(_request_stop_all, list(self.conns.values()))
                except Exception:  # noqa: BLE001 - the loop may already be gone
                    log.debug("requesting MCP servers to stop failed", exc_info=True)
                if self.supervisor is not None:
                    deadline = time.monotonic() + _SHUTDOWN_GRACE
                    while not self.supervisor.done() and time.monotonic() < deadline:
                        time.sleep(0.02)
        finally:
            loop.stop()
            self.notifier.close()
            for conn in self.conns.values():
                conn.ready.set()


def _request_stop_all(conns: list[Any]) -> None:
    for conn in conns:
        conn.request_stop()


async def _supervise(conns: list[Any]) -> None:
    import anyio

    async with anyio.create_task_group() as tg:
        for conn in conns:
            tg.start_soon(conn.run)


class McpToolset:
    """Tools from connected MCP servers. Build it with :func:`connect_mcp`.

    ``tools`` are ordinary agentkit :class:`~agentkit.tools.Tool` objects (pass them to
    ``run_agent`` or ``Session``); ``tool_name_map`` maps each exposed name to its
    server and original tool name; ``servers`` reports every server's connection.
    Use it as a context manager or call :meth:`close`: that stops every server (no child
    process survives) and the background event-loop thread. Thread-safe.
    """

    def __init__(self, *, _runtime: _Runtime, _authorize: AuthorizeToolCall | None,
                 _call_timeout: float | None, _prefix: bool | None) -> None:
        self._rt = _runtime
        self._authorize = _authorize
        self._call_timeout = _call_timeout
        self._prefix = _prefix
        self._lock = threading.Lock()
        self._tools: tuple[Tool, ...] = ()
        self._map: dict[str, McpToolRef] = {}
        self._rebuild_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _Runtime.shutdown, _runtime)

    # -- views -------------------------------------------------------------------------

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agentkit tools of every connected server, in server order then listing
        order. Re-read it after a ``tools/list_changed`` refresh."""
        with self._lock:
            return self._tools

    @property
    def tool_name_map(self) -> Mapping[str, McpToolRef]:
        """Exposed tool name -> :class:`McpToolRef` (server and original tool name)."""
        with self._lock:
            return dict(self._map)

    @property
    def servers(self) -> Mapping[str, McpServerStatus]:
        """Server name -> :class:`McpServerStatus` snapshot, in the order given."""
        out: dict[str, McpServerStatus] = {}
        for name, conn in self._rt.conns.items():
            with conn._lock:
                out[name] = McpServerStatus(
                    name=name,
                    transport=conn.transport,
                    status="closed" if self._rt.closed and conn.status == "connected" else conn.status,
                    error=conn.error,
                    tool_count=len(conn.tools),
                    protocol_version=conn.protocol_version,
                    server_name=conn.server_name,
                    warnings=tuple(conn.warnings),
                )
        return out

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._rt.closed

    # -- building tools ----------------------------------------------------------------

    def _rebuild(self, _changed: str | None = None) -> None:
        """Recompute exposed names and Tool objects from every server's listing (one
        rebuild at a time, so an older listing never overwrites a newer one)."""
        with self._rebuild_lock:
            self._rebuild_locked()

    def _rebuild_locked(self) -> None:
        conns = list(self._rt.conns.values())
        entries: list[tuple[Any, Any]] = []
        for conn in conns:
            with conn._lock:
                if conn.status != "connected":
                    continue
                entries.extend((conn, t) for t in conn.tools)
        prefix = self._prefix if self._prefix is not None else len(self._rt.conns) > 1
        names = exposed_names(((c.name, t.name) for c, t in entries), prefix=prefix)
        tools: list[Tool] = []
        mapping: dict[str, McpToolRef] = {}
        for exposed, (conn, mcp_tool) in zip(names, entries, strict=True):
            tool = self._make_tool(exposed, conn, mcp_tool)
            if tool is not None:
                tools.append(tool)
                mapping[exposed] = McpToolRef(server=conn.name, tool=mcp_tool.name)
        with self._lock:
            self._tools = tuple(tools)
            self._map = mapping

    def _make_tool(self, exposed: str, conn: Any, mcp_tool: Any) -> Tool | None:
        schema = dict(mcp_tool.input_schema or {})
        schema.setdefault("type", "object")
        annotations = getattr(mcp_tool, "annotations", None)
        read_only = bool(annotations is not None and annotations.read_only_hint)
        description = mcp_tool.description or getattr(mcp_tool, "title", None) or (
            f"Tool {mcp_tool.name!r} of MCP server {conn.name!r}."
        )
        server, original = conn.name, mcp_tool.name

        def call(**kwargs: Any) -> ToolOutput:
            ctx = kwargs.pop(_CTX, None)
            return self._call(server, original, exposed, kwargs, ctx)

        try:
            return Tool(name=exposed, description=description, input_schema=schema, fn=call,
                        read_only=read_only, context_param=_CTX)
        except ToolDefinitionError as exc:
            conn.warn(f"tool {original!r} was skipped: {exc}")
            return None

    # -- calling -----------------------------------------------------------------------

    def _call(self, server: str, tool: str, exposed: str, arguments: dict[str, Any],
              ctx: ToolContext | None) -> ToolOutput:
        from ._portal import CallTimeout
        from ._server import NotConnected, describe_error

        cancel = ctx.cancel if ctx is not None else CancelToken()
        call_id = ctx.tool_call_id if ctx is not None else None
        if self._rt.closed:
            return ToolOutput.error(f"tool {exposed!r} cannot run: the MCP toolset was closed")
        conn = self._rt.conns[server]
        if conn.status != "connected":
            return ToolOutput.error(
                f"tool {exposed!r} cannot run: MCP server {server!r} is not connected "
                f"({conn.error or conn.status})"
            )
        if self._authorize is not None:
            try:
                verdict = self._authorize(server, tool, dict(arguments), call_id)
            except Exception as exc:  # noqa: BLE001 - a denial is reported to the model
                return ToolOutput.error(
                    f"the call to tool {exposed!r} was denied: {exc or type(exc).__name__}. "
                    f"Do not retry it; continue without it or say what is blocked."
                )
            if verdict is False:
                return ToolOutput.error(
                    f"the call to tool {exposed!r} was denied. Do not retry it; continue without "
                    f"it or say what is blocked."
                )
        try:
            result = self._rt.loop.run(conn.call_tool, tool, arguments, timeout=self._call_timeout,
                                       cancel=cancel)
        except CancelledError:
            raise
        except CallTimeout:
            return ToolOutput.error(
                f"MCP tool {exposed!r} (server {server!r}) gave no answer within "
                f"{self._call_timeout:g}s; the call was cancelled"
            )
        except NotConnected as exc:
            return ToolOutput.error(f"tool {exposed!r} cannot run: MCP server {server!r} is not "
                                    f"connected ({exc})")
        except McpError as exc:
            return ToolOutput.error(f"tool {exposed!r} cannot run: {exc}")
        except Exception as exc:  # noqa: BLE001 - any failure becomes an error result
            if self._rt.closed:
                return ToolOutput.error(f"tool {exposed!r} was stopped: the MCP toolset was closed "
                                        f"during the call")
            text = describe_error(exc)
            if _is_connection_loss(exc):
                conn.fail(f"lost its connection: {text}")
                self._rebuild()
                return ToolOutput.error(
                    f"MCP server {server!r} stopped responding while running tool {exposed!r} "
                    f"({text}); its tools are unavailable for now"
                )
            return ToolOutput.error(f"MCP tool {exposed!r} (server {server!r}) failed: {text}")
        return tool_result_to_output(result)

    # -- lifecycle ---------------------------------------------------------------------

    def refresh(self, *, timeout: float | None = None) -> None:
        """List every connected server's tools again now (normally a server's
        ``tools/list_changed`` notification does this by itself)."""
        if self._rt.closed:
            raise McpError("the MCP toolset is closed; connect again with connect_mcp()")
        for conn in list(self._rt.conns.values()):
            if conn.status == "connected":
                self._rt.loop.run(conn.refresh, timeout=timeout)

    def add_notification_listener(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        """Call ``listener({"server", "method", "params"})`` for every notification the
        servers send (logging messages, list changes, resource updates), in order, on a
        delivery thread. Returns a function that removes the listener. A listener that
        raises is removed."""
        if not callable(listener):
            raise ConfigurationError("add_notification_listener() needs a callable listener(dict)")
        return self._rt.notifier.add(listener)

    def forward_notifications(self, session: Any, *, methods: tuple[str, ...] | None = None,
                              event_type: str = "mcp-notification") -> Callable[[], None]:
        """Push every server notification into ``session`` as a runtime event
        (``session.push_runtime_event(event_type, {"server", "method", "params"})``).
        ``methods`` limits it to those notification methods (for example
        ``("notifications/message",)``). Returns a function that stops forwarding;
        forwarding also stops when the session is closed."""
        push = getattr(session, "push_runtime_event", None)
        if not callable(push):
            raise ConfigurationError(
                f"forward_notifications() needs an agentkit Session, not {type(session).__name__}"
            )
        wanted = None if methods is None else frozenset(methods)

        def forward(note: dict[str, Any]) -> None:
            if wanted is None or note["method"] in wanted:
                push(event_type, note)

        return self.add_notification_listener(forward)

    def close(self) -> None:
        """Disconnect every server (stdio children are shut down), stop the event-loop
        thread and the notification thread. Idempotent. Tools called afterwards return an
        error result."""
        self._finalizer()

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.tools)} tools"
        return f"<McpToolset {', '.join(self._rt.conns)}: {state}>"


def _is_connection_loss(exc: BaseException) -> bool:
    import anyio

    leaves = [exc]
    while leaves:
        e = leaves.pop()
        subs = getattr(e, "exceptions", None)
        if isinstance(subs, tuple):
            leaves.extend(subs)
            continue
        if isinstance(e, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                          ConnectionError, EOFError)):
            return True
        if getattr(e, "code", None) == -32000:  # CONNECTION_CLOSED
            return True
    return False


def connect_mcp(
    servers: Mapping[str, ServerSpec],
    *,
    authorize_tool_call: AuthorizeToolCall | None = None,
    connect_timeout: float = 30.0,
    call_timeout: float | None = 300.0,
    max_list_pages: int = 100,
    fail_on_no_tools: bool = False,
    prefix_tool_names: bool | None = None,
    log_level: str | None = "info",
) -> McpToolset:
    """Connect MCP servers and return their tools as an :class:`McpToolset`.

    ``servers`` maps a name to a stdio config (``{"command", "args", "env", "cwd"}``), a
    Streamable HTTP config (``{"url", "headers"}``), a :class:`~agentkit.mcp.StdioServer`
    / :class:`~agentkit.mcp.HttpServer`, or an un-entered ``mcp.Client``. Configs are
    checked before anything starts.

    Servers connect concurrently on one background event-loop thread. A server that fails
    or does not connect and list its tools within ``connect_timeout`` seconds is reported
    in ``.servers`` while the others mount; with ``fail_on_no_tools=True`` a
    :class:`~agentkit.errors.McpError` is raised (after cleaning up) when no tool mounted.
    Listing follows ``nextCursor`` for at most ``max_list_pages`` pages.

    With several servers (or ``prefix_tool_names=True``) tools are exposed as
    ``<server>__<tool>``. ``authorize_tool_call(server, tool, arguments, call_id)`` runs
    before every call; raising or returning False denies it and nothing is sent. A call
    gets ``call_timeout`` seconds. ``log_level`` opts in to server log messages on
    2026-era connections (None: no opt-in).
    """
    try:
        import anyio  # noqa: F401
        import mcp  # noqa: F401
    except ImportError:
        raise MissingDependencyError("mcp", "mcp", "agentkit.mcp (MCP servers as tools)") from None
    if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
        raise ConfigurationError(f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}")
    if call_timeout is not None and (not isinstance(call_timeout, (int, float)) or call_timeout <= 0):
        raise ConfigurationError(f"call_timeout must be a positive number of seconds or None, not {call_timeout!r}")
    if not isinstance(max_list_pages, int) or isinstance(max_list_pages, bool) or max_list_pages < 1:
        raise ConfigurationError(f"max_list_pages must be an integer >= 1, not {max_list_pages!r}")
    if authorize_tool_call is not None and not callable(authorize_tool_call):
        raise ConfigurationError("authorize_tool_call must be a callable (server, tool, arguments, call_id)")
    _LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    if log_level is not None and log_level not in _LEVELS:
        raise ConfigurationError(f"log_level must be one of {', '.join(_LEVELS)} or None, not {log_level!r}")
    specs = validate_servers(servers)

    from ._portal import LoopThread
    from ._server import ServerConnection

    notifier = _Notifier()
    holder: list[weakref.ref[McpToolset]] = []  # weak: the runtime must not keep the toolset alive

    def tools_changed(_name: str) -> None:
        toolset = holder[0]() if holder else None
        if toolset is not None:
            toolset._rebuild(_name)

    conns = {
        name: ServerConnection(name, spec, connect_timeout=float(connect_timeout),
                               max_list_pages=max_list_pages, log_level=log_level,
                               notify=notifier.put, tools_changed=tools_changed)
        for name, spec in specs.items()
    }
    runtime = _Runtime(LoopThread(), conns, notifier)
    toolset = McpToolset(_runtime=runtime, _authorize=authorize_tool_call,
                         _call_timeout=None if call_timeout is None else float(call_timeout),
                         _prefix=prefix_tool_names)
    try:
        runtime.supervisor = runtime.loop.submit(_supervise, list(conns.values()))
        deadline = time.monotonic() + float(connect_timeout) + 1.0
        for conn in conns.values():
            if not conn.ready.wait(max(0.0, deadline - time.monotonic())):
                conn.fail(f"did not connect and list its tools within {connect_timeout:g}s (connect_timeout)")
        holder.append(weakref.ref(toolset))
        toolset._rebuild()
        if fail_on_no_tools and not toolset.tools:
            problems = "; ".join(
                f"{s.name}: {s.error or 'connected but lists no tools'}" for s in toolset.servers.values()
            )
            raise McpError(f"no MCP server mounted any tool ({problems})")
    except BaseException:
        toolset.close()
        raise
    failed = [s for s in toolset.servers.values() if s.status == "failed"]
    for s in failed:
        log.error("MCP server %r failed: %s", s.name, s.error)
    return toolset
