"""Built-in command tools: run_command (raw shell), run_shell (structured) and
start_shell (structured, in the background).

``run_shell`` and ``start_shell`` run an executable with a list of literal arguments and
no shell: ``"; rm -rf /"`` as an argument is one argument, never a second command, and
``allowed_commands`` is enforced on the executable. ``run_command`` hands its text to
``bash -lc``: it is **not** a security boundary (any allowlist could be bypassed with
``;``, ``$(...)`` or pipes), so it is only offered when no allowlist is set, unless the
host opts in with ``include_raw=True`` and confines it by other means (a container, a
permission handler).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..context._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_output
from ..errors import CancelledError, ConfigurationError
from ..execution.base import ShellResult
from ..messages import ToolOutput
from ._common import check_limits, guarded, permission_gate, require
from .base import Tool, ToolContext

_MAX_SHOWN_COMMAND = 500
"""Characters of the command line repeated in a result."""


def format_shell_result(result: ShellResult, max_lines: int = DEFAULT_MAX_LINES,
                        max_bytes: int = DEFAULT_MAX_BYTES) -> ToolOutput:
    """The model-visible result of a command: the command, its exit status, then stdout
    and stderr truncated (keeping the end). The command and status are always shown.
    Anything but a clean exit 0 is an error result."""
    if result.timed_out:
        status = "timed out: the process group was terminated"
    elif result.cancelled:
        status = "cancelled: the process group was terminated"
    elif result.output_limited:
        status = "output exceeded the output cap: the process group was terminated"
    else:
        status = f"exit code {result.exit_code}"
    command = " ".join(result.command.splitlines())
    if len(command) > _MAX_SHOWN_COMMAND:
        command = command[: _MAX_SHOWN_COMMAND - 3] + "..."
    header = f"$ {command}\n{status}"
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    text = header
    if parts:
        # the body gets what the header and the truncation notice leave of the limits
        body = truncate_output("\n".join(parts), max(1, max_lines - 3),
                               max(1, max_bytes - len(header.encode("utf-8")) - 120), keep="tail")
        text = f"{header}\n{body.notice}\n{body.content}" if body.truncated else f"{header}\n{body.content}"
    return ToolOutput.text(text) if result.ok else ToolOutput.error(text)


def _allowed_set(allowed_commands: Iterable[str] | None) -> frozenset[str] | None:
    """``allowed_commands`` checked, as a set (None: any command)."""
    if allowed_commands is None:
        return None
    if isinstance(allowed_commands, str):
        raise ConfigurationError("allowed_commands must be a list of executable names, not one string")
    allowed = frozenset(allowed_commands)
    if not allowed or not all(isinstance(c, str) and c for c in allowed):
        raise ConfigurationError("allowed_commands must be a non-empty list of executable names")
    return allowed


def _structured_schema() -> dict[str, Any]:
    """The input schema of ``run_shell`` and ``start_shell`` (a fresh dict each time)."""
    return {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The executable to run, e.g. 'ls'"},
            "args": {"type": "array", "items": {"type": "string"},
                     "description": "Arguments, each passed literally (no shell parsing)"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }


def shell_tools(
    context: Any,
    allowed_commands: Iterable[str] | None = None,
    include_background: bool = True,
    *,
    include_raw: bool | None = None,
    timeout: float | None = 120.0,
    cwd: str | None = None,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Tool]:
    """Command tools bound to ``context``.

    * ``run_command {command}``: raw shell text (``bash -lc``); included when
      ``allowed_commands`` is None, or when ``include_raw=True``.
    * ``run_shell {command, args}``: the executable ``command`` with literal ``args``;
      with ``allowed_commands``, only those exact executables may run.
    * ``start_shell {command, args}``: like run_shell but in the background; returns
      ``{"execution_id": ..., "state": "running"}`` at once (needs ``context.jobs``;
      omitted with ``include_background=False``).

    Foreground commands stop after ``timeout`` seconds or when the generation is
    aborted; their process group is terminated either way.
    """
    shell = require(context, "shell", "shell_tools")
    check_limits(max_lines, max_bytes)
    if timeout is not None and timeout <= 0:
        raise ConfigurationError("timeout must be positive (or None for no limit)")
    allowed = _allowed_set(allowed_commands)
    raw = allowed is None if include_raw is None else include_raw
    jobs = getattr(context, "jobs", None)

    def check_allowed(command: str) -> None:
        if allowed is not None and command not in allowed:
            raise ConfigurationError(
                f"command {command!r} is not allowed; allowed commands: {', '.join(sorted(allowed))}"
            )

    def finish(result: ShellResult, ctx: ToolContext) -> ToolOutput:
        if result.cancelled and ctx.cancel.cancelled:
            raise CancelledError(ctx.cancel.reason)
        return format_shell_result(result, max_lines, max_bytes)

    def run_command(command: str, ctx: ToolContext) -> ToolOutput:
        return finish(shell.run(command, cwd=cwd, timeout=timeout, cancel=ctx.cancel,
                                tool_call_id=ctx.tool_call_id), ctx)

    def run_shell(command: str, ctx: ToolContext, args: list[str] | None = None) -> ToolOutput:
        args = list(args or [])
        check_allowed(command)
        return finish(shell.run_structured(command, args, cwd=cwd, timeout=timeout, cancel=ctx.cancel,
                                           tool_call_id=ctx.tool_call_id), ctx)

    def allowed_input(data: dict[str, Any]) -> None:
        check_allowed(data["command"])

    def structured_request(operation: str) -> Any:
        return lambda d: (operation, d["command"], {"args": list(d.get("args") or [])})

    structured = _structured_schema()
    allow_note = "" if allowed is None else f" Allowed commands: {', '.join(sorted(allowed))}."
    tools: list[Tool] = []
    if raw:
        tools.append(Tool(
            name="run_command",
            description="Run a bash command line (pipes, redirects and ';' work) and return its "
                        "exit code and output.",
            input_schema={"type": "object",
                          "properties": {"command": {"type": "string", "description": "bash command line"}},
                          "required": ["command"], "additionalProperties": False},
            fn=guarded("run_command", run_command), context_param="ctx",
            before_call=permission_gate(context, "run_command", lambda d: ("shell", d["command"], {}))))
    tools.append(Tool(
        name="run_shell",
        description="Run an executable with literal arguments (no shell) and return its exit code "
                    "and output." + allow_note,
        input_schema=structured, fn=guarded("run_shell", run_shell), context_param="ctx",
        before_call=permission_gate(context, "run_shell", structured_request("exec"), allowed_input)))
    if include_background and jobs is not None:
        def start_shell(command: str, ctx: ToolContext, args: list[str] | None = None) -> dict[str, Any]:
            args = list(args or [])
            check_allowed(command)
            state = jobs.start(command, args, cwd=cwd, tool_call_id=ctx.tool_call_id)
            return {"execution_id": state.execution_id, "state": state.state, "command": state.command}

        tools.append(Tool(
            name="start_shell",
            description="Start an executable with literal arguments in the background and return "
                        "its execution_id at once. Its completion arrives later as a runtime event."
                        + allow_note,
            input_schema=structured, fn=guarded("start_shell", start_shell), context_param="ctx",
            before_call=permission_gate(context, "start_shell", structured_request("job-start"), allowed_input)))
    return tools
