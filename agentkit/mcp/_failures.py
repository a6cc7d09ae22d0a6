"""How MCP connections fail, in words: error unwrapping and descriptions, connect hints,
the exceptions a connection raises to the toolset, and the filter that keeps the SDK's
per-line parse tracebacks off stderr on agentkit's loop threads."""

from __future__ import annotations

import logging
from typing import Any

import anyio

from .config import HttpServer, StdioServer

__all__: list[str] = []


def error_leaves(exc: BaseException) -> list[BaseException]:
    """``exc`` itself, or the leaf exceptions of an exception group, in order."""
    subs = getattr(exc, "exceptions", None)
    if isinstance(subs, tuple) and subs:
        return [leaf for sub in subs for leaf in error_leaves(sub)]
    return [exc]


def describe_error(exc: BaseException) -> str:
    """A one-line description of ``exc``; exception groups are unwrapped to their leaves."""
    texts = []
    for leaf in error_leaves(exc)[:3]:
        msg = str(leaf).strip()
        texts.append(f"{type(leaf).__name__}: {msg}" if msg else type(leaf).__name__)
    return "; ".join(texts) or type(exc).__name__


def connect_hint(spec: Any, exc: BaseException) -> str:
    """What to check after a failed connect, when the error makes it clear."""
    leaves = error_leaves(exc)
    if isinstance(spec, StdioServer):
        if any(isinstance(e, (FileNotFoundError, PermissionError)) for e in leaves):
            return (f" (check that 'command' {spec.command!r} is an installed executable: an absolute "
                    f"path, or a name on PATH)")
        if any(getattr(e, "code", None) == -32000 for e in leaves):  # CONNECTION_CLOSED
            return (" (the server process exited or closed its stdout before answering; its stderr "
                    "usually says why)")
    if isinstance(spec, HttpServer) and any(isinstance(e, (ConnectionError, OSError)) or
                                            type(e).__name__ == "ConnectError" for e in leaves):
        return f" (check that the server is running and that 'url' {spec.url!r} is right)"
    return ""


def offending_line(exc: ValueError) -> str | None:
    """The line the server wrote, as pydantic's validation error keeps it (None when the
    error does not say)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = errors()
        except Exception:  # noqa: BLE001 - not a pydantic error after all
            found = []
        for error in found:
            if isinstance(error.get("input"), str):
                return str(error["input"])
    return None


class _QuietParseErrors(logging.Filter):
    """The mcp SDK logs a full traceback for every stdout line that is not JSON-RPC; a
    server printing garbage floods stderr with them. On agentkit's loop threads the
    connection reports the problem itself (its status, or one warning), so those
    records are dropped; other users of the SDK in the process keep them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "Failed to parse JSONRPC message from server"
                    and record.threadName is not None and record.threadName.startswith("agentkit-mcp"))


def _install_log_filter() -> None:
    stdio_log = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _QuietParseErrors) for f in stdio_log.filters):
        stdio_log.addFilter(_QuietParseErrors())


_install_log_filter()


def answered(exc: BaseException) -> bool:
    """True when ``exc`` is an error the server sent back (so it is still there), not a
    closed connection, a transport failure or a timeout."""
    from mcp import MCPError

    leaves = error_leaves(exc)
    return all(isinstance(e, MCPError) and e.error.code != -32000 for e in leaves)  # CONNECTION_CLOSED


class NotConnected(Exception):
    """The server is not connected (failed, lost or closed)."""


class OutcomeUnknown(Exception):
    """The connection was lost while a call was on its way; ``sent`` says whether it may
    have reached the server (False: it did not, but the server could not be reconnected)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


def is_connection_loss(exc: BaseException) -> bool:
    """True when ``exc`` says the connection is gone (not an error the server answered)."""
    for e in error_leaves(exc):
        if isinstance(e, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                          ConnectionError, EOFError)):
            return True
        if getattr(getattr(e, "error", None), "code", None) == -32000 or getattr(e, "code", None) == -32000:
            return True  # CONNECTION_CLOSED
        if type(e).__module__.startswith("httpx") and type(e).__name__ in (
                "ConnectError", "ReadError", "WriteError", "RemoteProtocolError", "ConnectTimeout"):
            return True
    return False


class ResourceSubscriptionUnsupported(Exception):
    """The server does not offer resource subscriptions."""
