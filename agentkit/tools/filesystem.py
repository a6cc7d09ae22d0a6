"""Built-in file tools: read_file, write_file, list_directory, delete_file.

Every tool works through an :class:`~agentkit.execution.base.ExecutionContext` with an
``fs`` capability, asks ``context.request_permission`` first (operation, target path,
tool-call id: the tool's own gate, on the same path as ``before_tool_call`` hooks), and
shows the model truncated output. Refusals and failures come back as
error results the model reads.
"""

from __future__ import annotations

from typing import Any

from ..context._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ..messages import ToolOutput
from ._common import check_limits, guarded, permission_gate, require, visible
from .base import Tool, ToolContext

_PATH = {"type": "string", "description": "File path, relative to the working directory or absolute"}


def filesystem_tools(
    context: Any,
    include_delete: bool = True,
    *,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Tool]:
    """File tools bound to ``context``: ``read_file {path}``, ``write_file {path,
    content}``, ``list_directory {path}`` and (unless ``include_delete=False``)
    ``delete_file {path}``. ``max_lines``/``max_bytes`` bound what the model sees."""
    fs = require(context, "fs", "filesystem_tools")
    check_limits(max_lines, max_bytes)

    def read_file(path: str, ctx: ToolContext) -> str | ToolOutput:
        text = fs.read_file(path, tool_call_id=ctx.tool_call_id)
        if "\x00" in text[:8192]:  # a binary file would cost tokens and say nothing
            return ToolOutput.error(f"read_file: {path} looks like a binary file (it contains NUL "
                                    f"bytes); read_file shows text files only")
        return visible(text, max_lines, max_bytes)

    def write_file(path: str, content: str, ctx: ToolContext) -> str:
        written = fs.write_file(path, content, tool_call_id=ctx.tool_call_id)
        return f"wrote {written} bytes to {path}"

    def list_directory(path: str, ctx: ToolContext) -> str:
        entries = fs.list_directory(path, tool_call_id=ctx.tool_call_id)
        if not entries:
            return f"{path} is empty"
        lines = []
        for e in entries:
            if e.kind == "directory":
                lines.append(f"{e.name}/")
            elif e.kind == "file":
                lines.append(f"{e.name}  ({e.size} bytes)")
            elif e.kind == "symlink":
                lines.append(f"{e.name}@")
            else:
                lines.append(e.name)
        return visible("\n".join(lines), max_lines, max_bytes)

    def delete_file(path: str, ctx: ToolContext) -> str:
        fs.delete_file(path, tool_call_id=ctx.tool_call_id)
        return f"deleted {path}"

    def gate(operation: str) -> Any:
        def permission_of(data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
            details = {"bytes": len(data["content"].encode("utf-8"))} if operation == "write" else {}
            return operation, data["path"], details

        return permission_gate(context, f"{operation}_file" if operation != "list" else "list_directory",
                               permission_of)

    def schema(**props: Any) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props),
                "additionalProperties": False}

    tools = [
        Tool(name="read_file", description="Read a UTF-8 text file and return its content.",
             input_schema=schema(path=_PATH), fn=guarded("read_file", read_file),
             context_param="ctx", read_only=True, before_call=gate("read")),
        Tool(name="write_file",
             description="Create or replace a text file with the given content (parent "
                         "directories are created).",
             input_schema=schema(path=_PATH, content={"type": "string", "description": "Full new content"}),
             fn=guarded("write_file", write_file), context_param="ctx", before_call=gate("write")),
        Tool(name="list_directory",
             description="List a directory: one entry per line; directories end with '/', "
                         "symlinks with '@', files show their size.",
             input_schema=schema(path={"type": "string", "description": "Directory path ('.' for the "
                                                                       "working directory)"}),
             fn=guarded("list_directory", list_directory), context_param="ctx", read_only=True,
             before_call=gate("list")),
    ]
    if include_delete:
        tools.append(Tool(name="delete_file", description="Delete one file (not a directory).",
                          input_schema=schema(path=_PATH), fn=guarded("delete_file", delete_file),
                          context_param="ctx", before_call=gate("delete")))
    return tools
