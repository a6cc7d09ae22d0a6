"""shell_tools: structured vs raw commands, allowlists, permission, truncation, abort."""

from __future__ import annotations

import threading
import time

import pytest
from _procs import alive, escaping, kill_escaped, wait_for, within

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    shell_tools,
)
from agentkit.execution import LocalExecutionContext
from agentkit.messages import ToolCallPart, ToolOutput
from agentkit.tools.runner import run_tool_call


def call(tools, name: str, cancel: CancelToken | None = None, **args) -> ToolOutput:
    tool = {t.name: t for t in tools}[name]
    ctx = ToolContext(tool_call_id="call-1", tool_name=name, cancel=cancel or CancelToken())
    return run_tool_call(tool, ToolCallPart(tool_call_id="call-1", tool_name=name, input=args), ctx)


def names(tools):
    return [t.name for t in tools]


def test_which_tools_are_offered(tmp_path):
    with LocalExecutionContext(tmp_path) as c:
        assert names(shell_tools(c)) == ["run_command", "run_shell", "start_shell"]
        assert names(shell_tools(c, include_background=False)) == ["run_command", "run_shell"]
        # raw shell text cannot be allowlisted, so an allowlist drops run_command ...
        assert names(shell_tools(c, allowed_commands=["ls"])) == ["run_shell", "start_shell"]
        # ... unless the host opts in explicitly
        assert "run_command" in names(shell_tools(c, allowed_commands=["ls"], include_raw=True))
        with pytest.raises(ConfigurationError):
            shell_tools(c, allowed_commands="ls")
        with pytest.raises(ConfigurationError):
            shell_tools(c, allowed_commands=[])


def test_structured_command_with_metacharacters_is_one_argument(tmp_path):
    with LocalExecutionContext(tmp_path) as c:
        out = call(shell_tools(c), "run_shell", command="echo", args=["hi; touch pwned", "$(touch pwned2)"])
    assert not out.is_error
    assert "hi; touch pwned $(touch pwned2)" in out.value and "exit code 0" in out.value
    assert not list(tmp_path.glob("pwned*"))


def test_allowlist_is_enforced_on_the_executable(tmp_path):
    with LocalExecutionContext(tmp_path) as c:
        tools = shell_tools(c, allowed_commands=["echo"])
        out = call(tools, "run_shell", command="touch", args=["made"])
        assert out.is_error and "not allowed" in out.value and "echo" in out.value
        out = call(tools, "run_shell", command="/usr/bin/touch", args=["made"])
        assert out.is_error and "not allowed" in out.value
        out = call(tools, "start_shell", command="touch", args=["made"])
        assert out.is_error and "not allowed" in out.value
    assert not (tmp_path / "made").exists()


def test_nonzero_exit_and_timeout_are_error_results(tmp_path):
    with LocalExecutionContext(tmp_path, kill_grace=0.2) as c:
        out = call(shell_tools(c), "run_command", command="echo partial; echo bad >&2; exit 3")
        assert out.is_error and "exit code 3" in out.value and "partial" in out.value
        assert "[stderr]\nbad" in out.value
        # the timeout is a bound on the sleep, with room for a loaded machine to run the echo first
        out = call(shell_tools(c, timeout=3.0), "run_command", command="echo started; sleep 30")
        assert out.is_error and "timed out" in out.value and "started" in out.value


def test_long_output_keeps_the_end_and_always_the_command_and_status(tmp_path):
    with LocalExecutionContext(tmp_path) as c:
        out = call(shell_tools(c, max_lines=10), "run_command", command="seq 1 1000; exit 4")
        lines = out.value.splitlines()
        assert out.is_error and len(lines) <= 10
        assert lines[:2] == ["$ seq 1 1000; exit 4", "exit code 4"]  # never cut away
        assert lines[2].startswith("[output truncated: showing the last")
        assert lines[-1] == "1000" and "500" not in lines
        out = call(shell_tools(c, max_bytes=2000), "run_shell", command="seq", args=["1", "100000"])
        assert out.value.startswith("$ seq 1 100000\nexit code 0\n[output truncated")
        assert len(out.value.encode()) <= 2000 and out.value.endswith("\n100000")


def test_denied_permission_runs_nothing(tmp_path):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target, request.tool_call_id, dict(request.details)))
        return False

    with LocalExecutionContext(tmp_path, permission=permission) as c:
        out = call(shell_tools(c), "run_shell", command="touch", args=["x"])
        assert out.is_error and "permission denied" in out.value
        out = call(shell_tools(c), "start_shell", command="touch", args=["y"])
        assert out.is_error and "permission denied" in out.value
        assert c.jobs.list() == []
    assert asked[0] == ("exec", "touch", "call-1", {"args": ["x"]})
    assert asked[1][0] == "job-start"
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_cancel_during_a_command_raises_and_kills_it(tmp_path):
    token = CancelToken()
    with LocalExecutionContext(tmp_path, kill_grace=0.2) as c:
        tools = shell_tools(c)
        threading.Timer(0.5, token.cancel, args=("stop",)).start()
        started = time.monotonic()
        with pytest.raises(CancelledError):
            call(tools, "run_command", cancel=token, command="sleep 30")
    assert time.monotonic() - started < 20


def test_a_timeout_ends_run_command_whose_escaped_grandchild_keeps_printing(tmp_path):
    # the command exits at once; its grandchild leaves the group and prints every 0.2 s
    pidfile = tmp_path / "escaped.pid"
    token = CancelToken()
    threading.Timer(4.0, token.cancel, args=("late",)).start()
    with LocalExecutionContext(tmp_path, kill_grace=0.3) as c:
        tools = shell_tools(c, timeout=2.0)
        try:
            out = within(lambda: call(tools, "run_command", cancel=token, command=escaping(pidfile)))
            pid = int(pidfile.read_text())
            # our ends of its pipes are closed: its next write gets SIGPIPE
            wait_for(lambda: not alive(pid), 10.0, "the escaped writer to end on SIGPIPE")
        finally:
            kill_escaped(pidfile)
    assert out.is_error and "timed out" in out.value


def test_abort_current_generation_stops_a_foreground_command(tmp_path):
    gate = threading.Event()
    model = ScriptedModel([ToolCall("run_command", {"command": "touch started; sleep 30"}), "never"])
    with LocalExecutionContext(tmp_path, kill_grace=0.2) as c, Session(
        model, tools=shell_tools(c), execution_context=c
    ) as s:
        s.push_user_message("go")
        errors = []

        def gen():
            try:
                s.generate()
            except CancelledError as exc:
                errors.append(exc)
            finally:
                gate.set()

        t = threading.Thread(target=gen)
        t.start()
        wait_for((tmp_path / "started").exists, 20, "the command to start")
        assert s.abort_current_generation("user pressed stop")
        assert gate.wait(20)
        t.join(5)
    assert errors and "user pressed stop" in str(errors[0])
    assert any(e.type == "control" and e.action == "generation-aborted" for e in s.events)
