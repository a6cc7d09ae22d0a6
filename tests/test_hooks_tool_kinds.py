"""The four hooks on every tool kind: @tool, built-in, MCP (a real stdio server) and
LangChain (a real langchain_core tool)."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool as lc_tool
from mcp_servers.helpers import DEMO, stdio

from agentkit import Hooks, ScriptedModel, ToolCall, ToolDecision, filesystem_tools, run_agent, tool
from agentkit.execution import LocalExecutionContext
from agentkit.mcp import connect_mcp
from agentkit.messages import ToolOutput

RAN: list[str] = []


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    RAN.append("shout")
    return text.upper()


@lc_tool
def reverse(text: str) -> str:
    """Reverse a text."""
    RAN.append("reverse")
    return text[::-1]


@pytest.fixture(scope="module")
def mcp_tools():
    with connect_mcp({"demo": stdio(DEMO)}) as toolset:
        yield toolset.tools


@pytest.fixture
def kinds(tmp_path, mcp_tools):
    (tmp_path / "note.txt").write_text("hello")
    builtin = filesystem_tools(LocalExecutionContext(tmp_path))
    return {
        "shout": ([shout], {"text": "hello"}),
        "reverse": ([reverse], {"text": "hello"}),
        "read_file": (builtin, {"path": "note.txt"}),
        "echo": (mcp_tools, {"text": "hello"}),
    }


NAMES = ["shout", "reverse", "read_file", "echo"]


def run(tools, name, args, hooks):
    model = ScriptedModel([ToolCall(name, args), "done"])
    return run_agent(model, "go", tools=tools, hooks=hooks)


@pytest.mark.parametrize("name", NAMES)
def test_every_tool_kind_passes_before_and_after_hooks(kinds, name):
    tools, args = kinds[name]
    seen: list[tuple[str, str]] = []
    ended: list[object] = []
    hooks = Hooks(
        before_model_request=lambda r: seen.append(("request", str(len(r.tools)))) or None,
        before_tool_call=lambda call, ctx: seen.append(("before", call.tool_name)) or None,
        after_tool_call=lambda call, out, ctx: ToolOutput.text(f"[{call.tool_name}] {out.as_text()}"),
        on_generation_end=lambda result, error: ended.append(error),
    )
    result = run(tools, name, args, hooks)
    assert ("before", name) in seen and seen[0][0] == "request"
    record = result.tool_calls[0]
    assert not record.is_error and record.output.value.startswith(f"[{name}] ")
    assert record.output.value[len(name) + 3:] in ("HELLO", "olleh", "hello", "echo: hello")
    assert ended == [None]


@pytest.mark.parametrize("name", NAMES)
def test_every_tool_kind_can_be_blocked_and_answered_by_a_hook(kinds, name):
    tools, args = kinds[name]
    RAN.clear()
    blocked = run(tools, name, args, Hooks(before_tool_call=lambda c, x: ToolDecision.block("not now")))
    assert blocked.tool_calls[0].error == "tool call blocked: not now" and RAN == []
    answered = run(tools, name, args, Hooks(before_tool_call=lambda c, x: ToolDecision.respond("cached")))
    assert answered.tool_calls[0].output == ToolOutput.text("cached") and RAN == []


def test_mcp_authorize_tool_call_is_the_same_gate_after_the_hooks(tmp_path):
    order: list[str] = []

    def authorize(server, tool, arguments, call_id):
        order.append(f"authorize {server}/{tool}")
        return arguments.get("text") != "secret"

    with connect_mcp({"demo": stdio(DEMO)}, authorize_tool_call=authorize) as toolset:
        hooks = Hooks(before_tool_call=lambda c, x: order.append("hook") or None)
        ok = run(toolset.tools, "echo", {"text": "hi"}, hooks)
        denied = run(toolset.tools, "echo", {"text": "secret"}, hooks)
        rewritten = run(toolset.tools, "echo", {"text": "secret"},
                        Hooks(before_tool_call=lambda c, x: ToolDecision.rewrite({"text": "public"})))
    assert order[:2] == ["hook", "authorize demo/echo"]
    assert not ok.tool_calls[0].is_error
    assert "was denied" in denied.tool_calls[0].error
    # the authoriser sees the input the hooks settled on
    assert not rewritten.tool_calls[0].is_error and "public" in rewritten.tool_calls[0].output.as_text()


def test_the_execution_context_permission_handler_is_the_built_in_tools_gate_after_the_hooks(tmp_path):
    (tmp_path / "public.txt").write_text("public text")
    (tmp_path / "secret.txt").write_text("secret text")
    asked: list[tuple[str, str]] = []

    def permission(request):
        asked.append((request.operation, request.target))
        return request.target != "secret.txt"

    def hooks_redirect(call, ctx):
        if call.input.get("path") == "redirect-me.txt":
            return ToolDecision.rewrite({"path": "public.txt"})
        if call.input.get("path") == "never.txt":
            return ToolDecision.block("not this one")
        return None

    with LocalExecutionContext(tmp_path, permission=permission) as c:
        tools = filesystem_tools(c)
        hooks = Hooks(before_tool_call=hooks_redirect)
        rewritten = run(tools, "read_file", {"path": "redirect-me.txt"}, hooks)
        denied = run(tools, "read_file", {"path": "secret.txt"}, hooks)
        blocked = run(tools, "read_file", {"path": "never.txt"}, hooks)
    assert rewritten.tool_calls[0].output.value == "public text"
    assert "permission denied" in denied.tool_calls[0].error and "tool call blocked" in denied.tool_calls[0].error
    assert "not this one" in blocked.tool_calls[0].error
    # the handler saw the rewritten input, and never the call a hook had already blocked
    assert asked == [("read", "public.txt"), ("read", "secret.txt")]
