"""MCP server configurations, validated before anything is started.

A server is described by a plain dict (``{"command": ..., "args": [...]}`` for a stdio
subprocess, ``{"url": ..., "headers": {...}, "auth": McpOAuth(...)}`` for Streamable HTTP), by the frozen
dataclasses :class:`StdioServer` / :class:`HttpServer`, or by an ``mcp.Client`` that was
built but not entered yet. Validation is pure: it starts no process and opens no socket.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args
from urllib.parse import urlparse

from ..errors import ConfigurationError
from .oauth import McpOAuth

__all__ = ["validate_servers"]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
"""The MCP logging levels (``logging/setLevel``), least severe first."""
_LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)


@dataclass(frozen=True, kw_only=True)
class StdioServer:
    """An MCP server run as a subprocess that speaks MCP over its stdin/stdout."""

    command: str
    """The executable to run (a path, or a name found on ``PATH``)."""
    args: tuple[str, ...] = ()
    """Command-line arguments."""
    env: Mapping[str, str] | None = None
    """Extra environment variables, added to a small safe default environment
    (``PATH``, ``HOME``...) that the mcp SDK passes to the child."""
    cwd: str | None = None
    """Working directory of the child process (must exist)."""
    roots: Sequence[str | os.PathLike[str]] | None = None
    """Directories announced to this server as its roots (overrides ``connect_mcp(roots=)``)."""

    @property
    def transport(self) -> str:
        """Always ``"stdio"``."""
        return "stdio"


@dataclass(frozen=True, kw_only=True)
class HttpServer:
    """An MCP server reached over Streamable HTTP."""

    url: str
    """The MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: Mapping[str, str] | Callable[[], Mapping[str, str]] = field(default_factory=dict)
    """Headers sent with every request (for example ``Authorization``), or a callable
    returning them: it is called (in a worker thread) at every connect and reconnect, so
    a rotating token is read fresh each time; requests of one connection share its result."""
    roots: Sequence[str | os.PathLike[str]] | None = None
    """Directories announced to this server as its roots (overrides ``connect_mcp(roots=)``)."""
    auth: McpOAuth | None = None
    """OAuth 2.1 for this server (see :class:`~agentkit.mcp.McpOAuth`)."""

    @property
    def transport(self) -> str:
        """Always ``"streamable-http"``."""
        return "streamable-http"


ServerSpec = Union[StdioServer, HttpServer, Mapping[str, Any], Any]
"""What ``connect_mcp`` accepts per server: a config dict, a :class:`StdioServer`, a
:class:`HttpServer`, or an un-entered ``mcp.Client``."""

_STDIO_KEYS = ("command", "args", "env", "cwd", "roots")
_HTTP_KEYS = ("url", "headers", "roots", "auth")
_TRANSPORT_NAMES = {"stdio": "stdio", "http": "streamable-http", "streamable-http": "streamable-http",
                    "streamable_http": "streamable-http", "streamableHttp": "streamable-http"}


def _fail(name: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"MCP server {name!r}: {problem}")


def _str_map(name: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _fail(name, f"{key!r} must be a dict of str to str, not {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise _fail(name, f"{key!r} must map str to str; got {k!r}: {v!r}")
        out[k] = v
    return out


def _stdio_from_dict(name: str, cfg: Mapping[str, Any]) -> StdioServer:
    command = cfg.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _fail(name, "a stdio server needs 'command': the executable to run, e.g. "
                          "{'command': 'python', 'args': ['server.py']}")
    args = cfg.get("args", ())
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise _fail(name, f"'args' must be a list of strings, not {type(args).__name__}")
    if not all(isinstance(a, str) for a in args):
        raise _fail(name, f"'args' must be a list of strings; got {list(args)!r}")
    env = cfg.get("env")
    cwd = cfg.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, (str, os.PathLike)):
            raise _fail(name, f"'cwd' must be a path, not {type(cwd).__name__}")
        cwd = os.fspath(cwd)
        if not os.path.isdir(cwd):
            raise _fail(name, f"'cwd' {cwd!r} is not an existing directory")
    return StdioServer(
        command=command,
        args=tuple(args),
        env=None if env is None else _str_map(name, "env", env),
        cwd=cwd,
        roots=_roots(name, cfg.get("roots")),
    )


def _http_from_dict(name: str, cfg: Mapping[str, Any]) -> HttpServer:
    url = cfg.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _fail(name, "a Streamable HTTP server needs 'url', e.g. {'url': 'http://127.0.0.1:8000/mcp'}")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise _fail(name, f"'url' must be an http:// or https:// URL with a host, not {url!r}")
    headers = cfg.get("headers")
    if headers is None:
        headers = {}
    elif not callable(headers):
        headers = _str_map(name, "headers", headers)
    auth = cfg.get("auth")
    if auth is not None and not isinstance(auth, McpOAuth):
        raise _fail(name, f"'auth' must be an agentkit.mcp.McpOAuth, not {type(auth).__name__}")
    return HttpServer(url=url, headers=headers, roots=_roots(name, cfg.get("roots")), auth=auth)


def _roots(name: str, value: Any) -> Any:
    """The per-server ``roots``, checked (every entry an existing directory or a file:// URI)."""
    if value is None:
        return None
    from ._callbacks import normalize_roots

    normalize_roots(value, f"MCP server {name!r}: 'roots'")
    return tuple(value) if not hasattr(value, "root_dir") else value


def _from_dict(name: str, cfg: Mapping[str, Any]) -> StdioServer | HttpServer:
    keys = set(cfg)
    transport = cfg.get("transport", cfg.get("type"))
    if transport is not None:
        if transport not in _TRANSPORT_NAMES:
            raise _fail(name, f"unknown transport {transport!r}; use 'stdio' or 'streamable-http'")
        transport = _TRANSPORT_NAMES[transport]
    elif "command" in keys and "url" in keys:
        raise _fail(name, "give either 'command' (stdio) or 'url' (Streamable HTTP), not both")
    elif "command" in keys:
        transport = "stdio"
    elif "url" in keys:
        transport = "streamable-http"
    else:
        raise _fail(name, "the config needs 'command' (a stdio server) or 'url' (a Streamable HTTP "
                          f"server); got keys {sorted(keys)}")
    allowed = (_STDIO_KEYS if transport == "stdio" else _HTTP_KEYS) + ("transport", "type")
    unknown = sorted(k for k in keys if k not in allowed)
    if unknown:
        shown = ", ".join(k for k in allowed if k not in ("transport", "type"))
        raise _fail(name, f"unknown key(s) {unknown} for a {transport} server; allowed: {shown}")
    return _stdio_from_dict(name, cfg) if transport == "stdio" else _http_from_dict(name, cfg)


def _check_client(name: str, obj: Any) -> Any:
    try:
        from mcp import Client, ClientSession
    except ImportError:  # pragma: no cover - without mcp installed nothing is an mcp.Client
        pass
    else:
        if isinstance(obj, Client):
            if getattr(obj, "_entered", False):
                raise _fail(name, "this mcp.Client was already entered (async with) on another event loop; "
                                  "pass a fresh, un-entered mcp.Client and agentkit will open it")
            return obj
        if isinstance(obj, ClientSession):
            raise _fail(name, "a bare mcp.ClientSession is bound to the event loop of the transport that "
                              "created its streams and cannot be moved to agentkit's loop; pass an "
                              "un-entered mcp.Client(...) (a URL, StdioServerParameters, a Transport or an "
                              "in-process server) instead")
    raise _fail(name, f"expected a config dict, StdioServer, HttpServer or mcp.Client, "
                      f"not {type(obj).__name__}")


def validate_servers(servers: Mapping[str, ServerSpec]) -> dict[str, Any]:
    """Check every server description and return ``{name: StdioServer | HttpServer |
    mcp.Client}`` in the given order. Raises :class:`~agentkit.errors.ConfigurationError`
    naming the server and the problem; nothing is started."""
    if not isinstance(servers, Mapping):
        raise ConfigurationError(
            f"connect_mcp() takes a dict of server name to config, not {type(servers).__name__}; "
            f"e.g. {{'files': {{'command': 'python', 'args': ['server.py']}}}}"
        )
    if not servers:
        raise ConfigurationError("connect_mcp() needs at least one server")
    out: dict[str, Any] = {}
    for name, spec in servers.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"MCP server names must be non-empty strings, not {name!r}")
        if isinstance(spec, (StdioServer, HttpServer)):
            out[name] = _from_dict(name, _as_dict(spec))
        elif isinstance(spec, Mapping):
            out[name] = _from_dict(name, spec)
        else:
            out[name] = _check_client(name, spec)
    return out


def _as_dict(spec: StdioServer | HttpServer) -> dict[str, Any]:
    if isinstance(spec, StdioServer):
        return {"command": spec.command, "args": list(spec.args), "env": spec.env, "cwd": spec.cwd,
                "roots": spec.roots}
    headers = spec.headers if callable(spec.headers) else dict(spec.headers)
    return {"url": spec.url, "headers": headers, "roots": spec.roots, "auth": spec.auth}
