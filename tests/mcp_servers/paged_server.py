"""A low-level mcp Server whose tools/list is paginated with cursors.

``python paged_server.py normal``  three pages, then no cursor
``python paged_server.py repeat``  page 2 hands out page 1's cursor again (a loop)
``python paged_server.py endless`` a new cursor on every page, forever
Tool names include characters providers reject, and two that sanitise to one name.
"""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"

PAGES = {
    None: (["alpha", "beta"], "c1"),
    "c1": (["gamma", "dotted.name"], "c2"),
    "c2": (["dotted name", "x" * 80], None),
}


def _tool(name: str) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"tool {name}",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )


async def list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    cursor = params.cursor if params else None
    if MODE == "endless":
        page = int(cursor or "0")
        return types.ListToolsResult(tools=[_tool(f"t{page}")], next_cursor=str(page + 1))
    names, nxt = PAGES[cursor]
    if MODE == "repeat" and cursor == "c1":
        nxt = "c1"
    return types.ListToolsResult(tools=[_tool(n) for n in names], next_cursor=nxt)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    n = (params.arguments or {}).get("n", 0)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}:{n}")])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
