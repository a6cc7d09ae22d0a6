"""Opening one MCP connection's client: stdio parameters, or an httpx2 client for
Streamable HTTP (headers read per connect, OAuth, delivery tracking), or a caller-built
``mcp.Client`` with agentkit's handlers chained in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio

from ..errors import McpError
from ._callbacks import HostCallbacks
from ._reconnect import track_deliveries
from .config import HttpServer, StdioServer

__all__: list[str] = []


async def _headers(spec: HttpServer) -> dict[str, str]:
    if not callable(spec.headers):
        return dict(spec.headers)
    headers = await anyio.to_thread.run_sync(spec.headers)
    if not isinstance(headers, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in headers.items()):
        raise McpError(f"the 'headers' callable must return a dict of str to str, not {headers!r:.80}")
    return dict(headers)

@asynccontextmanager
async def open_client(conn: Any, spec: Any, host: HostCallbacks) -> AsyncIterator[Any]:
    """Open ``spec`` (a config or an un-entered ``mcp.Client``) for the connection ``conn``
    and yield the entered client; everything opened is closed on exit."""
    from mcp import Client, StdioServerParameters

    callbacks = host.for_server(conn.name, lambda: conn.roots, conn._roots_listed)
    async with AsyncExitStack() as stack:
        if isinstance(spec, StdioServer):
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args),
                env=None if spec.env is None else dict(spec.env), cwd=spec.cwd,
            )
            client = Client(params, message_handler=conn._on_message, log_level=conn._log_level,
                            cache=None, **callbacks)
        elif isinstance(spec, HttpServer):
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            auth = None
            if spec.auth is not None:
                from ._oauth import build_auth

                auth = build_auth(spec.auth, spec.url, conn.hold_deadline)
            http = httpx2.AsyncClient(headers=await _headers(spec), auth=auth,
                                      timeout=httpx2.Timeout(30.0, read=300.0))
            conn.tracked = track_deliveries(http, spec.url)
            await stack.enter_async_context(http)
            client = Client(streamable_http_client(spec.url, http_client=http),
                            message_handler=conn._on_message, log_level=conn._log_level, cache=None,
                            **callbacks)
        else:  # an un-entered mcp.Client built by the caller: chain its own handler
            client = spec
            client.message_handler = _chain(conn, client.message_handler)
            if client.log_level is None:
                client.log_level = conn._log_level
            for key, callback in callbacks.items():  # the caller's own callbacks win
                if getattr(client, key, None) is None:
                    setattr(client, key, callback)
        yield await stack.enter_async_context(client)

def _chain(conn: Any, user_handler: Any) -> Any:
    async def handler(message: Any) -> None:
        await conn._on_message(message)
        if user_handler is not None:
            await user_handler(message)

    return handler
