"""Running one model-produced tool call (agentkit/tools/runner.py): every failure becomes
an error result the model reads; only the run's own cancellation raises."""

from __future__ import annotations

import contextvars
import threading

import pytest

from agentkit import CancelledError, CancelToken, Tool, ToolContext, ToolDecision, tool
from agentkit.messages import ImagePart, TextPart, ToolCallPart, ToolOutput
from agentkit.tools.runner import decision_gate, run_tool_call


def call(t: Tool | None, input=None, *, token: CancelToken | None = None, available=(), input_error=None,
         name: str | None = None) -> ToolOutput:
    tool_name = name or getattr(t, "name", "missing")
    part = ToolCallPart(tool_call_id="c1", tool_name=tool_name, input={} if input is None else input,
                        input_error=input_error)
    ctx = ToolContext(tool_call_id="c1", tool_name=tool_name, cancel=token or CancelToken())
    return run_tool_call(t, part, ctx, available)


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


def test_a_valid_call_runs_the_tool():
    assert call(add, {"a": 2, "b": 3}) == ToolOutput(kind="json", value=5)
    assert call(add, {"a": 2}) == ToolOutput(kind="json", value=3)


def test_unparsable_arguments_are_an_error_result_and_the_tool_does_not_run():
    ran = []

    @tool
    def record(x: int) -> str:
        """Record a call."""
        ran.append(x)
        return "ran"

    out = call(record, "{x: 1", input_error="Expecting property name")
    assert out == ToolOutput.error(
        "the arguments for tool 'record' could not be parsed: Expecting property name. "
        "Call the tool again with a valid JSON object as arguments."
    )
    assert ran == []


def test_an_unknown_tool_lists_the_available_ones_or_says_none():
    assert call(None, available=("a", "b")) == ToolOutput.error("unknown tool 'missing'; available tools: a, b")
    assert call(None) == ToolOutput.error("unknown tool 'missing'; available tools: (none)")


def test_invalid_input_is_an_error_result_naming_the_problem():
    for bad in ({"a": "not a number"}, {}, {"a": 1, "c": 2}):
        problem = add.validation_error(bad)
        assert problem is not None
        assert call(add, bad) == ToolOutput.error(problem)


def test_an_untimed_tool_runs_on_the_callers_thread():
    @tool
    def where() -> str:
        """Say which thread runs this."""
        return threading.current_thread().name

    assert call(where) == ToolOutput.text(threading.current_thread().name)


def test_a_failing_input_conversion_is_an_error_result():
    def explode(data):
        raise ValueError("cannot convert")

    t = Tool(name="conv", description="d", input_schema={"type": "object"}, fn=lambda **kw: "ran",
             prepare_input=explode)
    assert call(t, {"x": 1}) == ToolOutput.error("invalid input for tool 'conv': cannot convert")


def test_tool_exceptions_become_error_results_naming_the_tool_and_the_exception():
    @tool
    def boom() -> str:
        """Fail."""
        raise KeyError("k")

    assert call(boom) == ToolOutput.error("tool 'boom' failed: KeyError: 'k'")


def test_tool_outputs_are_returned_unchanged():
    outputs = {
        "error": ToolOutput.error("custom failure"),
        "text": ToolOutput.text("fine"),
        "json": ToolOutput(kind="json", value={"a": [1]}, metadata={"m": 1}),
        "error-json": ToolOutput(kind="error-json", value={"code": 3}),
        "content": ToolOutput(kind="content", value=(TextPart(text="see"), ImagePart(data=b"x"))),
    }

    @tool
    def give(kind: str):
        """Return a prepared output."""
        return outputs[kind]

    for kind, expected in outputs.items():
        got = call(give, {"kind": kind})
        assert got == expected, kind
        if kind in ("error", "text", "content"):
            assert got is expected, kind


@pytest.mark.parametrize(
    "bad, why",
    [
        (ToolOutput(kind="bogus", value="x"), "unknown output kind 'bogus'"),  # type: ignore[arg-type]
        (ToolOutput(kind="text", value=3), "a text output needs a str value, not int"),
        (ToolOutput(kind="error-text", value=None), "a error-text output needs a str value, not NoneType"),
        (ToolOutput(kind="json", value={"x": object()}), "not JSON serializable"),
        (ToolOutput(kind="error-json", value={1j}), "not JSON serializable"),
        (ToolOutput(kind="content", value=("not a part",)), ""),
        (ToolOutput(kind="text", value="ok", metadata={"x": object()}), "not JSON serializable"),
    ],
)
def test_an_output_that_cannot_be_recorded_becomes_an_error_result(bad, why):
    @tool
    def give():
        """Return a broken output."""
        return bad

    out = call(give)
    assert out.is_error and out.value.startswith("tool 'give' returned an output that cannot be recorded: ")
    assert why in out.value and out.value.endswith("Tools must return JSON-ready values.")


def test_a_tool_raising_cancelled_on_its_own_is_an_error_result_but_a_cancelled_run_raises():
    @tool
    def gives_up() -> str:
        """Raise CancelledError without being cancelled."""
        raise CancelledError("inner")

    assert call(gives_up) == ToolOutput.error("tool 'gives_up' was cancelled")

    @tool
    def obeys(ctx: ToolContext) -> str:
        """Stop because the run was cancelled."""
        ctx.cancel.raise_if_cancelled()
        return "ran"

    token = CancelToken()
    token.cancel("user stopped")
    with pytest.raises(CancelledError, match="user stopped"):
        call(obeys, token=token)


def test_the_context_is_passed_under_its_parameter_and_never_taken_from_input():
    seen = {}

    @tool
    def look(ctx: ToolContext) -> str:
        """Look at the context."""
        seen["ctx"] = ctx
        return "ok"

    token = CancelToken()
    assert call(look, token=token) == ToolOutput.text("ok")
    assert seen["ctx"].cancel is token and seen["ctx"].tool_call_id == "c1"


# -- tools with a timeout --------------------------------------------------------------

_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="unset")


def test_a_timed_tool_that_finishes_returns_its_result_with_its_own_token():
    seen = {}

    @tool(timeout=60)
    def quick(x: int, ctx: ToolContext) -> dict:
        """Finish at once."""
        seen["token"] = ctx.cancel
        seen["var"] = _var.get()
        seen["thread"] = threading.current_thread().name
        seen["daemon"] = threading.current_thread().daemon  # a stuck tool never blocks exit
        return {"x": x}

    token = CancelToken()
    reset = _var.set("from the caller")
    try:
        assert call(quick, {"x": 4}, token=token) == ToolOutput(kind="json", value={"x": 4})
    finally:
        _var.reset(reset)
    assert seen["var"] == "from the caller"  # the worker runs in a copy of the caller's context
    assert seen["thread"] == "agentkit-tool-quick" and seen["daemon"] is True
    assert seen["token"] is not token and not seen["token"].cancelled
    assert seen["token"]._callbacks == []  # the wait's wake-up was unregistered: nothing piles up
    token.cancel("later")
    assert seen["token"].cancelled  # the call's token is a child of the run's


def test_a_timed_tool_error_and_outputs_pass_through():
    @tool(timeout=60)
    def fail() -> str:
        """Fail."""
        raise ValueError("bad")

    assert call(fail) == ToolOutput.error("tool 'fail' failed: ValueError: bad")
    expected = ToolOutput.error("mine")

    @tool(timeout=60)
    def give() -> ToolOutput:
        """Return an error output."""
        return expected

    assert call(give) is expected


def test_a_timed_tool_that_times_out_is_told_to_stop_and_the_run_goes_on():
    stopped = threading.Event()

    @tool(timeout=0.1)
    def hang(ctx: ToolContext) -> str:
        """Wait until told to stop."""
        if ctx.cancel.wait(60):
            stopped.set()
        return "late"

    token = CancelToken()
    out = call(hang, token=token)
    assert out == ToolOutput.error("tool 'hang' timed out after 0.1s and was told to stop")
    assert stopped.wait(60)
    assert not token.cancelled


def test_cancelling_the_run_while_a_timed_tool_ignores_its_token_raises_cancelled_not_timed_out():
    started, release = threading.Event(), threading.Event()

    @tool(timeout=60)
    def stubborn() -> str:
        """Ignore cancellation."""
        started.set()
        release.wait(60)
        return "too late"

    token = CancelToken()
    canceller = threading.Thread(target=lambda: (started.wait(60), token.cancel("user pressed stop")))
    canceller.start()
    try:
        with pytest.raises(CancelledError, match="user pressed stop"):
            call(stubborn, token=token)
    finally:
        release.set()
        canceller.join(60)


def test_a_timed_tool_cancelled_before_it_starts_raises_cancelled():
    @tool(timeout=60)
    def obeys(ctx: ToolContext) -> str:
        """Stop when cancelled."""
        ctx.cancel.raise_if_cancelled()
        return "ran"

    token = CancelToken()
    token.cancel("already stopped")
    with pytest.raises(CancelledError, match="already stopped"):
        call(obeys, token=token)


def test_system_exit_from_a_timed_tool_reaches_the_caller():
    @tool(timeout=60)
    def leave() -> str:
        """Exit."""
        raise SystemExit(3)

    with pytest.raises(SystemExit) as info:
        call(leave)
    assert info.value.code == 3

    @tool
    def leave_untimed() -> str:
        """Exit."""
        raise SystemExit(4)

    with pytest.raises(SystemExit):
        call(leave_untimed)


# -- JSON outputs are recorded in their plain JSON form ----------------------------------


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def _give(output: ToolOutput) -> ToolOutput:
    @tool
    def give():
        """Return a prepared output."""
        return output

    return call(give)


def test_json_outputs_come_back_as_the_json_a_store_gives_back():
    value = {"pair": (1, 2), 3: "three", "nested": [{"t": ()}]}
    out = _give(ToolOutput(kind="json", value=value, metadata={"m": (True, None)}))
    assert out == ToolOutput(kind="json", value={"pair": [1, 2], "3": "three", "nested": [{"t": []}]},
                             metadata={"m": [True, None]})
    plain = {"already": ["plain", 1, 2.5, None]}
    assert _give(ToolOutput(kind="error-json", value=plain)).value is plain  # nothing to convert: not copied


@pytest.mark.parametrize(
    "value, why",
    [
        (float("nan"), "Out of range float values are not JSON compliant"),
        ({"x": [float("inf")]}, "Out of range float values are not JSON compliant"),
        (_nested(600), "is nested deeper than 500 levels"),
        (_nested(100_000), "is nested deeper than 500 levels"),  # deeper than any encoder goes
    ],
)
def test_json_outputs_that_cannot_be_plain_json_are_error_results(value, why):
    out = _give(ToolOutput(kind="json", value=value))
    assert out.is_error and out.value.startswith("tool 'give' returned an output that cannot be recorded: ")
    assert why in out.value


# -- tracing -------------------------------------------------------------------------------


def test_why_a_call_failed_goes_on_the_current_span():
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from agentkit.observability import configure

    @tool
    def explode() -> str:
        """Fail."""
        raise KeyError("gone")

    @tool(timeout=0.05)
    def dawdle() -> str:
        """Too slow."""
        threading.Event().wait(1)
        return "late"

    tracer = TracerProvider().get_tracer("test")
    seen = {}
    for t, content in ((explode, False), (dawdle, False), (add, False), (explode, True)):
        configure(record_content=content)
        try:
            with tracer.start_as_current_span("execute_tool") as span:
                assert call(t, {"a": 1} if t is add else {}).is_error is (t is not add)
        finally:
            configure(record_content=None)
        seen[t.name, content] = (span.attributes.get("error.type"), [e.name for e in span.events])
    assert seen == {
        ("explode", False): ("KeyError", []),  # the exception's message may quote input: not without opt-in
        ("dawdle", False): ("timeout", []),
        ("add", False): (None, []),
        ("explode", True): ("KeyError", ["exception"]),
    }
    assert not trace.get_current_span().is_recording()  # nothing is left current


# -- gates: the generation's hooks, then the tool's own before_call --------------------


def gated(t: Tool, input: dict, gate=None) -> ToolOutput:
    part = ToolCallPart(tool_call_id="c1", tool_name=t.name, input=input)
    return run_tool_call(t, part, ToolContext(tool_call_id="c1", tool_name=t.name, cancel=CancelToken()), (), gate)


def counting_add():
    ran: list[dict] = []

    @tool
    def add(a: int, b: int = 1) -> int:
        """Add two integers."""
        ran.append({"a": a, "b": b})
        return a + b

    return add, ran


def test_a_gate_answers_passes_or_rewrites_a_call_and_a_rewrite_is_validated_again():
    add, ran = counting_add()
    # an answer instead of the call: the tool does not run, the answer is made recordable
    out = gated(add, {"a": 1}, lambda c, ctx: ToolOutput(kind="json", value=(1, 2)))
    assert out == ToolOutput(kind="json", value=[1, 2]) and ran == []
    out = gated(add, {"a": 1}, lambda c, ctx: ToolOutput(kind="text", value=3))
    assert out.is_error and "returned an output that cannot be recorded" in out.value and ran == []
    # the same call: it runs as the model wrote it
    seen: list[ToolCallPart] = []
    assert gated(add, {"a": 1}, lambda c, ctx: seen.append(c) or c).value == 2 and ran == [{"a": 1, "b": 1}]
    assert seen[0].input == {"a": 1}
    # a rewritten call runs with its input, checked against the schema again
    from dataclasses import replace

    assert gated(add, {"a": 1}, lambda c, ctx: replace(c, input={"a": 5, "b": 5})).value == 10
    out = gated(add, {"a": 1}, lambda c, ctx: replace(c, input={"a": "five"}))
    assert out.is_error and out.value.startswith("the rewritten input was refused: ") and "'five'" in out.value
    assert ran == [{"a": 1, "b": 1}, {"a": 5, "b": 5}]


def test_the_tools_own_gate_runs_after_the_generations_and_sees_its_rewrite():
    add, ran = counting_add()
    asked: list[dict] = []

    def own(call, ctx):
        asked.append(call.input)
        return ToolDecision.block("not today") if call.input.get("a") == 13 else None

    from dataclasses import replace

    guarded = replace(add, before_call=own)
    assert gated(guarded, {"a": 13}).value == "tool call blocked: not today"  # no generation gate
    assert gated(guarded, {"a": 1}, lambda c, ctx: replace(c, input={"a": 2})).value == 3
    assert asked == [{"a": 13}, {"a": 2}] and ran == [{"a": 2, "b": 1}]
    out = gated(guarded, {"a": 1}, lambda c, ctx: replace(c, input={"a": 13}))
    assert out.value == "tool call blocked: not today" and ran == [{"a": 2, "b": 1}]
    # a generation gate that answers: the tool's own gate is not asked
    assert gated(guarded, {"a": 13}, lambda c, ctx: ToolOutput.text("hooked")).value == "hooked"
    assert asked == [{"a": 13}, {"a": 2}, {"a": 13}]


def test_a_decision_gate_maps_each_decision():
    add, ran = counting_add()
    for decision, expected in [
        (None, 2),
        (ToolDecision.allow(), 2),
        (ToolDecision.rewrite({"a": 7}), 8),
        (ToolDecision.block("no"), "tool call blocked: no"),
        (ToolDecision.respond({"made": "up"}), {"made": "up"}),
    ]:
        out = gated(add, {"a": 1}, decision_gate(lambda c, ctx, d=decision: d))
        assert out.value == expected, decision
    assert ran == [{"a": 1, "b": 1}, {"a": 1, "b": 1}, {"a": 7, "b": 1}]
    # a rewrite clears an input error: the call it makes is a valid one
    gate = decision_gate(lambda c, ctx: ToolDecision.rewrite({"a": 1}))
    part = ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 0}, input_error="was broken")
    assert gate(part, ToolContext(tool_call_id="c1", tool_name="add", cancel=CancelToken())).input_error is None


def test_a_cached_tool_runs_once_then_answers_from_its_cache_and_says_so(tmp_path):
    from agentkit import ToolCache

    ran, marks = [], []

    @tool(cache=ToolCache(tmp_path, ttl=3600), read_only=True, timeout=30)
    def look(q: str, ctx: ToolContext) -> str:
        """Look something up."""
        ran.append((q, ctx.tool_call_id))
        return f"found {q}"

    def cached_call(q: str, on_cache=marks.append) -> ToolOutput:
        part = ToolCallPart(tool_call_id="c1", tool_name="look", input={"q": q})
        return run_tool_call(look, part, ToolContext(tool_call_id="c1", tool_name="look", cancel=CancelToken()),
                             on_cache=on_cache)

    assert cached_call("x") == ToolOutput.text("found x") and marks == []  # a run: no marker
    assert ran == [("x", "c1")]  # the tool got its context (the key did not)
    assert cached_call("x") == ToolOutput.text("found x") and ran == [("x", "c1")]
    (mark,) = marks
    assert mark["hit"] is True and len(mark["key"]) == 64
    assert cached_call("x", on_cache=None) == ToolOutput.text("found x")  # no callback: still a hit
    assert cached_call("y") == ToolOutput.text("found y") and len(marks) == 1 and len(ran) == 2
