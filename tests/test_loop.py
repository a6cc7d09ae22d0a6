"""run_agent and the step loop: tools, parallelism, retries, validation, overflow."""

from __future__ import annotations

import threading
import time

import pytest

from agentkit import (
    CancelledError,
    CancelToken,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
    FileEventStore,
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    Session,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    Usage,
    run_agent,
    tool,
)
from agentkit.messages import ImagePart, Message, ToolResultPart
from agentkit.models import FinishEvent, ToolCallEvent, Turn, UsageEvent

CALLS: list[tuple[str, dict]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLS.append(("add", {"a": a, "b": b}))
    return a + b


def last_results(request):
    return [p.output.value for p in request.messages[-1].content if isinstance(p, ToolResultPart)]


def test_full_loop_returns_text_steps_usage_messages_and_tool_calls():
    model = ScriptedModel(
        [ToolCall("add", {"a": 2, "b": 3}), lambda r: f"the sum is {last_results(r)[0]}"]
    )
    tokens: list[str] = []
    result = run_agent(model, "add 2 and 3", tools=[add], system="be terse", on_token=tokens.append)
    assert result.text == "the sum is 5" and "".join(tokens) == "the sum is 5"
    assert result.finish_reason == "stop"
    assert len(result.steps) == 2 and result.steps[0].tool_calls[0].output.value == 5
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert [(c.tool_name, c.input, c.output.value, c.error) for c in result.tool_calls] == [
        ("add", {"a": 2, "b": 3}, 5, None)
    ]
    assert result.usage == result.steps[0].usage + result.steps[1].usage
    assert result.usage.total_tokens > 0
    assert model.requests[0].system == "be terse"
    assert [t.name for t in model.requests[0].tools] == ["add"]


def test_model_sees_tool_results_before_the_next_request():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), lambda r: str(last_results(r))])
    assert run_agent(model, "go", tools=[add]).text == "[2]"


def test_parallel_tool_calls_really_overlap_and_commit_in_model_order():
    barrier = threading.Barrier(3, timeout=20)

    @tool
    def meet(name: str, delay: float) -> str:
        """Wait for the others."""
        barrier.wait()  # only passes if all three run at the same time
        time.sleep(delay)
        return name

    model = ScriptedModel(
        [
            [ToolCall("meet", {"name": n, "delay": d}) for n, d in (("first", 0.3), ("second", 0.0), ("third", 0.1))],
            "done",
        ]
    )
    finished: list[str] = []
    result = run_agent(model, "go", tools=[meet], on_tool_call_finish=lambda r: finished.append(r.output.value))
    assert [c.output.value for c in result.tool_calls] == ["first", "second", "third"]
    assert finished == ["first", "second", "third"]
    tool_msg = result.messages[2]
    assert [p.output.value for p in tool_msg.content] == ["first", "second", "third"]


def test_sequential_execution_runs_one_at_a_time():
    active, peak = [0], [0]
    lock = threading.Lock()

    @tool
    def work() -> str:
        """Work."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return "ok"

    model = ScriptedModel([[ToolCall("work") for _ in range(4)], "done"])
    run_agent(model, "go", tools=[work], tool_execution="sequential")
    assert peak[0] == 1


def test_bad_tool_input_unknown_tool_and_exceptions_do_not_stop_the_loop():
    @tool
    def explode() -> str:
        """Fail."""
        raise ValueError("kaboom")

    model = ScriptedModel(
        [
            [ToolCall("add", {"a": "x", "b": 1}), ToolCall("nope", {}), ToolCall("explode")],
            lambda r: " | ".join(p.output.value for p in r.messages[-1].content),
        ]
    )
    result = run_agent(model, "go", tools=[add, explode])
    assert all(c.is_error for c in result.tool_calls)
    assert "$.a" in result.text and "unknown tool 'nope'" in result.text and "kaboom" in result.text


def test_malformed_tool_call_json_from_the_model_becomes_an_error_result():
    class BrokenArgs:
        def __init__(self):
            self.n = 0

        def stream(self, request):
            self.n += 1
            if self.n == 1:
                yield ToolCallEvent(tool_call_id="c1", tool_name="add", input='{"a": 1,', input_error="truncated JSON")
                yield FinishEvent("tool-calls")
            else:
                yield from ScriptedModel([f"saw: {request.messages[-1].content[0].output.value}"]).stream(request)

    result = run_agent(BrokenArgs(), "go", tools=[add])
    assert result.tool_calls[0].is_error
    assert "could not be parsed: truncated JSON" in result.text


def test_conversation_continues_over_many_turns_without_losing_messages():
    model = FunctionModel(
        lambda r: ToolCall("add", {"a": len(r.messages), "b": 0})
        if r.messages[-1].role == "user"
        else f"turn done with {len(r.messages)} messages"
    )
    messages = None
    for turn in range(4):
        result = run_agent(model, f"question {turn}", tools=[add], messages=messages)
        messages = result.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"] * 4
    assert [m.text for m in messages if m.role == "user"] == [f"question {i}" for i in range(4)]
    assert model.requests[-1].messages[0].text == "question 0"


def test_system_messages_in_history_become_the_system_prompt():
    model = ScriptedModel(["ok"])
    result = run_agent(model, "hi", messages=[Message.system("rules"), Message.user("earlier")], system="base")
    assert model.requests[0].system == "base\n\nrules"
    assert [m.text for m in result.messages] == ["earlier", "hi", "ok"]


def test_multimodal_prompt_reaches_the_model():
    model = ScriptedModel(["nice cat"])
    img = ImagePart(data=b"\x89PNG fake", media_type="image/png")
    run_agent(model, ["what is this?", img])
    assert model.requests[0].messages[0].content[1] == img


def test_validate_completion_feeds_back_and_retries():
    model = ScriptedModel(["draft", "final answer"])
    seen = []

    def validate(result):
        seen.append(result.text)
        return None if result.text.startswith("final") else "Start your answer with 'final'."

    result = run_agent(model, "go", validate_completion=validate, max_validation_retries=1)
    assert result.text == "final answer" and seen == ["draft", "final answer"]
    assert model.requests[1].messages[-1].text == "Start your answer with 'final'."


def test_validate_completion_exhausted_raises_clearly():
    model = ScriptedModel(["bad", "still bad"])
    with pytest.raises(CompletionValidationError, match="after 2 attempt") as info:
        run_agent(model, "go", validate_completion=lambda r: "no", max_validation_retries=1)
    assert info.value.feedback == "no" and info.value.attempts == 2


class Overflowing:
    """Overflows while the conversation has more than `limit` messages."""

    def __init__(self, limit):
        self.limit = limit
        self.sizes = []

    def stream(self, request):
        self.sizes.append(len(request.messages))
        if len(request.messages) > self.limit:
            raise ContextOverflowError(f"{len(request.messages)} messages is too many")
        yield from ScriptedModel([f"fits in {len(request.messages)}"]).stream(request)


def test_context_overflow_handler_replaces_the_context_and_retries():
    history = [Message.user(f"old {i}") for i in range(6)]
    handled = []

    def shrink(messages, cancel):
        handled.append(len(messages))
        assert isinstance(cancel, CancelToken)
        return messages[-2:]

    result = run_agent(Overflowing(3), "new", messages=history, on_context_overflow=shrink)
    assert handled == [7] and result.text == "fits in 2"


def test_context_overflow_without_handler_or_after_the_limit_raises():
    with pytest.raises(ContextOverflowError):
        run_agent(Overflowing(0), "x")
    calls = []
    with pytest.raises(ContextOverflowError):
        run_agent(
            Overflowing(0),
            "x",
            on_context_overflow=lambda m, c: calls.append(1) or m,
            max_context_overflow_retries=2,
        )
    assert len(calls) == 2


def test_repeated_call_id_with_identical_input_reuses_the_first_result():
    CALLS.clear()
    model = ScriptedModel(
        [
            ToolCall("add", {"a": 1, "b": 2}, id="dup"),
            ToolCall("add", {"a": 1, "b": 2}, id="dup"),  # a provider repeating itself
            [ToolCall("add", {"a": 9, "b": 9}, id="dup")],  # same id, different input
            "done",
        ]
    )
    result = run_agent(model, "go", tools=[add])
    assert CALLS == [("add", {"a": 1, "b": 2})]  # the tool ran once
    first, second, third = result.tool_calls
    assert second.reused and second.output == first.output
    assert third.is_error and "already used in this generation with different input" in third.error


def test_duplicate_ids_inside_one_message_run_once():
    CALLS.clear()
    twins = [ToolCall("add", {"a": 5, "b": 5}, id="x"), ToolCall("add", {"a": 5, "b": 5}, id="x")]
    model = ScriptedModel([twins, "ok"])
    result = run_agent(model, "go", tools=[add])
    assert len(CALLS) == 1 and [c.output.value for c in result.tool_calls] == [10, 10]


def test_max_steps_stops_the_loop():
    model = FunctionModel(lambda r: ToolCall("add", {"a": 1, "b": 1}))
    result = run_agent(model, "loop forever", tools=[add], max_steps=3)
    assert result.finish_reason == "max-steps" and len(result.steps) == 3


def test_tool_call_callbacks_and_progress():
    @tool
    def job(ctx: ToolContext) -> str:
        """Report progress."""
        ctx.report_progress("half")
        return "done"

    events = []
    run_agent(
        ScriptedModel([ToolCall("job", id="j"), "ok"]),
        "go",
        tools=[job],
        on_tool_call_start=lambda c: events.append(("start", c.tool_call_id)),
        on_tool_call_update=lambda cid, u: events.append(("update", cid, u)),
        on_tool_call_finish=lambda r: events.append(("finish", r.tool_call_id, r.output.value)),
    )
    assert events == [("start", "j"), ("update", "j", "half"), ("finish", "j", "done")]


def test_cancel_token_stops_a_run_between_tool_and_model():
    token = CancelToken()

    @tool
    def stop() -> str:
        """Cancel the run."""
        token.cancel("enough")
        return "cancelled"

    with pytest.raises(CancelledError, match="enough"):
        run_agent(ScriptedModel([ToolCall("stop"), "never"]), "go", tools=[stop], cancel=token)


def test_usage_is_summed_over_steps():
    class Metered:
        def stream(self, request):
            yield UsageEvent(Usage(input_tokens=10, output_tokens=1, total_tokens=11, cache_read_tokens=4))
            if len(request.messages) == 1:
                yield ToolCallEvent(tool_call_id="c", tool_name="add", input={"a": 1, "b": 1})
            yield FinishEvent("stop")

    result = run_agent(Metered(), "go", tools=[add])
    assert result.usage == Usage(input_tokens=20, output_tokens=2, total_tokens=22, cache_read_tokens=8)


def test_bad_arguments_fail_before_any_model_call():
    model = ScriptedModel(["never"])
    with pytest.raises(ToolDefinitionError):
        run_agent(model, "go", tools=[add, add])
    with pytest.raises(ConfigurationError, match="max_steps"):
        run_agent(model, "go", max_steps=0)
    with pytest.raises(ConfigurationError, match="tool_execution"):
        run_agent(model, "go", tool_execution="sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ChatModel"):
        run_agent(object(), "go")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="model spec"):
        run_agent("gpt-4", "go")
    assert model.requests == []


def test_script_exhaustion_surfaces():
    with pytest.raises(ScriptExhaustedError):
        run_agent(ScriptedModel([ToolCall("add", {"a": 1, "b": 1})]), "go", tools=[add])


def test_reasoning_is_kept_in_the_assistant_message():
    chunks = []
    result = run_agent(ScriptedModel([Turn(text="42", reasoning="6*7")]), "q", on_reasoning=chunks.append)
    assert chunks == ["6*7"]
    assert result.messages[-1].content[0].text == "6*7"


def test_run_agent_works_inside_a_thread_that_already_runs_an_event_loop():
    import asyncio

    async def handler():  # e.g. a sync helper called from an ASGI endpoint or Jupyter cell
        model = ScriptedModel([ToolCall("add", {"a": 20, "b": 22}), lambda r: str(last_results(r)[0])])
        return run_agent(model, "go", tools=[add]).text

    assert asyncio.run(handler()) == "42"


def test_invalid_input_never_reaches_the_function_and_a_timeout_does_not_stop_the_loop():
    release = threading.Event()

    @tool(timeout=0.2)
    def hang() -> str:
        """Hang past the timeout."""
        release.wait(20)
        return "late"

    CALLS.clear()
    model = ScriptedModel(
        [
            [ToolCall("add", {"a": 1}), ToolCall("hang")],
            lambda r: " | ".join(p.output.value for p in r.messages[-1].content),
        ]
    )
    result = run_agent(model, "go", tools=[add, hang])
    release.set()
    assert CALLS == []  # validated before the function ran
    assert "'b' is a required property (rule: required)" in result.text
    assert "tool 'hang' timed out after 0.2s" in result.text and result.finish_reason == "stop"


def test_tool_choice_is_checked_before_any_model_call():
    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match="tool_choice 'nosuch'"):
        run_agent(model, "go", tools=[add], tool_choice="nosuch")
    with pytest.raises(ConfigurationError, match="needs at least one tool"):
        run_agent(model, "go", tool_choice="required")
    assert model.requests == []
    run_agent(ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), "ok"]), "go", tools=[add], tool_choice="add")


def test_validate_completion_must_return_none_or_a_string():
    with pytest.raises(ConfigurationError, match="validate_completion must return None"):
        run_agent(ScriptedModel(["x"]), "go", validate_completion=lambda r: True)


def test_on_context_overflow_must_return_usable_messages():
    for bad in ([], [Message.system("rules"), Message.user("hi")], ["text"]):
        with pytest.raises(ConfigurationError, match="on_context_overflow must return"):
            run_agent(Overflowing(0), "x", on_context_overflow=lambda m, c, bad=bad: bad)


def test_a_cancelled_model_stream_is_closed_at_once():
    token = CancelToken()
    closed = []

    class SdkStream:  # like an SDK's response stream: an iterator holding a connection
        def __init__(self, request):
            self._events = ScriptedModel(["a long answer " * 20], chunk_size=2).stream(request)

        def __iter__(self):
            return self

        def __next__(self):
            return next(self._events)

        def close(self):
            closed.append(True)

    class Streaming:
        def stream(self, request):
            return SdkStream(request)

    with pytest.raises(CancelledError):
        run_agent(Streaming(), "go", on_token=lambda text: token.cancel("stop"), cancel=token)
    assert closed == [True]  # the connection is released now, not left to the garbage collector
    assert run_agent(Streaming(), "go").text.startswith("a long answer") and closed == [True, True]


def test_a_callback_that_is_not_callable_fails_before_any_model_call():
    model = ScriptedModel(["never"])
    for name in ("on_token", "on_tool_call_finish", "validate_completion", "on_context_overflow"):
        with pytest.raises(ConfigurationError, match=f"{name} must be a callable"):
            run_agent(model, "go", **{name: "print"})
    assert model.requests == []


def test_tool_input_that_is_not_plain_json_becomes_an_error_result_and_the_step_is_kept(tmp_path):
    deep: list = []
    for _ in range(989):  # about where 0.1.0 lost the step to a RecursionError
        deep = [deep]
    inputs = [{"a": deep, "b": 1}, {"a": float("nan"), "b": 1}, {"a": 2, "b": 1}]

    class OddArgs:  # a model adapter that hands over parsed arguments as they came
        def __init__(self):
            self.requests: list = []

        def stream(self, request):
            self.requests.append(request)
            n = len(self.requests)
            if n <= len(inputs):
                yield ToolCallEvent(tool_call_id=f"c{n}", tool_name="add", input=inputs[n - 1])
                yield FinishEvent("tool-calls")
            else:
                yield from ScriptedModel([f"saw: {last_results(request)[0]}"]).stream(request)

    model = OddArgs()
    store = FileEventStore(tmp_path)
    with Session(model, tools=[add], store=store, session_id="s") as session:
        session.push_user_message("go")
        result = session.generate()
    errors = [c.output.value for c in result.tool_calls[:2]]
    assert all(c.is_error for c in result.tool_calls[:2]) and result.tool_calls[2].output.value == 3
    assert "could not be parsed: the arguments are not plain JSON: $.a[0]" in errors[0]
    assert "nested deeper than 500 levels" in errors[0]
    assert "$.a is nan, which is not a JSON number" in errors[1]
    assert result.text == "saw: 3" and len(model.requests) == 4
    stored = store.load("s")  # every step is durable and reads back
    assert [type(e).__name__ for e in stored.events] == ["UserMessageEvent"] + [
        "AssistantMessageEvent", "ControlEvent", "ToolResultEvent"  # each call's intent before it runs
    ] * 3 + ["AssistantMessageEvent"]
    assert stored.events[1].tool_calls[0].input == {}
