"""LangChain tools inside agentkit (and agentkit tools inside LangChain), with real
LangChain tool objects and a real toolkit from langchain-community."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings
from typing import Annotated

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import (
    BaseTool,
    InjectedToolArg,
    InjectedToolCallId,
    StructuredTool,
    Tool,
    ToolException,
    tool,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

import agentkit
from agentkit import (
    CancelToken,
    MissingDependencyError,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    run_agent,
)
from agentkit.adapters.langchain import from_langchain_tool, from_langchain_tools, to_langchain_tool
from agentkit.events import ToolResultEvent, event_from_dict
from agentkit.messages import ToolOutput


def _shown(lc_tool: BaseTool) -> dict:
    """What LangChain would show a model for this tool."""
    return convert_to_openai_tool(lc_tool)["function"]


def _ctx(call_id: str = "call-1", name: str = "t") -> ToolContext:
    return ToolContext(tool_call_id=call_id, tool_name=name, cancel=CancelToken())


def _call(adapted: agentkit.Tool, call_id: str = "call-1", **args):
    return adapted.fn(**args, **{adapted.context_param: _ctx(call_id, adapted.name)})


# -- LangChain's tool styles ------------------------------------------------------------


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: first factor
        b: second factor
    """
    return a * b


class _WeatherInput(BaseModel):
    city: str = Field(description="the city")
    unit: str = Field(default="C", description="C or F")


def _weather(city: str, unit: str = "C") -> str:
    return f"{city}: 21{unit}"


weather = StructuredTool.from_function(
    _weather, name="weather", description="Current weather for a city.", args_schema=_WeatherInput
)


class _LookupInput(BaseModel):
    key: str = Field(description="the key to look up")


class LookupTool(BaseTool):
    """A BaseTool subclass with an args_schema."""

    name: str = "lookup"
    description: str = "Look a key up in a fixed table."
    args_schema: type[BaseModel] = _LookupInput
    table: dict = {"a": "alpha"}

    def _run(self, key: str, run_manager=None) -> str:
        if key not in self.table:
            raise ToolException(f"no entry for {key!r}")
        return self.table[key]


shout = Tool(name="shout", func=lambda text: text.upper() + "!", description="Shout the input.")


@pytest.mark.parametrize("lc_tool", [multiply, weather, LookupTool(), shout], ids=lambda t: t.name)
def test_adapted_tool_shows_the_model_what_langchain_would(lc_tool):
    adapted = from_langchain_tool(lc_tool)
    shown = _shown(lc_tool)
    assert adapted.name == shown["name"] == lc_tool.name
    assert adapted.description == shown["description"]
    assert dict(adapted.input_schema) == shown["parameters"]


def test_decorator_tool_runs_and_validates():
    adapted = from_langchain_tool(multiply)
    # the model reads exactly the ToolMessage content LangChain would produce
    lc_message = multiply.invoke({"name": "multiply", "args": {"a": 6, "b": 7}, "id": "c", "type": "tool_call"})
    assert _call(adapted, a=6, b=7).value == lc_message.content == "42"
    result = run_agent(
        ScriptedModel([ToolCall("multiply", {"a": 6, "b": 7}), ToolCall("multiply", {"a": "six", "b": 7}), "42"]),
        "6*7?",
        tools=[multiply],
    )
    ok, bad = result.tool_calls
    assert ok.output == ToolOutput.text("42")
    # LangChain's pydantic validation rejects it; the model reads why, the loop goes on
    assert bad.is_error and bad.error.startswith("invalid input for tool 'multiply'")
    assert "valid integer" in bad.error
    assert result.text == "42"


class _Reading(BaseModel):
    celsius: float


@tool
def sensor(raw: str) -> str:
    """Parse a sensor reading."""
    return str(_Reading.model_validate_json(raw).celsius)


def test_a_validation_error_inside_the_tool_is_a_tool_failure_not_bad_input():
    result = run_agent(ScriptedModel([ToolCall("sensor", {"raw": '{"celsius": "hot"}'}), "ok"]), "go",
                       tools=[sensor])
    error = result.tool_calls[0].error
    assert error.startswith("tool 'sensor' failed: ValidationError: 1 validation error for _Reading")


def test_input_is_validated_as_langchain_validates_it():
    # pydantic's lax mode, as in LangChain: a numeric string is an int (JSON Schema says no)
    lc_message = multiply.invoke({"name": "multiply", "args": {"a": "6", "b": 7}, "id": "c", "type": "tool_call"})
    result = run_agent(ScriptedModel([ToolCall("multiply", {"a": "6", "b": 7}), "ok"]), "go", tools=[multiply])
    assert result.tool_calls[0].output == ToolOutput.text(lc_message.content) == ToolOutput.text("42")
    # a tool without a pydantic schema is checked against its JSON Schema by agentkit
    assert from_langchain_tool(shout).validation_error({"__arg1": 5}) is not None
    assert from_langchain_tool(multiply).validation_error({"a": "6", "b": 7}) is None


def test_structured_tool_with_args_schema_applies_defaults():
    out = _call(from_langchain_tool(weather), city="Oslo")
    assert out.kind == "text" and out.value == "Oslo: 21C"


def test_single_string_input_tool_gets_its_string():
    adapted = from_langchain_tool(shout)
    assert list(adapted.input_schema["properties"]) == ["__arg1"]
    result = run_agent(ScriptedModel([ToolCall("shout", {"__arg1": "hey"}), "ok"]), "go", tools=[shout])
    assert result.tool_calls[0].output.value == "HEY!"


def test_base_tool_subclass_tool_exception_unhandled_is_an_error_result():
    result = run_agent(
        ScriptedModel([ToolCall("lookup", {"key": "zzz"}), ToolCall("lookup", {"key": "a"}), "done"]),
        "look up",
        tools=[LookupTool()],
    )
    failed, ok = result.tool_calls
    assert failed.is_error and "no entry for 'zzz'" in failed.error
    assert ok.output.value == "alpha" and not ok.is_error


@pytest.mark.parametrize(
    ("handler", "expected"),
    [(True, "no entry for 'zzz'"), ("lookup failed, try another key", "lookup failed, try another key"),
     (lambda e: f"handled: {e}", "handled: no entry for 'zzz'")],
    ids=["true", "string", "callable"],
)
def test_handle_tool_error_gives_the_text_langchain_would(handler, expected):
    lc_tool = LookupTool(handle_tool_error=handler)
    lc_message = lc_tool.invoke({"name": "lookup", "args": {"key": "zzz"}, "id": "c1", "type": "tool_call"})
    assert lc_message.status == "error" and lc_message.content == expected
    out = _call(from_langchain_tool(lc_tool), key="zzz")
    assert out.kind == "error-text" and out.value == expected


def test_handle_validation_error_is_honoured():
    class Strict(BaseModel):
        n: int = Field(ge=0)

    def count(n: int) -> str:
        return "x" * n

    lc_tool = StructuredTool.from_function(
        count, name="count", description="Repeat x.", args_schema=Strict,
        handle_validation_error="n must be >= 0",
    )
    assert from_langchain_tool(lc_tool).input_schema["properties"]["n"]["minimum"] == 0
    lc_message = lc_tool.invoke({"name": "count", "args": {"n": -1}, "id": "c", "type": "tool_call"})
    assert (lc_message.status, lc_message.content) == ("error", "n must be >= 0")
    # in a real loop the tool's own handler answers, not agentkit's JSON Schema check
    result = run_agent(ScriptedModel([ToolCall("count", {"n": -1}), ToolCall("count", {"n": 2}), "ok"]), "go",
                       tools=[lc_tool])
    rejected, ok = result.tool_calls
    assert rejected.output == ToolOutput.error("n must be >= 0")
    assert ok.output.value == "xx"


def test_content_and_artifact_keeps_the_artifact_out_of_the_model_view():
    class Doc:  # not JSON-serialisable: stored as its repr
        def __repr__(self) -> str:
            return "<Doc 7>"

    @tool(response_format="content_and_artifact")
    def fetch(n: int) -> tuple[str, dict]:
        """Fetch n rows."""
        return f"{n} rows", {"rows": list(range(n)), "doc": Doc()}

    result = run_agent(ScriptedModel([ToolCall("fetch", {"n": 3}), "ok"]), "go", tools=[fetch])
    out = result.tool_calls[0].output
    assert out.value == "3 rows"
    assert out.metadata == {"artifact": {"rows": [0, 1, 2], "doc": "<Doc 7>"}}
    tool_msg = result.messages[2].content[0]
    assert tool_msg.output.as_text() == "3 rows"
    # the metadata survives the event's JSON round trip
    ev = ToolResultEvent(tool_call_id="c", tool_name="fetch", output=out)
    assert event_from_dict(ev.to_dict()) == ev


def test_return_direct_is_reported_in_the_result():
    @tool(return_direct=True)
    def final_answer(answer: str) -> str:
        """Give the final answer."""
        return answer

    result = run_agent(
        ScriptedModel([ToolCall("final_answer", {"answer": "42"}), ToolCall("multiply", {"a": 1, "b": 2}), "x"]),
        "go",
        tools=[final_answer, multiply],
    )
    direct, plain = result.tool_calls
    assert direct.output.metadata == {"return_direct": True}
    assert direct.output.value == "42"
    assert plain.output.metadata is None


def test_injected_tool_call_id_receives_agentkit_call_id():
    @tool
    def stamp(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Stamp text with the call id."""
        return f"{text}@{tool_call_id}"

    @tool
    def stamp_msg(text: str, call: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Return a ToolMessage with an artifact."""
        return ToolMessage(text, artifact={"by": call}, tool_call_id=call, name="stamp_msg")

    assert list(from_langchain_tool(stamp).input_schema["properties"]) == ["text"]
    result = run_agent(
        ScriptedModel([[ToolCall("stamp", {"text": "a"}, id="id-1"), ToolCall("stamp_msg", {"text": "b"}, id="id-2")],
                       "done"]),
        "go",
        tools=[stamp, stamp_msg],
    )
    first, second = result.tool_calls
    assert first.output.value == "a@id-1"
    assert second.output.value == "b" and second.output.metadata == {"artifact": {"by": "id-2"}}


class InjectedState(InjectedToolArg):
    """A subclass of InjectedToolArg, as LangGraph's InjectedState and InjectedStore are."""


def test_injected_arg_must_be_supplied_and_is_supplied_at_call_time():
    @tool
    def whoami(greeting: str, user_id: Annotated[str, InjectedToolArg]) -> str:
        """Greet the current user."""
        return f"{greeting}, {user_id}"

    assert "user_id" not in _shown(whoami)["parameters"]["properties"]
    with pytest.raises(ToolDefinitionError, match="user_id.*injected="):
        run_agent(ScriptedModel(["x"]), "go", tools=[whoami])
    with pytest.raises(ToolDefinitionError, match="not injected arguments"):
        from_langchain_tool(whoami, injected={"user_id": "u", "usr": "typo"})

    fixed = from_langchain_tool(whoami, injected={"user_id": "ada"})
    assert "user_id" not in fixed.input_schema["properties"]
    assert _call(fixed, greeting="hi").value == "hi, ada"
    # a model cannot smuggle in a value for an injected argument
    assert _call(fixed, greeting="hi", user_id="root").value == "hi, ada"

    @tool
    def scoped(q: str, tenant: Annotated[str, InjectedToolArg] = "default",
               tool_call_id: Annotated[str, InjectedToolCallId] = "") -> str:
        """Query within the tenant."""
        return f"{tenant}:{q}:{tool_call_id}"

    sneaky = {"q": "x", "tenant": "other", "tool_call_id": "forged"}
    assert _call(from_langchain_tool(scoped), "real-id", **sneaky).value == "default:x:real-id"

    @tool
    def recall(key: str, state: Annotated[dict, InjectedState]) -> str:
        """Read a key of the graph state."""
        return str(state.get(key))

    assert list(from_langchain_tool(recall, injected={"state": {}}).input_schema["properties"]) == ["key"]
    with pytest.raises(ToolDefinitionError, match="injected argument.*state"):
        from_langchain_tool(recall)
    assert _call(from_langchain_tool(recall, injected={"state": {"k": 7}}), key="k").value == "7"

    per_call = from_langchain_tool(whoami, injected=lambda ctx: {"user_id": f"user-of-{ctx.tool_call_id}"})
    result = run_agent(ScriptedModel([ToolCall("whoami", {"greeting": "yo"}, id="c5"), "ok"]), "go",
                       tools=[per_call])
    assert result.tool_calls[0].output.value == "yo, user-of-c5"


async def _slow_double(x: int) -> str:
    """Double x, asynchronously."""
    await asyncio.sleep(0)
    return str(2 * x)


def test_async_only_tool_runs_without_a_caller_loop():
    lc_tool = StructuredTool.from_function(coroutine=_slow_double, name="double")
    with pytest.raises(NotImplementedError):  # LangChain itself cannot run it synchronously
        lc_tool.invoke({"x": 1})
    result = run_agent(ScriptedModel([ToolCall("double", {"x": 21}), "ok"]), "go", tools=[lc_tool])
    assert result.tool_calls[0].output.value == "42"


def test_async_only_tool_runs_from_a_thread_that_already_runs_a_loop():
    adapted = from_langchain_tool(StructuredTool.from_function(coroutine=_slow_double, name="double"))

    async def inside_a_loop() -> str:
        # a sync call from inside a running loop, as in Jupyter or an ASGI handler
        return _call(adapted, x=5).value

    assert asyncio.run(inside_a_loop()) == "10"


def test_async_only_tool_is_cancelled_with_its_token():
    started = threading.Event()

    async def forever(x: int) -> str:
        """Never finishes."""
        started.set()
        await asyncio.sleep(60)
        return "late"

    adapted = from_langchain_tool(StructuredTool.from_function(coroutine=forever, name="forever"))
    ctx = _ctx()
    threading.Thread(target=lambda: started.wait(5) and ctx.cancel.cancel("stop"), daemon=True).start()
    with pytest.raises(agentkit.CancelledError, match="stop"):
        adapted.fn(x=1, **{adapted.context_param: ctx})


def test_async_tool_keeps_loop_bound_state_across_runs():
    state: dict = {}

    async def counter(step: int) -> str:
        """Count on an asyncio primitive created at first use (like an async HTTP client)."""
        if "lock" not in state:
            state["lock"], state["loop"], state["n"] = asyncio.Lock(), asyncio.get_running_loop(), 0
        async with state["lock"]:  # a Lock used on another loop would raise
            assert asyncio.get_running_loop() is state["loop"]
            state["n"] += step
        return str(state["n"])

    lc_tool = StructuredTool.from_function(coroutine=counter, name="counter")
    for expected in ("1", "2"):  # each run_agent adapts the tool anew
        result = run_agent(ScriptedModel([ToolCall("counter", {"step": 1}), "ok"]), "go", tools=[lc_tool])
        assert result.tool_calls[0].output == ToolOutput.text(expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_async_tool_works_in_a_forked_worker():
    adapted = from_langchain_tool(StructuredTool.from_function(coroutine=_slow_double, name="double"))
    assert _call(adapted, x=1).value == "2"  # the parent's loop thread is running now
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
        child = ctx.Process(target=_double_in_child, args=(adapted, 21, send), daemon=True)  # not pickled
        child.start()
    try:
        assert receive.poll(30), "the forked child did not answer"
        assert receive.recv() == "42"
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def _double_in_child(adapted: agentkit.Tool, x: int, send) -> None:
    try:
        send.send(_call(adapted, x=x).value)
    except BaseException as exc:
        send.send(repr(exc))


def test_pydantic_v1_args_schema():
    from pydantic.v1 import BaseModel as BaseModelV1

    class V1Input(BaseModelV1):
        word: str
        times: int = 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lc_tool = StructuredTool.from_function(lambda word, times=2: word * times, name="rep",
                                               description="Repeat a word.", args_schema=V1Input)
        adapted = from_langchain_tool(lc_tool)
        assert dict(adapted.input_schema) == _shown(lc_tool)["parameters"]
        assert _call(adapted, word="ab").value == "abab"
        rejected = _call(adapted, word="ab", times="many")
        assert rejected.is_error and rejected.value.startswith("invalid input for tool 'rep'")


def test_base_tool_with_only_arun_falls_back_to_async():
    class AsyncOnly(BaseTool):
        name: str = "ping"
        description: str = "Ping."

        def _run(self, host: str) -> str:
            raise NotImplementedError("use the async API")

        async def _arun(self, host: str) -> str:
            await asyncio.sleep(0)
            return f"pong from {host}"

    assert _call(from_langchain_tool(AsyncOnly()), host="h1").value == "pong from h1"


def test_session_accepts_langchain_tools_directly():
    with Session(ScriptedModel([ToolCall("weather", {"city": "Rome", "unit": "F"}), "warm"]),
                 tools=[weather]) as session:
        session.push_user_message("weather?")
        result = session.generate()
    assert result.tool_calls[0].output.value == "Rome: 21F"
    assert result.text == "warm"


def test_from_langchain_tools_takes_lists_and_rejects_non_tools():
    adapted = from_langchain_tools([multiply, weather])
    assert [t.name for t in adapted] == ["multiply", "weather"]
    with pytest.raises(ToolDefinitionError, match="unique"):
        from_langchain_tools([multiply, multiply])
    with pytest.raises(ToolDefinitionError, match="BaseTool"):
        from_langchain_tool(lambda: None)
    with pytest.raises(ToolDefinitionError, match=r"from_langchain_tool\(tool, name='my_tool'\)"):
        run_agent(ScriptedModel(["x"]), "go", tools=[Tool(name="my tool", func=str, description="spaces")])
    assert from_langchain_tool(Tool(name="my tool", func=str, description="d"), name="my_tool").name == "my_tool"


# -- a real toolkit from a published package ----------------------------------------------


def _file_tools(root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community is being sunset
        from langchain_community.agent_toolkits import FileManagementToolkit

    return FileManagementToolkit(
        root_dir=str(root), selected_tools=["write_file", "read_file", "list_directory"]
    )


def test_file_management_toolkit_in_an_agent_loop(tmp_path):
    (tmp_path / "existing.txt").write_text("already here")
    model = ScriptedModel(
        [
            ToolCall("write_file", {"file_path": "notes/todo.txt", "text": "buy milk\n"}),
            ToolCall("write_file", {"file_path": "notes/todo.txt", "text": "call mom\n", "append": True}),
            [ToolCall("read_file", {"file_path": "notes/todo.txt"}), ToolCall("list_directory", {})],
            ToolCall("read_file", {"file_path": "../outside.txt"}),
            "Your list has two items.",
        ]
    )
    result = run_agent(model, "Keep my todo list", tools=from_langchain_tools(_file_tools(tmp_path)))
    assert (tmp_path / "notes" / "todo.txt").read_text() == "buy milk\ncall mom\n"
    outputs = [c.output.value for c in result.tool_calls]
    assert outputs[2] == "buy milk\ncall mom\n"
    assert sorted(outputs[3].splitlines()) == ["existing.txt", "notes"]
    assert "Access denied" in outputs[4]  # the toolkit's own root_dir guard
    assert not (tmp_path.parent / "outside.txt").exists()
    # the model saw each file tool's LangChain schema
    shown = {s.name: dict(s.input_schema) for s in model.requests[0].tools}
    for lc_tool in _file_tools(tmp_path).get_tools():
        assert shown[lc_tool.name] == _shown(lc_tool)["parameters"]


# -- agentkit -> LangChain ----------------------------------------------------------------


@agentkit.tool
def area(width: float, height: float, ctx: ToolContext) -> dict:
    """Area of a rectangle.

    Args:
        width: the width
        height: the height
    """
    return {"area": width * height, "call": ctx.tool_call_id}


def test_to_langchain_tool_keeps_schema_and_runs_the_agentkit_tool():
    lc_tool = to_langchain_tool(area)
    assert isinstance(lc_tool, StructuredTool)
    shown = _shown(lc_tool)
    assert shown["name"] == "area" and shown["description"] == area.description
    assert shown["parameters"] == dict(area.input_schema)
    msg = lc_tool.invoke({"name": "area", "args": {"width": 2, "height": 3}, "id": "lc-9", "type": "tool_call"})
    assert isinstance(msg, ToolMessage) and msg.tool_call_id == "lc-9"
    assert msg.content == '{"area": 6, "call": "lc-9"}'
    assert lc_tool.invoke({"width": 1.5, "height": 2})["area"] == 3.0
    assert asyncio.run(lc_tool.ainvoke({"width": 1, "height": 1}))["area"] == 1


def test_to_langchain_tool_errors_surface_as_tool_exception():
    @agentkit.tool
    def fail(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    lc_tool = to_langchain_tool(fail)
    with pytest.raises(ToolException, match="boom"):
        lc_tool.invoke({"reason": "boom"})
    with pytest.raises(ToolException, match="invalid input"):
        to_langchain_tool(area).invoke({"width": "wide", "height": 1})
    lc_tool.handle_tool_error = True
    msg = lc_tool.invoke({"name": "fail", "args": {"reason": "boom"}, "id": "c", "type": "tool_call"})
    assert msg.status == "error" and "boom" in msg.content
    with pytest.raises(ToolDefinitionError, match="already a LangChain tool"):
        to_langchain_tool(multiply)


def test_to_langchain_tool_keeps_the_artifact_and_json_lists_stay_json():
    @agentkit.tool
    def rows(n: int) -> ToolOutput:
        """Fetch n rows."""
        return ToolOutput(kind="text", value=f"{n} rows", metadata={"artifact": {"ids": list(range(n))}})

    @agentkit.tool
    def tags() -> list:
        """List the tags."""
        return ["red", "green"]

    msg = to_langchain_tool(rows).invoke({"name": "rows", "args": {"n": 2}, "id": "r1", "type": "tool_call"})
    assert (msg.content, msg.artifact) == ("2 rows", {"ids": [0, 1]})
    assert to_langchain_tool(rows).invoke({"n": 1}) == "1 rows"
    back = from_langchain_tool(to_langchain_tool(rows))
    assert _call(back, n=3) == rows.fn(n=3)
    # a JSON list of strings is data, not two text blocks
    msg = to_langchain_tool(tags).invoke({"name": "tags", "args": {}, "id": "t1", "type": "tool_call"})
    assert msg.content == '["red", "green"]'
    assert _call(from_langchain_tool(to_langchain_tool(tags))).value == '["red", "green"]'


def test_round_trip_agentkit_tool_through_langchain_and_back():
    back = from_langchain_tool(to_langchain_tool(area))
    assert back.name == area.name and back.description == area.description
    assert dict(back.input_schema) == dict(area.input_schema)
    out = _call(back, "rt-1", width=2, height=2)
    assert out == ToolOutput.text('{"area": 4, "call": "rt-1"}')


# -- packaging ---------------------------------------------------------------------------


def test_importing_agentkit_does_not_import_langchain():
    code = (
        "import sys, agentkit, agentkit.adapters.langchain\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('langchain', 'langsmith')))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_langchain_core_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    with pytest.raises(MissingDependencyError, match=r"agentkit\[langchain\]"):
        from_langchain_tool(multiply)


def test_adapter_public_surface_is_documented():
    import dataclasses
    import inspect

    import agentkit.adapters.langchain as adapter

    for name in adapter.__all__:
        obj = getattr(adapter, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            assert obj.__dataclass_params__.frozen and all(f.kw_only for f in dataclasses.fields(obj))
