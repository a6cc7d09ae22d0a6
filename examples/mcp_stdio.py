"""MCP tools from a plain synchronous script: no event loop, no leftover processes.

Starts examples/mcp_server_demo.py as a stdio MCP server, hands its tools to run_agent
(a ScriptedModel plays the model, so no provider is needed) and refuses destructive
calls with an authorization hook. Run it from anywhere:

    python examples/mcp_stdio.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from agentkit import ScriptedModel, ToolCall, run_agent
from agentkit.mcp import connect_mcp
from agentkit.messages import ToolResultPart

SERVER = Path(__file__).resolve().with_name("mcp_server_demo.py")


def authorize(server: str, tool: str, arguments: dict, call_id: str | None) -> None:
    """Runs before every MCP call; raising denies it and nothing reaches the server."""
    if tool.startswith("delete"):
        raise PermissionError(f"{tool} is not allowed in this demo")


def tool_outputs(request) -> list[str]:
    """The tool results the model received in its latest request."""
    return [p.output.as_text() for p in request.messages[-1].content if isinstance(p, ToolResultPart)]


def main() -> int:
    servers = {"notes": {"command": sys.executable, "args": [str(SERVER)]}}
    with connect_mcp(servers, authorize_tool_call=authorize) as mcp:
        status = mcp.servers["notes"]
        print(f"server {status.name}: {status.status}, {status.tool_count} tools")
        for tool in mcp.tools:
            print(f"  {tool.name}{' (read-only)' if tool.read_only else ''}: {tool.description}")

        model = ScriptedModel([
            [
                ToolCall("save_note", {"title": "groceries", "text": "eggs milk bread"}),
                ToolCall("word_count", {"text": "the quick brown fox"}),
            ],
            [ToolCall("list_notes"), ToolCall("delete_all_notes")],
            lambda request: "Done: " + " | ".join(tool_outputs(request)),
        ])
        result = run_agent(
            model,
            "Save a grocery note, count some words, then tidy up.",
            tools=mcp.tools,
            on_tool_call_finish=lambda call: print(
                f"  tool {call.tool_name}({call.input}) -> {'ERROR ' if call.is_error else ''}{call.output.as_text()}"
            ),
        )
        print(f"answer: {result.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
