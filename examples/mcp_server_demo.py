"""A small MCP server for the MCP example, written with the mcp SDK's MCPServer.

It speaks MCP over stdin/stdout; agentkit starts it as a subprocess:

    connect_mcp({"notes": {"command": sys.executable, "args": ["examples/mcp_server_demo.py"]}})
"""

from __future__ import annotations

import mcp_types as types
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes", instructions="A tiny note book.")
NOTES: dict[str, str] = {}


@server.tool()
def save_note(title: str, text: str) -> str:
    """Save a note under a title (replaces an older note with that title)."""
    NOTES[title] = text
    return f"saved {title!r} ({len(text.split())} words)"


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def list_notes() -> str:
    """The titles of all saved notes, one per line."""
    return "\n".join(sorted(NOTES)) or "(no notes)"


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@server.tool()
def delete_all_notes() -> str:
    """Delete every note."""
    NOTES.clear()
    return "deleted"


if __name__ == "__main__":
    server.run()
