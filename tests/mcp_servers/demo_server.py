"""A real MCP server for agentkit's tests, written with the mcp SDK's MCPServer.

Run it as a stdio server (``python demo_server.py``) or as a Streamable HTTP server on a
free 127.0.0.1 port (``python demo_server.py --http``; the port is printed on the first
line of stdout). ``AGENTKIT_MCP_TEST_LOG`` names a file every tool call is appended to,
so tests can prove what reached the server.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("demo", instructions="agentkit test server")


def _record(line: str) -> None:
    path = os.environ.get("AGENTKIT_MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _record(f"add {a} {b}")
    return a + b


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    _record(f"echo {text}")
    return f"echo: {text}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    _record(f"fail {reason}")
    raise ToolError(f"refused: {reason}")


@server.tool()
def media() -> list[types.ContentBlock]:
    """Returns text, an image, audio and an embedded resource."""
    _record("media")
    b64 = base64.b64encode(PNG).decode()
    return [
        types.TextContent(type="text", text="here is the media"),
        types.ImageContent(type="image", data=b64, mime_type="image/png"),
        types.AudioContent(type="audio", data=base64.b64encode(b"RIFF-audio").decode(), mime_type="audio/wav"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///notes.txt", mime_type="text/plain",
                                                text="resource text"),
        ),
    ]


@server.tool()
def record(note: str) -> str:
    """Record a note on the server."""
    _record(f"record {note}")
    return "recorded"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    _record(f"slow {seconds}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _record(f"slow {seconds} cancelled")  # the client's notifications/cancelled arrived
        raise
    return "done"


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    _record("crash")
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def shout(message: str, ctx: Context) -> str:
    """Send a log notification, then answer."""
    await ctx.info(message)
    return "shouted"


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header (empty over stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'extra' and announce that the tool list changed."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra!"

    server.add_tool(extra, name="extra")
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()  # rides subscriptions/listen streams
    else:
        await ctx.session.send_tool_list_changed()  # the handshake-era notification
    return "grown"


@server.resource("note://current", name="current-note", mime_type="text/plain")
def current_note() -> str:
    """The current note."""
    return "note text"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announce that the resource at ``uri`` changed."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_resource_updated(uri)  # reaches listen streams subscribed to uri
    else:
        await ctx.session.send_resource_updated(uri)
    return "touched"


def serve_http(mcp_server: MCPServer | None = None) -> None:
    """Serve ``mcp_server`` (default: this demo) over Streamable HTTP on a free port,
    printing the port first (host_server.py uses it too)."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = (mcp_server or server).streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    print(port, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    if "--http" in sys.argv:
        serve_http()
    else:
        server.run()
