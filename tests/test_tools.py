"""Tools: @tool schemas, validation, the registry, and the call runner."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable
from typing import Literal, Optional

import pydantic
import pytest

from agentkit import CancelToken, Tool, ToolContext, ToolDefinitionError, tool
from agentkit.messages import ImagePart, TextPart, ToolCallPart, ToolOutput
from agentkit.tools import ToolRegistry
from agentkit.tools.runner import run_tool_call


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Box(pydantic.BaseModel):
    label: str
    corners: list[Point]


@tool
def plot(
    mode: Literal["line", "scatter"],
    points: list[Point],
    box: Optional[Box] = None,
    title: str = "untitled",
    scale: float = 1.0,
) -> dict:
    """Plot points.

    A longer paragraph that stays in the description.

    Args:
        mode: How to draw the points.
        points: The points to draw,
            in order.
        box: An optional bounding box.
        title (str): The chart title.

    Returns:
        A summary.
    """
    return {
        "mode": mode,
        "n": len(points),
        "first": dataclasses.asdict(points[0]) if points else None,
        "box": None if box is None else [box.label, type(box.corners[0]).__name__],
        "title": title,
        "scale": scale,
    }


def call(t: Tool | None, input, *, cid="c1", token=None, available=()):
    part = ToolCallPart(tool_call_id=cid, tool_name=getattr(t, "name", "missing"), input=input)
    ctx = ToolContext(tool_call_id=cid, tool_name=part.tool_name, cancel=token or CancelToken())
    return run_tool_call(t, part, ctx, available)


def test_schema_from_type_hints_and_docstring():
    s = plot.input_schema
    assert s["type"] == "object"
    assert plot.description.startswith("Plot points.") and "longer paragraph" in plot.description
    assert "Returns" not in plot.description
    props = s["properties"]
    assert props["mode"]["enum"] == ["line", "scatter"]
    assert props["mode"]["description"] == "How to draw the points."
    assert props["points"]["description"] == "The points to draw, in order."
    assert props["title"]["default"] == "untitled" and props["title"]["description"] == "The chart title."
    assert props["points"]["type"] == "array"
    assert set(s["required"]) == {"mode", "points"}
    assert "Point" in s["$defs"] and "Box" in s["$defs"]
    assert s["additionalProperties"] is False
    assert "title" not in s["$defs"]["Point"]  # pydantic titles are stripped


def test_nested_dataclasses_and_models_are_built_before_the_call():
    out = call(plot, {"mode": "line", "points": [{"x": 1}], "box": {"label": "b", "corners": [{"x": 0, "y": 0}]}})
    assert out == ToolOutput(
        kind="json",
        value={"mode": "line", "n": 1, "first": {"x": 1, "y": 0}, "box": ["b", "Point"], "title": "untitled",
               "scale": 1.0},
    )


def test_invalid_input_names_path_and_rule():
    out = call(plot, {"mode": "pie", "points": [{"x": "one"}], "extra": 1})
    assert out.is_error
    assert "$.mode" in out.value and "(rule: enum)" in out.value
    assert "$.points[0].x" in out.value and "(rule: type)" in out.value
    assert "(rule: additionalProperties)" in out.value
    missing = call(plot, {"mode": "line"})
    assert "'points' is a required property" in missing.value and "(rule: required)" in missing.value


def test_tool_context_is_injected_and_not_in_schema():
    seen = {}

    @tool
    def slow(n: int, ctx: ToolContext) -> str:
        """Report progress."""
        seen["id"] = ctx.tool_call_id
        ctx.report_progress({"done": n})
        return "ok"

    assert list(slow.input_schema["properties"]) == ["n"]
    updates = []
    part = ToolCallPart(tool_call_id="abc", tool_name="slow", input={"n": 2})
    ctx = ToolContext(tool_call_id="abc", tool_name="slow", cancel=CancelToken())._bind_runtime(progress=updates.append)
    assert run_tool_call(slow, part, ctx).value == "ok"
    assert seen["id"] == "abc" and updates == [{"done": 2}]


def test_return_values_become_outputs():
    @tool
    def many(kind: str):
        """Return different shapes."""
        return {
            "text": "plain",
            "json": [1, 2],
            "none": None,
            "parts": [TextPart(text="see"), ImagePart(data=b"img")],
            "output": ToolOutput.error("custom failure"),
            "model": Point(x=1),
        }[kind]

    assert call(many, {"kind": "text"}) == ToolOutput.text("plain")
    assert call(many, {"kind": "json"}) == ToolOutput(kind="json", value=[1, 2])
    assert call(many, {"kind": "none"}) == ToolOutput(kind="json", value=None)
    assert call(many, {"kind": "parts"}).kind == "content"
    assert call(many, {"kind": "output"}).is_error
    assert call(many, {"kind": "model"}) == ToolOutput(kind="json", value={"x": 1, "y": 0})  # a dataclass


def test_exceptions_unknown_tools_and_bad_json_become_error_results():
    @tool
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    out = call(boom, {})
    assert out.is_error and "RuntimeError: disk on fire" in out.value
    unknown = call(None, {}, available=("boom", "plot"))
    assert unknown.is_error and "unknown tool 'missing'" in unknown.value and "boom, plot" in unknown.value
    bad = run_tool_call(
        boom,
        ToolCallPart(tool_call_id="x", tool_name="boom", input="{not json", input_error="Expecting value"),
        ToolContext(tool_call_id="x", tool_name="boom", cancel=CancelToken()),
    )
    assert bad.is_error and "could not be parsed: Expecting value" in bad.value


def test_timeout_returns_an_error_and_cancels_the_call_token():
    release = threading.Event()
    observed = {}

    @tool(timeout=0.2)
    def hang(ctx: ToolContext) -> str:
        """Hang until told to stop."""
        observed["cancelled"] = ctx.cancel.wait(30)
        release.set()
        return "late"

    start = time.monotonic()
    token = CancelToken()
    out = call(hang, {}, token=token)
    assert out.is_error and "timed out after 0.2s" in out.value
    assert time.monotonic() - start < 10
    assert release.wait(10) and observed["cancelled"] is True
    assert not token.cancelled  # only the call's own child token was cancelled


def test_registry_rejects_duplicates_and_bad_definitions():
    @tool
    def a() -> str:
        """A."""
        return "a"

    reg = ToolRegistry([a])
    with pytest.raises(ToolDefinitionError, match="two tools are named 'a'"):
        reg.add(a)
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool(name="has space", description="", input_schema={"type": "object"}, fn=lambda: 1)
    with pytest.raises(ToolDefinitionError, match='"type": "object"'):
        Tool(name="x", description="", input_schema={"type": "string"}, fn=lambda: 1)
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        Tool(name="x", description="", input_schema={"type": "object", "properties": 3}, fn=lambda: 1)
    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @tool
        def bad(*args: int) -> None:
            """Bad."""

    with pytest.raises(ToolDefinitionError, match="cannot use"):
        ToolRegistry([42])


class _Connection:
    """Not JSON: a live object a tool cannot receive from a model."""


def test_an_unsupported_parameter_type_names_the_tool_and_the_parameter_without_pydantic_advice():
    def query(sql: str, conn: _Connection) -> str:
        return sql

    with pytest.raises(ToolDefinitionError) as err:
        tool(query)
    message = str(err.value)
    assert message.startswith("tool 'query': cannot describe parameter 'conn' of type _Connection")
    assert "there is no JSON Schema for _Connection" in message and "closure" in message
    assert "arbitrary_types_allowed" not in message and "__get_pydantic_core_schema__" not in message

    def nested(batch: list[_Connection]) -> None: ...

    with pytest.raises(ToolDefinitionError, match="tool 'renamed': cannot describe parameter 'batch' of type"):
        tool(name="renamed")(nested)

    def callback(on_done: Callable[[int], None]) -> None: ...

    with pytest.raises(ToolDefinitionError) as err:
        tool(callback)
    assert "parameter 'on_done'" in str(err.value) and "a callable has no JSON Schema" in str(err.value)
    assert "errors.pydantic.dev" not in str(err.value)


def test_star_args_and_positional_only_errors_name_the_tool():
    def varargs(*args: int) -> None: ...

    def kwargs(a: int, **rest: int) -> None: ...

    def positional(a: int, /) -> None: ...

    with pytest.raises(ToolDefinitionError) as err:
        tool(varargs)
    assert str(err.value).startswith("tool 'varargs': parameter *args cannot be described")
    assert "<locals>" not in str(err.value)
    with pytest.raises(ToolDefinitionError, match=r"tool 'kwargs': parameter \*\*rest"):
        tool(kwargs)
    with pytest.raises(ToolDefinitionError, match="tool 'named': positional-only parameter 'a'"):
        tool(name="named")(positional)


def test_string_annotations_may_name_things_local_to_the_defining_function():
    # this module uses `from __future__ import annotations`: every annotation is a string
    from typing import Literal as LocalLiteral

    Unit = LocalLiteral["celsius", "fahrenheit"]

    @dataclasses.dataclass
    class Place:
        city: str

    @tool
    def weather(where: Place, unit: Unit = "celsius", detail: LocalLiteral["short", "long"] = "short") -> Report:  # noqa: F821
        """Weather (the return annotation names nothing and is not needed)."""
        return f"{where.city} {unit} {detail}"

    props = weather.input_schema["properties"]
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"] and props["detail"]["enum"] == ["short", "long"]
    assert call(weather, {"where": {"city": "Oslo"}, "unit": "fahrenheit"}).value == "Oslo fahrenheit short"

    @tool(name="with_options", read_only=True)
    def with_options(unit: Unit) -> str:
        """Echo the unit."""
        return unit

    assert with_options.input_schema["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]

    def unresolved(unit: Nowhere) -> str:  # noqa: F821
        return unit

    with pytest.raises(ToolDefinitionError) as err:
        tool(unresolved)
    assert str(err.value).startswith("tool 'unresolved': cannot resolve the type hint 'Nowhere' of parameter 'unit'")
    assert "name 'Nowhere' is not defined" in str(err.value)


def test_plain_functions_are_wrapped_and_tool_options_apply():
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    reg = ToolRegistry([shout])
    assert reg["shout"].description == "Upper-case the text."
    assert call(reg["shout"], {"text": "hi"}).value == "HI"

    @tool(name="renamed", description="custom", read_only=True)
    def orig(x: int = 1) -> int:
        """Ignored."""
        return x

    assert (orig.name, orig.description, orig.read_only) == ("renamed", "custom", True)
    assert orig.spec.name == "renamed" and orig() == 1


def test_parameters_named_like_pydantic_attributes_work_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic warns when a field shadows BaseModel

        @tool
        def pick(model_name: str, schema: Optional[str] = None, json: list[int] = [], _hidden: int = 1) -> str:  # noqa: B006
            """Pick one.

            Args:
                schema: Which schema.
            """
            return f"{model_name}|{schema}|{json}|{_hidden}"

    props = pick.input_schema["properties"]
    assert list(props) == ["model_name", "schema", "json", "_hidden"]
    assert props["schema"]["description"] == "Which schema." and pick.input_schema["required"] == ["model_name"]
    out = call(pick, {"model_name": "m", "schema": "s", "json": [1, 2], "_hidden": 3})
    assert out == ToolOutput.text("m|s|[1, 2]|3")


def test_an_output_that_cannot_be_recorded_becomes_an_error_result_not_a_broken_session(tmp_path):
    from agentkit import FileEventStore, ScriptedModel, Session, ToolCall

    @tool
    def bad(kind: str):
        """Return a broken output."""
        return {
            "metadata": ToolOutput(kind="json", value={"x": 1}, metadata={"artifact": object()}),
            "value": ToolOutput(kind="json", value={"when": object()}),
            "text": ToolOutput(kind="text", value=42),
            "kind": ToolOutput(kind="bogus", value="x"),  # type: ignore[arg-type]
        }[kind]

    for kind in ("metadata", "value", "text", "kind"):
        out = call(bad, {"kind": kind})
        assert out.is_error and "cannot be recorded" in out.value, kind
    model = ScriptedModel([ToolCall("bad", {"kind": "metadata"}), "recovered", "still fine"])
    with Session.open("s", store=FileEventStore(tmp_path), model=model, tools=[bad]) as s:
        s.push_user_message("go")
        assert s.generate().text == "recovered"  # the durable session did not fail
        s.push_user_message("more")
        assert s.generate().text == "still fine"


def test_json_results_are_recorded_in_their_plain_json_form_or_refused():
    @tool
    def shapes(kind: str):
        """Return a value that JSON would change, or cannot hold."""
        deep: list = []
        for _ in range(600):
            deep = [deep]
        return {
            "tuples": {"point": (1, 2), 3: "three"},
            "built": ToolOutput(kind="json", value=[(1, 2)], metadata={"k": (True,)}),
            "nan": {"x": float("nan")},
            "deep": {"d": deep},
        }[kind]

    assert call(shapes, {"kind": "tuples"}).value == {"point": [1, 2], "3": "three"}
    built = call(shapes, {"kind": "built"})
    assert (built.kind, built.value, built.metadata) == ("json", [[1, 2]], {"k": [True]})
    for kind, why in (("nan", ": Out of range float"), ("deep", r": \$\.d\[0\].* is nested deeper than 500 levels")):
        out = call(shapes, {"kind": kind})
        assert out.is_error and re.search(f"tool 'shapes' returned an output that cannot be recorded{why}", out.value)


def test_on_session_hook_hears_each_session_once_and_a_failing_one_is_only_logged(caplog):
    from agentkit import ScriptedModel, Session

    seen: list[object] = []

    def hook(session: object) -> None:
        seen.append(session)

    def broken(session: object) -> None:
        raise RuntimeError("cannot bind")

    def fn() -> str:
        return "x"

    schema = {"type": "object", "properties": {}}
    shared = [Tool(name=n, description="t", input_schema=schema, fn=fn, on_session=hook) for n in ("a", "b")]
    bad = Tool(name="c", description="t", input_schema=schema, fn=fn, on_session=broken)
    with caplog.at_level("WARNING", logger="agentkit"):
        session = Session(ScriptedModel(["ok"]), tools=[*shared, bad])
    assert seen == [session]  # one hook shared by two tools is told once
    assert "tool 'c' could not bind to the session" in caplog.text
    session.push_user_message("hi")
    assert session.generate().text == "ok"  # the session works all the same
    session.close()
