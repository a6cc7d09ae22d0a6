"""What a new user meets defining and running tools: calling a tool as its function (at
run time and under mypy), the callbacks naming a call one way, strict or lax input, a
missing docstring, a return value that is neither text nor JSON."""

from __future__ import annotations

import dataclasses
import logging
import warnings

import pydantic
import pytest

from agentkit import CancelToken, ScriptedModel, Tool, ToolCall, ToolContext, ToolDefinitionError, run_agent, tool
from agentkit.messages import ToolOutput


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


# -- strict or lax input ---------------------------------------------------------------


class Item(pydantic.BaseModel):
    name: str
    qty: int


def _outputs(tools, *inputs):
    calls = [ToolCall(name, args) for name, args in inputs]
    return [c.output for c in run_agent(ScriptedModel([calls, "ok"]), "go", tools=tools).tool_calls]


def test_a_strict_tool_refuses_a_string_for_an_int_and_a_lax_one_converts_it():
    @tool
    def order(item: Item, n: int = 1) -> str:
        """Order ``n`` times."""
        return f"{item.qty * n} x {item.name}"

    @tool(name="order_lax", strict=False)
    def order_lax(item: Item, n: int = 1) -> str:
        """Order ``n`` times (lax)."""
        return f"{item.qty * n} x {item.name}"

    slip = {"item": {"name": "tea", "qty": "3"}, "n": "2"}
    strict, lax, bad = _outputs([order, order_lax], ("order", slip), ("order_lax", slip),
                                ("order_lax", {"item": {"name": "tea", "qty": "three"}, "extra": 1}))
    assert order.strict and not order_lax.strict
    assert strict.is_error and "$.item.qty: '3' is not of type 'integer' (rule: type)" in strict.as_text()
    assert lax == ToolOutput.text("6 x tea")
    text = bad.as_text()
    assert bad.is_error and text.startswith("invalid input for tool 'order_lax': ")
    assert "$.item.qty: Input should be a valid integer" in text and "(rule: int_parsing)" in text
    assert "$.extra: Extra inputs are not permitted" in text


def test_a_lax_tool_of_plain_parameters_converts_too():
    @tool(strict=False)
    def repeat(text: str, times: int) -> str:
        """Repeat ``text``."""
        return text * times

    (out,) = _outputs([repeat], ("repeat", {"text": "ab", "times": "2"}))
    assert out == ToolOutput.text("abab")


def test_a_hand_built_lax_tool_needs_something_to_check_its_input():
    with pytest.raises(ToolDefinitionError, match="strict=False needs prepare_input"):
        Tool(name="t", description="d", input_schema={"type": "object"}, fn=lambda: "x", strict=False)


# -- a tool without a description --------------------------------------------------------


def test_a_tool_without_a_docstring_warns_where_it_is_defined():
    def bare(x: int) -> int:
        return x

    with pytest.warns(UserWarning, match="tool 'bare' has no description") as caught:
        tool(bare)
    (warning,) = caught
    assert warning.filename == __file__  # the user's line, not agentkit's
    assert "docstring" in str(warning.message) and "@tool(description=...)" in str(warning.message)
    with pytest.warns(UserWarning, match="tool 'renamed' has no description"):
        tool(name="renamed")(bare)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool(description="Return x.")(bare)  # a description given: no warning
        tool(add.fn)  # a docstring: no warning


# -- what a tool returns ---------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Path2:
    points: list[Point]


class Conn:
    """A connection: nothing a model could read."""


def test_dataclasses_are_sent_as_json_and_other_objects_are_refused_with_a_warning(caplog):
    @tool
    def shapes(kind: str) -> object:
        """Return a shape."""
        return {"point": Point(1), "path": Path2([Point(1), Point(2, 3)]), "item": Item(name="a", qty=1),
                "conn": Conn()}[kind]

    with caplog.at_level(logging.WARNING, logger="agentkit.tools"):
        kinds = [("shapes", {"kind": k}) for k in ("point", "path", "item", "conn")]
        point, path, item, conn = _outputs([shapes], *kinds)
    assert point == ToolOutput(kind="json", value={"x": 1, "y": 0})
    assert path.value == {"points": [{"x": 1, "y": 0}, {"x": 2, "y": 3}]}
    assert item.value == {"name": "a", "qty": 1}
    text = conn.as_text()
    assert conn.is_error and text.startswith("tool 'shapes' returned a Conn object, which cannot be sent")
    assert "0x" not in text and "a str, a JSON value, a dataclass or pydantic model" in text
    (record,) = [r for r in caplog.records if r.name == "agentkit.tools"]
    assert record.levelno == logging.WARNING and record.getMessage() == text
