"""McpToolset: the tools of connected MCP servers, their names and connection states."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..errors import ConfigurationError, McpError, SessionClosedError, ToolDefinitionError
from ..messages import FilePart, ImagePart, Message, TextPart, ToolOutput
from ..tools.base import Tool
from ._callbacks import Callers
from ._calls import AuthorizeToolCall, authorization, call_tool
from ._runtime import Runtime
from .host import McpPrompt, McpResource
from .naming import exposed_names

log = logging.getLogger("agentkit.mcp")

_CTX = "_agentkit_mcp_context"
_LIVE = frozenset({"connected", "disconnected", "reconnecting"})


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
    """``connecting``, ``connected``, ``disconnected`` (the connection was lost; the next call
    reconnects, and the tools stay listed meanwhile), ``reconnecting``, ``failed`` or ``closed``."""
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


class McpToolset:
    """Tools from connected MCP servers. Build it with :func:`connect_mcp`.

    ``tools`` are ordinary agentkit :class:`~agentkit.tools.Tool` objects (pass them to
    ``run_agent`` or ``Session``); ``tool_name_map`` maps each exposed name to its
    server and original tool name; ``servers`` reports every server's connection.
    :meth:`list_resources`, :meth:`read_resource`, :meth:`list_prompts` and
    :meth:`get_prompt` reach a server's resources and prompts; :meth:`set_roots` changes
    the directories announced to the servers.
    Use it as a context manager or call :meth:`close`: that stops every server (no child
    process survives) and the background event-loop thread. Thread-safe.
    """

    _rt: Runtime
    _callers: Callers
    _expose_resources: bool
    _authorize: AuthorizeToolCall | None
    _call_timeout: float | None
    _prefix: bool | None
    _lock: threading.Lock
    _tools: tuple[Tool, ...]
    _map: dict[str, McpToolRef]
    _helpers: tuple[Tool, ...]
    _rebuild_lock: threading.Lock
    _finalizer: weakref.finalize[..., Any]
    _session_hook: Callable[[Any], None] | None

    def __init__(self) -> None:
        raise TypeError("an McpToolset is built by connect_mcp(servers, ...): it owns the servers it connected")

    @classmethod
    def _create(cls, runtime: Runtime, *, authorize: AuthorizeToolCall | None, call_timeout: float | None,
                prefix: bool | None, expose_resources: bool = False, callers: Callers | None = None,
                ) -> McpToolset:
        """The toolset over ``runtime``'s connections (what :func:`connect_mcp` returns)."""
        self = cls.__new__(cls)
        self._rt = runtime
        self._callers = callers if callers is not None else Callers()
        self._expose_resources = expose_resources
        self._authorize = authorize
        self._call_timeout = call_timeout
        self._prefix = prefix
        self._lock = threading.Lock()
        self._tools = ()
        self._map = {}
        self._helpers = ()
        self._rebuild_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, Runtime.shutdown, runtime)
        session_roots = any(conn.session_roots for conn in runtime.conns.values())
        self._session_hook = self._bind_session if session_roots else None
        return self

    # -- views -------------------------------------------------------------------------

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agentkit tools of every connected server, in server order then listing
        order, then (with ``expose_resources=True``) the ``mcp_list_resources`` and
        ``mcp_read_resource`` helpers. Re-read it after a ``tools/list_changed`` refresh."""
        with self._lock:
            tools, mapping, helpers = self._tools, self._map, self._helpers
        live = self._live_servers()
        return tuple(t for t in tools if mapping[t.name].server in live) + helpers

    @property
    def tool_name_map(self) -> Mapping[str, McpToolRef]:
        """Exposed tool name -> :class:`McpToolRef` (server and original tool name)."""
        with self._lock:
            mapping = self._map
        live = self._live_servers()
        return {name: ref for name, ref in mapping.items() if ref.server in live}

    def _live_servers(self) -> set[str]:
        # a server marked failed loses its tools at once, even before the rebuild that
        # follows its failure has run
        # (a lost server that reconnects at its next call keeps its tools meanwhile)
        return {name for name, conn in self._rt.conns.items() if conn.status in _LIVE}

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
                if conn.status not in _LIVE:
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
        helpers: list[Tool] = []
        if self._expose_resources:
            from . import _catalog

            with_resources = [c.name for c in conns if c.status == "connected" and _catalog.offers(c, "resources")]
            helpers = _catalog.resource_tools(self._rt, with_resources, self._call_timeout, set(mapping),
                                              lambda m: log.warning("MCP toolset: %s", m))
        with self._lock:
            self._tools = tuple(tools)
            self._map = mapping
            self._helpers = tuple(helpers)

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
            return call_tool(self._rt, self._callers, self._call_timeout, self._rebuild,
                             server, original, exposed, kwargs, ctx)

        try:
            return Tool(name=exposed, description=description, input_schema=schema, fn=call,
                        read_only=read_only, context_param=_CTX, _on_session=self._session_hook,
                        before_call=authorization(self._authorize, server, original, exposed))
        except ToolDefinitionError as exc:
            conn.warn(f"tool {original!r} was skipped: {exc}")
            return None

    def _bind_session(self, session: Any) -> None:
        """``roots="session"``: announce the execution-context root of the Session the
        tools were given to (the latest one wins) to every server connected that way."""
        from ._callbacks import normalize_roots

        execution_context = getattr(session, "execution_context", None)
        if self._rt.closed or getattr(execution_context, "root_dir", None) is None:
            return
        wanted = normalize_roots(execution_context, "the session's execution context")
        for conn in list(self._rt.conns.values()):
            if conn.session_roots and conn.status == "connected" and conn.roots != wanted:
                # a server that uses roots gets a moment to ask for the new list
                self._rt.loop.run(partial(conn.set_roots, wanted, await_ask=5.0), timeout=10.0)

    # -- resources, prompts, roots -----------------------------------------------------

    def list_resources(self, server: str, *, timeout: float | None = 30.0) -> list[McpResource]:
        """Every resource ``server`` lists (``resources/list``, followed page by page like
        tools). Raises :class:`~agentkit.errors.McpError` when the server is not connected,
        offers no resources, refuses, or gives no answer within ``timeout`` seconds."""
        from ._catalog import list_resources

        return list_resources(self._rt, server, timeout)

    def read_resource(self, server: str, uri: str, *,
                      timeout: float | None = 30.0) -> list[TextPart | ImagePart | FilePart]:
        """The contents of resource ``uri`` of ``server`` as agentkit parts: text as
        :class:`~agentkit.messages.TextPart`, image blobs as ``ImagePart``, other blobs as
        ``FilePart``. Errors as in :meth:`list_resources`."""
        from ._catalog import read_resource

        return read_resource(self._rt, server, uri, timeout)

    def list_prompts(self, server: str, *, timeout: float | None = 30.0) -> list[McpPrompt]:
        """Every prompt ``server`` lists (``prompts/list``, page by page). Errors as in
        :meth:`list_resources`."""
        from ._catalog import list_prompts

        return list_prompts(self._rt, server, timeout)

    def get_prompt(self, server: str, name: str, arguments: Mapping[str, str] | None = None, *,
                   timeout: float | None = 30.0) -> list[Message]:
        """Prompt ``name`` of ``server`` filled in with ``arguments`` (strings), as
        agentkit user/assistant :class:`~agentkit.messages.Message` objects ready to send
        to a model. Errors as in :meth:`list_resources`."""
        from ._catalog import get_prompt

        return get_prompt(self._rt, server, name, arguments, timeout)

    def roots(self, server: str) -> tuple[str, ...] | None:
        """The ``file://`` URIs announced to ``server`` as its roots (None: the server was
        connected without roots, so no roots capability was offered)."""
        from ._catalog import _conn

        roots = _conn(self._rt, server).roots
        return None if roots is None else tuple(uri for uri, _ in roots)

    def set_roots(self, roots: Any, *, server: str | None = None, timeout: float | None = 30.0) -> None:
        """Replace the roots announced to ``server`` (default: every server connected with
        roots) and send it ``notifications/roots/list_changed``; the server then asks for
        the new list. ``roots`` is a list of directories or ``file://`` URIs, or an
        execution context. A server connected without roots offered no roots capability
        and cannot be given any now: :class:`~agentkit.errors.ConfigurationError` says to
        connect it with ``roots=``."""
        from .._threads import CallTimeout
        from ._callbacks import normalize_roots
        from ._catalog import _conn
        from ._failures import describe_error

        normalized = normalize_roots(roots, "set_roots(roots)")
        names = [server] if server is not None else [n for n, c in self._rt.conns.items() if c.roots is not None]
        if not names:
            raise ConfigurationError("no MCP server was connected with roots, so none was offered the roots "
                                     "capability; connect with roots=[...] (connect_mcp(roots=...) or a "
                                     "server config's 'roots')")
        for name in names:
            conn = _conn(self._rt, name)
            if conn.roots is None:
                raise ConfigurationError(f"MCP server {name!r} was connected without roots, so it was not "
                                         f"offered the roots capability; connect it with roots=[...] "
                                         f"(connect_mcp(roots=...) or its config's 'roots')")
            try:
                self._rt.loop.run(conn.set_roots, normalized, timeout=timeout)
            except CallTimeout:
                raise McpError(f"MCP server {name!r}: sending roots/list_changed took more than "
                               f"{timeout:g}s") from None
            except McpError:
                raise
            except Exception as exc:  # noqa: BLE001 - the connection broke
                raise McpError(f"MCP server {name!r}: roots/list_changed could not be sent: "
                               f"{describe_error(exc)}") from None

    # -- lifecycle ---------------------------------------------------------------------

    def refresh(self, *, timeout: float | None = None) -> None:
        """List every connected server's tools again now (normally a server's
        ``tools/list_changed`` notification does this by itself). Each server gets
        ``timeout`` seconds (default: the ``connect_timeout``). Raises
        :class:`~agentkit.errors.McpError` naming the first server that failed to answer;
        its previous listing stays."""
        from .._threads import CallTimeout
        from ._failures import describe_error

        if self._rt.closed:
            raise McpError("the MCP toolset is closed; connect again with connect_mcp()")
        for conn in list(self._rt.conns.values()):
            if conn.status != "connected":
                continue
            try:
                self._rt.loop.run(conn.refresh, timeout=timeout)
            except CallTimeout:
                raise McpError(f"MCP server {conn.name!r} did not list its tools within {timeout:g}s; "
                               f"its previous listing stays") from None
            except McpError:
                raise
            except Exception as exc:  # noqa: BLE001 - a server error or a lost connection
                raise McpError(f"MCP server {conn.name!r} could not list its tools again "
                               f"({describe_error(exc)}); its previous listing stays") from None

    def subscribe_resource(self, server: str, uri: str, *, timeout: float | None = 30.0) -> None:
        """Ask ``server`` to send ``notifications/resources/updated`` whenever the resource
        ``uri`` changes; they reach notification listeners and
        :meth:`forward_notifications` like every other notification. Uses a
        ``subscriptions/listen`` stream on 2026-era connections and ``resources/subscribe``
        on older ones. Subscribing to the same URI again does nothing. Raises
        :class:`~agentkit.errors.McpError` when the server is not connected, does not
        offer subscriptions, refuses, or does not answer within ``timeout`` seconds."""
        from .._threads import CallTimeout
        from ._failures import NotConnected, ResourceSubscriptionUnsupported, describe_error

        if server not in self._rt.conns:
            raise ConfigurationError(f"no MCP server named {server!r}; the servers are "
                                     f"{', '.join(map(repr, self._rt.conns))}")
        if self._rt.closed:
            raise McpError("the MCP toolset is closed; connect again with connect_mcp()")
        try:
            self._rt.loop.run(self._rt.conns[server].subscribe_resource, uri, timeout=timeout)
        except CallTimeout:
            raise McpError(f"MCP server {server!r} did not confirm the subscription to {uri!r} "
                           f"within {timeout:g}s") from None
        except NotConnected as exc:
            raise McpError(f"cannot subscribe to {uri!r}: MCP server {server!r} is not connected "
                           f"({exc})") from None
        except ResourceSubscriptionUnsupported as exc:
            raise McpError(str(exc)) from None
        except McpError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server refused or the connection broke
            raise McpError(f"MCP server {server!r} refused the subscription to {uri!r}: "
                           f"{describe_error(exc)}") from None

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
        stop: list[Callable[[], None]] = []

        def forward(note: dict[str, Any]) -> None:
            if wanted is not None and note["method"] not in wanted:
                return
            try:
                push(event_type, note)
            except SessionClosedError:  # the session's end is the forwarding's end
                stop[0]()

        stop.append(self.add_notification_listener(forward))
        return stop[0]

    def close(self) -> None:
        """Disconnect every server (stdio children are shut down), stop the event-loop
        thread and the notification delivery. Idempotent. Tools called afterwards return an
        error result. Cannot be called from the MCP event-loop thread (for example from an
        ``mcp.Client`` message handler)."""
        if self._rt.loop.in_loop_thread():
            raise McpError("close() was called from the MCP event-loop thread, where it would "
                           "deadlock; call it from an ordinary thread")
        self._finalizer()
        if not self._rt.notifier.in_delivery_thread():  # (a listener must not wait for itself)
            self._rt.shut_down.wait()  # a close() racing another returns only when all is down

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.tools)} tools"
        return f"<McpToolset {', '.join(self._rt.conns)}: {state}>"
