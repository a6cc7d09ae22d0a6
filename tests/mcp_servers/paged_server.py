"""A low-level mcp Server whose tools/list is paginated with cursors.

``python paged_server.py normal``  three pages, then no cursor
``python paged_server.py repeat``  page 2 hands out page 1's cursor again (a loop)
``python paged_server.py endless`` a new cursor on every page, forever
Tool names include characters providers reject, and two that sanitise to one name.
Resources (``page://<name>``, one of them an image blob) and prompts are paginated the
same way, one item per tool name.
"""

from __future__ import annotations

import sys
from urllib.parse import quote

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
    names, nxt = _page(params.cursor if params else None)
    return types.ListToolsResult(tools=[_tool(n) for n in names], next_cursor=nxt)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    n = (params.arguments or {}).get("n", 0)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}:{n}")])


def _page(cursor: str | None) -> tuple[list[str], str | None]:
    if MODE == "endless":
        page = int(cursor or "0")
        return [f"t{page}"], str(page + 1)
    names, nxt = PAGES[cursor]
    if MODE == "repeat" and cursor == "c1":
        nxt = "c1"
    return names, nxt


async def list_resources(ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    names, nxt = _page(params.cursor if params else None)
    return types.ListResourcesResult(
        resources=[types.Resource(uri=f"page://{quote(n, safe='')}", name=n, mime_type="text/plain")
                   for n in names] + ([types.Resource(uri="page://image", name="image", mime_type="image/png")]
                                        if nxt is None else []),
        next_cursor=nxt)


async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "page://image":
        return types.ReadResourceResult(contents=[types.BlobResourceContents(
            uri=uri, mime_type="image/png", blob="iVBORw0KGgo=")])
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=f"text of {uri}")])


async def list_prompts(ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    names, nxt = _page(params.cursor if params else None)
    return types.ListPromptsResult(prompts=[types.Prompt(name=n) for n in names], next_cursor=nxt)


async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    return types.GetPromptResult(messages=[
        types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"ask {params.name}")),
        types.PromptMessage(role="assistant", content=types.TextContent(type="text", text="answered")),
    ])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                on_read_resource=read_resource, on_list_prompts=list_prompts, on_get_prompt=get_prompt)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
