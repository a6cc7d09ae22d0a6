"""Resources and prompts of a connected server, from synchronous code.

Each function crosses into the loop thread once, lists page by page like tools, and
turns the SDK's result into agentkit values: :class:`~agentkit.mcp.McpResource`,
content parts, :class:`~agentkit.mcp.McpPrompt`, :class:`~agentkit.messages.Message`.
:func:`resource_tools` builds the opt-in tools that let a model list and read resources.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigurationError, McpError
from ..messages import FilePart, ImagePart, Message, TextPart, ToolOutput
from ..tools.base import Tool
from ._runtime import Runtime
from .host import McpPrompt, McpPromptArgument, McpResource
from .results import content_block_to_parts, resource_contents_to_parts

__all__: list[str] = []

Parts = list[TextPart | ImagePart | FilePart]


def _conn(rt: Runtime, server: str) -> Any:
    if server not in rt.conns:
        raise ConfigurationError(f"no MCP server named {server!r}; the servers are "
                                 f"{', '.join(map(repr, rt.conns))}")
    if rt.closed:
        raise McpError("the MCP toolset is closed; connect again with connect_mcp()")
    return rt.conns[server]


def offers(conn: Any, feature: str) -> bool:
    """True when the connected server advertised ``feature`` (``resources``/``prompts``)."""
    client = conn.client
    caps = None if client is None else client.session.server_capabilities
    return bool(caps is not None and getattr(caps, feature, None) is not None)


def _run(rt: Runtime, server: str, what: str, feature: str, fn: Callable[..., Any], *args: Any,
         timeout: float | None) -> Any:
    """Run ``fn(conn, *args)`` on the loop; every failure becomes an McpError naming
    ``server`` and ``what``."""
    from .._threads import CallTimeout
    from ._failures import NotConnected, describe_error

    conn = _conn(rt, server)
    if conn.status != "connected":
        raise McpError(f"cannot {what}: MCP server {server!r} is not connected ({conn.error or conn.status})")
    if not offers(conn, feature):
        raise McpError(f"cannot {what}: MCP server {server!r} does not offer {feature} "
                       f"(no {feature} capability)")
    try:
        return rt.loop.run(fn, conn, *args, timeout=timeout)
    except CallTimeout:
        raise McpError(f"cannot {what}: MCP server {server!r} gave no answer within {timeout:g}s") from None
    except NotConnected as exc:
        raise McpError(f"cannot {what}: MCP server {server!r} is not connected ({exc})") from None
    except McpError:
        raise
    except Exception as exc:  # noqa: BLE001 - the server refused, or the connection broke
        raise McpError(f"cannot {what}: MCP server {server!r} answered with an error: "
                       f"{describe_error(exc)}") from None


async def _list_resources(conn: Any) -> list[Any]:
    client = await conn.usable_client()
    return list(await conn.paginate(
        "resources/list", lambda c: client.list_resources(cursor=c, cache_mode="bypass"),
        lambda page: page.resources, key=lambda r: str(r.uri), noun="resource"))


async def _read_resource(conn: Any, uri: str) -> Any:
    return await (await conn.usable_client()).read_resource(uri)


async def _list_prompts(conn: Any) -> list[Any]:
    client = await conn.usable_client()
    return list(await conn.paginate(
        "prompts/list", lambda c: client.list_prompts(cursor=c, cache_mode="bypass"),
        lambda page: page.prompts, key=lambda p: p.name, noun="prompt"))


async def _get_prompt(conn: Any, name: str, arguments: dict[str, str] | None) -> Any:
    return await (await conn.usable_client()).get_prompt(name, arguments)


def list_resources(rt: Runtime, server: str, timeout: float | None) -> list[McpResource]:
    """Every resource ``server`` lists."""
    found = _run(rt, server, "list resources", "resources", _list_resources, timeout=timeout)
    return [McpResource(uri=str(r.uri), name=r.name, title=r.title, description=r.description,
                        mime_type=r.mime_type, size=r.size) for r in found]


def read_resource(rt: Runtime, server: str, uri: str, timeout: float | None) -> Parts:
    """The contents of resource ``uri`` as agentkit parts."""
    if not isinstance(uri, str) or not uri:
        raise ConfigurationError(f"read_resource() needs a resource URI string, not {uri!r}")
    result = _run(rt, server, f"read resource {uri!r}", "resources", _read_resource, uri, timeout=timeout)
    parts: Parts = []
    for contents in result.contents:
        parts.extend(resource_contents_to_parts(contents))
    return parts


def list_prompts(rt: Runtime, server: str, timeout: float | None) -> list[McpPrompt]:
    """Every prompt ``server`` lists."""
    found = _run(rt, server, "list prompts", "prompts", _list_prompts, timeout=timeout)
    return [McpPrompt(name=p.name, title=p.title, description=p.description,
                      arguments=tuple(McpPromptArgument(name=a.name, description=a.description,
                                                        required=bool(a.required))
                                      for a in (p.arguments or ())))
            for p in found]


def get_prompt(rt: Runtime, server: str, name: str, arguments: Mapping[str, Any] | None,
               timeout: float | None) -> list[Message]:
    """Prompt ``name`` filled in with ``arguments``, as user and assistant messages."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"get_prompt() needs a prompt name string, not {name!r}")
    args: dict[str, str] | None = None
    if arguments is not None:
        if not isinstance(arguments, Mapping):
            raise ConfigurationError(f"prompt arguments must be a dict of str to str, not "
                                     f"{type(arguments).__name__}")
        args = {}
        for key, value in arguments.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError(f"prompt arguments must map str to str (MCP prompt arguments "
                                         f"are strings); got {key!r}: {value!r}")
            args[key] = value
    result = _run(rt, server, f"get prompt {name!r}", "prompts", _get_prompt, name, args, timeout=timeout)
    messages: list[Message] = []
    for msg in result.messages:
        parts = content_block_to_parts(msg.content)
        messages.append(Message(role="assistant" if msg.role == "assistant" else "user", content=tuple(parts)))
    return messages


LIST_TOOL = "mcp_list_resources"
READ_TOOL = "mcp_read_resource"


def resource_tools(rt: Runtime, servers: list[str], timeout: float | None, taken: set[str],
                   warn: Callable[[str], None]) -> list[Tool]:
    """The two tools ``expose_resources=True`` adds: list the resources of ``servers``
    and read one. A name already taken by a server's tool is left to that tool."""
    if not servers:
        return []

    def list_all(server: str | None = None) -> ToolOutput:
        listing: list[dict[str, Any]] = []
        for name in [server] if server else servers:
            try:
                found = list_resources(rt, name, timeout)
            except McpError as exc:
                if server:
                    return ToolOutput.error(str(exc))
                listing.append({"server": name, "error": str(exc)})
                continue
            listing.extend({"server": name, "uri": r.uri, "name": r.name, "description": r.description,
                            "mime_type": r.mime_type} for r in found)
        return ToolOutput(kind="json", value=json.loads(json.dumps(listing, default=str)))

    def read(server: str, uri: str) -> ToolOutput:
        try:
            parts = read_resource(rt, server, uri, timeout)
        except McpError as exc:
            return ToolOutput.error(str(exc))
        if all(isinstance(p, TextPart) for p in parts):
            return ToolOutput.text("\n".join(p.text for p in parts if isinstance(p, TextPart)))
        return ToolOutput(kind="content", value=tuple(parts))

    server_prop = {"type": "string", "enum": list(servers), "description": "The MCP server."}
    tools = [
        Tool(name=LIST_TOOL, fn=list_all, read_only=True,
             description="List the resources (documents, files, data) the connected MCP servers offer, "
                         "with their URIs. Give 'server' to list only that server's.",
             input_schema={"type": "object", "properties": {"server": server_prop},
                           "additionalProperties": False}),
        Tool(name=READ_TOOL, fn=read, read_only=True,
             description="Read one resource of an MCP server by its URI (from mcp_list_resources).",
             input_schema={"type": "object", "properties": {"server": server_prop,
                                                            "uri": {"type": "string"}},
                           "required": ["server", "uri"], "additionalProperties": False}),
    ]
    kept = []
    for tool in tools:
        if tool.name in taken:
            warn(f"expose_resources: a server tool is already named {tool.name!r}; that tool was kept "
                 f"and the resource helper left out")
        else:
            kept.append(tool)
    return kept
