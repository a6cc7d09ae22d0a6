"""``connect_mcp``: validate, start the loop thread, connect every server concurrently."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError, McpError, MissingDependencyError
from ..models._retry import RetryPolicy
from ._calls import AuthorizeToolCall
from .config import _LOG_LEVELS, LogLevel, ServerSpec, validate_servers
from .host import ApproveSampling, ElicitationHandler
from .toolset import McpToolset

log = logging.getLogger("agentkit.mcp")

_RECONNECT = RetryPolicy(max_retries=3, initial_delay=0.2, max_delay=2.0, max_elapsed=30.0, jitter=0.25)
"""The default reconnect policy: three attempts within 30 s."""


def connect_mcp(
    servers: Mapping[str, ServerSpec],
    *,
    authorize_tool_call: AuthorizeToolCall | None = None,
    connect_timeout: float = 30.0,
    call_timeout: float | None = 300.0,
    max_list_pages: int = 100,
    fail_on_no_tools: bool = False,
    prefix_tool_names: bool | None = None,
    log_level: LogLevel | None = "info",
    roots: Any = None,
    sampling: Any = None,
    approve_sampling: ApproveSampling | None = None,
    elicitation: ElicitationHandler | None = None,
    expose_resources: bool = False,
    reconnect: RetryPolicy | None = _RECONNECT,
) -> McpToolset:
    """Connect MCP servers and return their tools as an :class:`McpToolset`.

    ``servers`` maps a name to a stdio config (``{"command", "args", "env", "cwd"}``), a
    Streamable HTTP config (``{"url", "headers", "auth"}``: ``headers`` a dict or a
    callable read at every connect, ``auth`` an :class:`~agentkit.mcp.McpOAuth`), a :class:`~agentkit.mcp.StdioServer`
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
    2026-era connections (None: no opt-in). Every call carries a progress token; the
    server's progress notifications reach ``ToolContext.report_progress`` as
    ``{"server", "tool", "progress", "total", "message"}`` dicts (so
    ``on_tool_call_update`` and the agent stream's ``tool-update`` events hear them).

    What servers may ask of the host (each is offered only when configured):

    * ``roots``: directories (paths or ``file://`` URIs), or an execution context (its
      ``root_dir``), announced through ``roots/list``; a server config's own ``"roots"``
      overrides it. Without either, no roots capability is offered. Change them later
      with :meth:`McpToolset.set_roots`. ``roots="session"`` offers the capability with
      an empty list, then announces the ``root_dir`` of the execution context of the
      generation calling the tools (sending ``roots/list_changed`` before the call when it
      changes).
    * ``sampling``: a ``ChatModel`` or model spec (asked with the server's messages,
      system prompt and ``maxTokens``) or a handler ``(SamplingRequest) -> SamplingResult | str``.
      ``sampling="session"`` answers with the model of the generation (Session or
      ``run_agent``) whose tool call is in flight, and refuses requests made outside one.
      ``approve_sampling(request)`` is the policy gate run first: returning False or
      raising refuses the request before any token is spent. Without it, sampling
      requests are answered.
    * ``elicitation``: a handler ``(ElicitationRequest) -> ElicitationResult | dict | None``
      (a dict accepts with that content, None declines).

    A server that drops (an HTTP server gone for a while, a stdio process that died) is
    ``disconnected``, keeps its tools listed, and is reconnected at its next call, with
    up to ``reconnect.max_retries`` attempts, exponential backoff between them
    (``initial_delay`` doubling up to ``max_delay``, with ``jitter``) and at most
    ``max_elapsed`` seconds per round; the tool list is refreshed and resource
    subscriptions renewed. A call that met the dead connection is sent again only when it
    provably never reached the server; otherwise it gets an error result saying its
    outcome is unknown. ``reconnect=None``: a lost server stays failed.

    ``expose_resources=True`` adds two tools that let the model list and read the
    servers' resources (``mcp_list_resources``, ``mcp_read_resource``).
    """
    try:
        import anyio  # noqa: F401
        import mcp  # noqa: F401
    except ImportError:
        raise MissingDependencyError("mcp", "mcp", "agentkit.mcp (MCP servers as tools)") from None
    _check_options(connect_timeout, call_timeout, max_list_pages, authorize_tool_call, fail_on_no_tools,
                   prefix_tool_names, log_level, reconnect, expose_resources)
    specs = validate_servers(servers)
    from ._callbacks import SESSION, HostCallbacks, normalize_roots

    host = HostCallbacks(sampling=sampling, approve_sampling=approve_sampling, elicitation=elicitation)
    session_roots = isinstance(roots, str) and roots == SESSION
    default_roots = None if roots is None else () if session_roots else normalize_roots(roots, "roots")
    server_roots = {
        name: (default_roots if getattr(spec, "roots", None) is None
               else normalize_roots(spec.roots, f"MCP server {name!r}: 'roots'"))
        for name, spec in specs.items()
    }

    from .._threads import LoopThread
    from ._runtime import Notifier, Runtime, supervise
    from ._server import ServerConnection

    notifier = Notifier()
    holder: list[weakref.ref[McpToolset]] = []  # weak: the runtime must not keep the toolset alive

    def tools_changed(_name: str) -> None:
        toolset = holder[0]() if holder else None
        if toolset is not None:
            toolset._rebuild(_name)

    conns = {
        name: ServerConnection(name, spec, connect_timeout=float(connect_timeout),
                               max_list_pages=max_list_pages, log_level=log_level,
                               notify=notifier.put, tools_changed=tools_changed, host=host,
                               roots=server_roots[name], reconnect=reconnect)
        for name, spec in specs.items()
    }
    for name, spec in specs.items():
        conns[name].session_roots = session_roots and getattr(spec, "roots", None) is None
    loop = LoopThread("agentkit-mcp-loop", error=McpError, what="MCP call",
                      closed="the MCP toolset is closed; connect again with connect_mcp()")
    runtime = Runtime(loop, conns, notifier)
    toolset = McpToolset._create(runtime, authorize=authorize_tool_call, callers=host.callers,
                                 call_timeout=None if call_timeout is None else float(call_timeout),
                                 prefix=prefix_tool_names, expose_resources=expose_resources)
    try:
        runtime.supervisor = runtime.loop.submit(supervise, list(conns.values()))
        _wait_connected(list(conns.values()), float(connect_timeout))
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


def _check_options(connect_timeout: object, call_timeout: object, max_list_pages: object,
                   authorize_tool_call: object, fail_on_no_tools: object, prefix_tool_names: object,
                   log_level: object, reconnect: object, expose_resources: object) -> None:
    """:func:`connect_mcp`'s options checked, before anything starts."""
    if not isinstance(connect_timeout, (int, float)) or connect_timeout <= 0:
        raise ConfigurationError(f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}")
    if call_timeout is not None and (not isinstance(call_timeout, (int, float)) or call_timeout <= 0):
        raise ConfigurationError(f"call_timeout must be a positive number of seconds or None, not {call_timeout!r}")
    if not isinstance(max_list_pages, int) or isinstance(max_list_pages, bool) or max_list_pages < 1:
        raise ConfigurationError(f"max_list_pages must be an integer >= 1, not {max_list_pages!r}")
    if authorize_tool_call is not None and not callable(authorize_tool_call):
        raise ConfigurationError("authorize_tool_call must be a callable (server, tool, arguments, call_id)")
    if not isinstance(fail_on_no_tools, bool):
        raise ConfigurationError(f"fail_on_no_tools must be True or False, not {fail_on_no_tools!r}")
    if prefix_tool_names is not None and not isinstance(prefix_tool_names, bool):
        raise ConfigurationError(f"prefix_tool_names must be True, False or None (prefix only with "
                                 f"several servers), not {prefix_tool_names!r}")
    if log_level is not None and log_level not in _LOG_LEVELS:
        raise ConfigurationError(f"log_level must be one of {', '.join(_LOG_LEVELS)} or None, not {log_level!r}")
    if reconnect is not None and not isinstance(reconnect, RetryPolicy):
        raise ConfigurationError(f"reconnect must be an agentkit.models.RetryPolicy or None (never "
                                 f"reconnect), not {reconnect!r}")
    if not isinstance(expose_resources, bool):
        raise ConfigurationError(f"expose_resources must be True or False, not {expose_resources!r}")


def _wait_connected(conns: list[Any], connect_timeout: float) -> None:
    """Wait until every server connected and listed its tools, or failed; one still
    connecting after ``connect_timeout`` (plus the time a person spent authorizing) fails."""
    deadline = time.monotonic() + connect_timeout + 1.0
    for conn in conns:
        while not conn.ready.wait(max(0.0, min(0.5, deadline - time.monotonic()))):
            if conn.holding:  # a person is authorizing: McpOAuth.authorize_timeout applies
                deadline = max(deadline, time.monotonic() + 1.0)
            elif time.monotonic() >= deadline:
                conn.fail(f"did not connect and list its tools within {connect_timeout:g}s "
                          f"(connect_timeout)")
                break
