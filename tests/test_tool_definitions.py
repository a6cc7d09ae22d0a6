"""What a new user meets defining and running tools: calling a tool as its function (at
run time and under mypy), the callbacks naming a call one way."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentkit import CancelToken, ScriptedModel, Tool, ToolCall, ToolContext, run_agent, tool

ROOT = Path(__file__).resolve().parents[1]


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool(name="shout", read_only=True)
def _shout(text: str, *, times: int = 1) -> str:
    """Shout ``text``."""
    return text.upper() * times


def test_a_tool_is_called_as_its_function_positionally_and_by_keyword():
    assert add(1) == 1
    assert add(1, 2) == 3
    assert add(1, b=2) == 3 and add(a=1, b=2) == 3
    assert _shout("hi", times=2) == "HIHI"


def test_a_tool_built_by_hand_is_called_with_the_same_arguments():
    by_hand = Tool(name="neg", description="Negate.", input_schema={"type": "object"}, fn=lambda x: -x)
    assert by_hand(3) == -3 and by_hand(x=3) == -3


def test_a_tool_that_takes_a_context_is_called_with_one():
    @tool
    def where(path: str, ctx: ToolContext) -> str:
        """Say who asks for ``path``."""
        return f"{ctx.tool_name}:{path}"

    ctx = ToolContext(tool_call_id="t1", tool_name="where", cancel=CancelToken())
    assert where("/a", ctx) == "where:/a" and where(path="/b", ctx=ctx) == "where:/b"


def _mypy(tmp_path, monkeypatch, code: str) -> tuple[str, int]:
    from mypy import api

    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(code))
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n")
    monkeypatch.setenv("MYPYPATH", str(ROOT))  # this checkout's agentkit, not an installed one
    out, err, status = api.run([
        "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(script),
    ])
    return out + err, status


def test_mypy_accepts_calling_a_tool_as_its_function_and_checks_the_arguments(tmp_path, monkeypatch):
    out, status = _mypy(tmp_path, monkeypatch, """
        from agentkit import tool

        @tool
        def add(a: int, b: int = 0) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b

        @tool(read_only=True)
        def shout(text: str) -> str:
            \"\"\"Shout.\"\"\"
            return text.upper()

        total: int = add(1) + add(1, 2) + add(a=1, b=2)
        loud: str = shout("a")
        wrong = add("one")
        lost: str = add(1)
    """)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    # exactly the two bad lines: a str for an int parameter, an int result used as a str
    assert len(errors) == 2, out
    assert ':16: error: Argument 1 to "__call__" of "FunctionTool" has incompatible type "str"; expected "int"' in out
    assert ":17: error: Incompatible types in assignment" in out, out


def test_the_start_and_finish_callbacks_name_a_call_the_same_way():
    seen = []
    result = run_agent(
        ScriptedModel([ToolCall("add", {"a": 1, "b": 2}, id="c1"), "3"]), "1 + 2?", tools=[add],
        on_tool_call_start=lambda call: seen.append(("start", call.tool_call_id, call.tool_name)),
        on_tool_call_finish=lambda record: seen.append(("finish", record.tool_call_id, record.tool_name)),
    )
    assert seen == [("start", "c1", "add"), ("finish", "c1", "add")]
    (record,) = result.tool_calls
    with pytest.warns(DeprecationWarning, match="ToolCallRecord.name is deprecated; use ToolCallRecord.tool_name"):
        assert record.name == "add"
    with pytest.warns(DeprecationWarning, match="use ToolCallRecord.tool_call_id"):
        assert record.id == "c1"
