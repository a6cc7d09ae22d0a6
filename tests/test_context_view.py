"""View-only shaping: context builders, tool-result clearing, tool-output caps."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool as lc_tool
from mcp_servers.helpers import stdio

from agentkit import ConfigurationError, FunctionModel, Session, ToolCall, ToolResultClearing, filesystem_tools, tool
from agentkit.context import build_model_messages
from agentkit.events import ToolResultEvent
from agentkit.execution import LocalExecutionContext
from agentkit.mcp import connect_mcp
from agentkit.messages import Message, TextPart, ToolResultPart

DEMO = "tests/mcp_servers/demo_server.py"


def results_seen(request) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.content if isinstance(p, ToolResultPart)]


@tool
def big(n: int) -> str:
    """Return n characters."""
    return "x" * n


def test_clear_tool_results_replaces_older_large_results_in_the_view_only():
    def reply(request):
        done = len(results_seen(request))
        if done < 4:
            return ToolCall(name="big", input={"n": [500, 10, 600, 700][done]}, id=f"c{done}")
        return "done"

    model = FunctionModel(reply)
    with Session(model, tools=[big], clear_tool_results=ToolResultClearing(keep_last=1, min_chars=100)) as s:
        s.push_user_message("go")
        s.generate()
        last = results_seen(model.requests[-1])
        texts = [p.output.as_text() for p in last]
        assert texts[0].startswith("[tool result cleared") and "big call c0" in texts[0] and "500" in texts[0]
        assert texts[1] == "x" * 10  # small: kept
        assert texts[2].startswith("[tool result cleared") and "c2" in texts[2]
        assert texts[3] == "x" * 700  # the last one: kept
        stored = [e.output.as_text() for e in s.events if isinstance(e, ToolResultEvent)]
        assert [len(t) for t in stored] == [500, 10, 600, 700]  # the events are untouched


def test_max_tool_output_chars_caps_every_tool_kind_and_the_event_keeps_everything(tmp_path):
    (tmp_path / "big.txt").write_text("line\n" * 400)
    ctx = LocalExecutionContext(tmp_path)

    @lc_tool
    def lc_big(n: int) -> str:
        """Return n characters (LangChain)."""
        return "y" * n

    calls = [
        ToolCall(name="big", input={"n": 3000}, id="a"),
        ToolCall(name="read_file", input={"path": "big.txt"}, id="b"),
        ToolCall(name="lc_big", input={"n": 3000}, id="c"),
        ToolCall(name="echo", input={"text": "z" * 3000}, id="d"),
    ]
    model = FunctionModel(lambda r: "done" if results_seen(r) else calls)
    with connect_mcp({"demo": stdio(DEMO)}) as mcp:
        tools = [big, *filesystem_tools(ctx), lc_big, *mcp.tools]
        with Session(model, tools=tools, execution_context=ctx, max_tool_output_chars=200) as s:
            s.push_user_message("go")
            s.generate()
            seen = {p.tool_call_id: p.output.as_text() for p in results_seen(model.requests[-1])}
            assert set(seen) == {"a", "b", "c", "d"}
            for cid, text in seen.items():
                body, _, notice = text.rpartition("\n")
                assert len(body) <= 200 and notice.startswith("[output truncated"), (cid, text[-120:])
            stored = {e.tool_call_id: e.output.as_text() for e in s.events if isinstance(e, ToolResultEvent)}
            assert all(len(t) >= 2000 for t in stored.values())


def test_context_builder_replaces_the_projection_and_can_wrap_the_default():
    seen_events = []

    def builder(events):
        seen_events.append(len(events))
        messages = build_model_messages(events)
        return [Message.user("remember: be brief"), Message.assistant("ok"), *messages]

    model = FunctionModel(lambda r: "answer")
    with Session(model, context_builder=builder) as s:
        s.push_user_message("hi")
        s.generate()
        sent = model.requests[0].messages
        assert [p.text for m in sent for p in m.content if isinstance(p, TextPart)] == [
            "remember: be brief", "ok", "hi"
        ]
        assert seen_events == [1]
        assert len(s.events) == 2  # the events never change
        s.push_user_message("again")  # something new to answer, so the builder is asked
        with pytest.raises(ConfigurationError, match="context_builder must return a list of Message"):
            s.generate(context_builder=lambda events: "nope")
        with pytest.raises(ConfigurationError, match="context_builder result"):
            s.generate(context_builder=lambda events: [Message.assistant("first")])


def test_bad_view_options_are_refused():
    with pytest.raises(ConfigurationError, match="max_tool_output_chars"):
        Session(FunctionModel(lambda r: "x"), max_tool_output_chars=0)
    with pytest.raises(ConfigurationError, match="ToolResultClearing keep_last"):
        ToolResultClearing(keep_last=-1)
