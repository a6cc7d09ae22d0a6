"""An MCP server (the mcp SDK's MCPServer, 2026-07-28 protocol) that asks its client for
things: progress, roots, sampling, elicitation (through ``Resolve`` markers, which ride
``InputRequiredResult`` rounds on 2026-era connections); it also offers a resource and a
prompt. The tests use it beside the npm reference servers, which speak 2025-11-25."""

from __future__ import annotations

from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, ListRoots, MCPServer, Resolve, Sample
from pydantic import BaseModel

server = MCPServer("host-features")


class Contact(BaseModel):
    name: str


@server.tool()
async def count_slowly(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress at each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted to {steps}"


def _roots() -> ListRoots:
    return ListRoots()


@server.tool()
def show_roots(roots: Annotated[types.ListRootsResult, Resolve(_roots)]) -> str:
    """The roots the client announced, one URI per line."""
    return "\n".join(str(root.uri) for root in roots.roots) or "(no roots)"


def _summary(text: str) -> Sample:
    return Sample([types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
                  max_tokens=50, system_prompt="Summarize in one line.")


@server.tool()
def summarize(text: str, summary: Annotated[types.CreateMessageResult, Resolve(_summary)]) -> str:
    """Ask the client's model for a one-line summary of ``text``."""
    return summary.content.text if isinstance(summary.content, types.TextContent) else "(not text)"


def _contact() -> Elicit[Contact]:
    return Elicit("What is your name?", Contact)


@server.tool()
def ask_name(answer: Annotated[ElicitationResult[Contact], Resolve(_contact)]) -> str:
    """Ask the user for their name."""
    return f"hello {answer.data.name}" if answer.action == "accept" else answer.action


@server.resource("note://welcome", name="welcome", mime_type="text/plain")
def welcome() -> str:
    """A short welcome note."""
    return "Welcome to the notes server."


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of ``topic``."""
    return f"Please review {topic}."


if __name__ == "__main__":
    import sys

    if "--http" in sys.argv:
        from demo_server import serve_http  # this script's directory is on sys.path

        serve_http(server)
    else:
        server.run()
