"""The agent event stream: AgentStream, Session.stream, run_agent_stream."""

from __future__ import annotations

import json
import threading
import time

import pytest
from _tools import add

from agentkit import (
    AgentEvent,
    CancelledError,
    ConfigurationError,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    run_agent_stream,
    tool,
)
from agentkit.models import Turn
from agentkit.streaming import GenerationEndEvent


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def test_two_step_run_with_parallel_tools_yields_the_exact_event_sequence():
    model = ScriptedModel(
        [Turn(text="let me", tool_calls=(ToolCall("add", {"a": 1, "b": 2}, id="c1"),
                                          ToolCall("mul", {"a": 3, "b": 4}, id="c2"))),
         Turn(text="3 and 12", reasoning="easy")],
        chunk_size=100,
    )
    with run_agent_stream(model, "compute", tools=[add, mul]) as stream:
        events = list(stream)
        result = stream.result
    types = [e.type for e in events]
    assert types == [
        "generation-start",
        "step-start", "message-start", "text-delta", "tool-call", "tool-call", "message-end", "usage",
        "tool-start", "tool-start", "tool-end", "tool-end", "step-end",
        "step-start", "message-start", "reasoning-delta", "text-delta", "message-end", "usage", "step-end",
        "generation-end",
    ]
    assert [e.call.tool_call_id for e in events if e.type == "tool-start"] == ["c1", "c2"]
    assert [e.record.output.value for e in events if e.type == "tool-end"] == [3, 12]
    assert [e.step.index for e in events if e.type == "step-end"] == [0, 1]
    end = events[-1]
    assert isinstance(end, GenerationEndEvent) and end.error is None and end.result.text == "3 and 12"
    assert result.text == "3 and 12" and len(result.steps) == 2


def test_every_event_serialises_to_json():
    @tool
    def slow(ctx: ToolContext) -> str:
        """Report progress."""
        ctx.report_progress({"done": 1, "of": 2})
        ctx.report_progress(object())  # not JSON: carried as its repr
        return "ok"

    model = ScriptedModel([ToolCall("slow"), Turn(text="fine", reasoning="hmm")])
    with run_agent_stream(model, "go", tools=[slow]) as stream:
        dicts = [json.loads(json.dumps(e.to_dict())) for e in stream]
    assert {d["type"] for d in dicts} >= {"tool-update", "tool-end", "generation-end", "reasoning-delta"}
    updates = [d["update"] for d in dicts if d["type"] == "tool-update"]
    assert updates[0] == {"done": 1, "of": 2} and updates[1].startswith("<object object")
    assert dicts[-1]["result"]["text"] == "fine"


def test_a_slow_consumer_on_another_thread_receives_every_event_with_a_small_buffer():
    model = ScriptedModel(["x" * 200], chunk_size=1)  # 200 text deltas
    with Session(model) as s:
        s.push_user_message("talk")
        stream = s.stream(max_buffer=4)
        got: list[AgentEvent] = []

        def consume() -> None:
            for event in stream:
                got.append(event)
                time.sleep(0.001)

        t = threading.Thread(target=consume)
        t.start()
        t.join(60)
        assert not t.is_alive()
        assert "".join(e.text for e in got if e.type == "text-delta") == "x" * 200
        assert got[-1].type == "generation-end" and stream.result.text == "x" * 200


def test_the_buffer_bound_makes_the_generation_wait_for_the_consumer():
    model = ScriptedModel(["y" * 50], chunk_size=1)
    with Session(model) as s:
        s.push_user_message("talk")
        stream = s.stream(max_buffer=3)
        time.sleep(0.3)  # give the producer time to run ahead if it could
        assert not stream.done  # it waits: 50 deltas do not fit in 3 slots
        assert len(list(stream)) > 50 and stream.done


def test_events_the_consumer_took_but_has_not_read_count_against_the_bound():
    # the consumer takes buffered events in batches; the bound covers its batch too
    emitted: list[str] = []
    model = ScriptedModel(["y" * 60], chunk_size=1)
    with Session(model, on_token=emitted.append) as s:
        s.push_user_message("talk")
        stream = s.stream(max_buffer=5)
        read = 0
        for _ in range(12):
            next(stream)
            read += 1
            time.sleep(0.05)  # the producer runs ahead as far as it may
            # events made and not yet read: at most the bound, plus one waiting to go in
            # (the callbacks see an event just before the buffer does)
            assert len(emitted) - (read - 2) <= 5 + 1  # read includes generation/step start
        assert len(list(stream)) > 40 and stream.result.text == "y" * 60


def test_closing_the_stream_mid_tool_cancels_the_generation_and_keeps_what_was_committed():
    started, stopped = threading.Event(), threading.Event()

    @tool
    def wait(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        if ctx.cancel.wait(30):
            stopped.set()
        return "cancelled" if ctx.cancel.cancelled else "timeout"

    with Session(ScriptedModel([ToolCall("wait"), "never"]), tools=[wait]) as s:
        s.push_user_message("go")
        with s.stream() as stream:
            for event in stream:
                if event.type == "tool-start":
                    assert started.wait(10)
                    break
        assert stopped.is_set()
        with pytest.raises(CancelledError):
            _ = stream.result
        types = [e.type for e in s.events]
        assert types[:2] == ["user-message", "assistant-message"] and "tool-result" in types
        # the session is usable afterwards
        assert s.model_messages()[-1].role == "tool"


def test_reading_result_without_iterating_does_not_deadlock_on_a_full_buffer():
    model = ScriptedModel(["z" * 40], chunk_size=1)
    with Session(model) as s:
        s.push_user_message("talk")
        stream = s.stream(max_buffer=2)
        assert stream.result.text == "z" * 40


def test_a_generation_that_cannot_start_still_ends_the_stream_with_generation_end():
    with Session(ScriptedModel(["x"])) as s:
        s.push_user_message("hi")
        stream = s.stream(max_steps=0)  # generate() refuses it on the worker thread
        events = list(stream)
    assert [e.type for e in events] == ["generation-end"]
    assert isinstance(events[0].error, ConfigurationError)
    with pytest.raises(ConfigurationError, match="max_steps"):
        _ = stream.result


def test_stream_errors_come_back_as_generation_end_and_from_result():
    with run_agent_stream(ScriptedModel([]), "hi") as stream:
        events = list(stream)
    assert events[-1].type == "generation-end" and "no turn left" in str(events[-1].error)
    assert events[-1].to_dict()["error"]["type"] == "ScriptExhaustedError"
    with pytest.raises(Exception, match="no turn left"):
        _ = stream.result


def test_callbacks_and_the_stream_see_the_same_events():
    tokens: list[str] = []
    finished: list[str] = []
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), "two"], chunk_size=1)
    with run_agent_stream(model, "go", tools=[add], on_token=tokens.append,
                          on_tool_call_finish=lambda r: finished.append(r.tool_name)) as stream:
        deltas = [e.text for e in stream if e.type == "text-delta"]
    assert tokens == deltas == ["t", "w", "o"] and finished == ["add"]


def test_bad_stream_arguments_are_configuration_errors():
    with Session(ScriptedModel(["x"])) as s, pytest.raises(ConfigurationError, match="max_buffer"):
        s.stream(max_buffer=0)


def test_stream_worker_threads_are_reused_and_a_stream_may_start_another_inside_a_tool():
    def stream_threads() -> int:
        return sum(t.name == "agentkit-stream" for t in threading.enumerate())

    for _ in range(20):
        with run_agent_stream(ScriptedModel(["hi"]), "hello") as stream:
            assert stream.result.text == "hi"
    assert stream_threads() <= 2  # one thread served them one after another

    @tool
    def ask_a_helper(question: str) -> str:
        """Ask another agent (a stream started on a stream's worker thread)."""
        with run_agent_stream(ScriptedModel([f"helper says: {question}"]), question) as inner:
            return inner.result.text

    model = ScriptedModel([ToolCall("ask_a_helper", {"question": "why"}), "done"])
    with run_agent_stream(model, "go", tools=[ask_a_helper]) as outer:
        assert outer.result.tool_calls[0].output.value == "helper says: why"


def test_a_stream_dropped_before_its_end_cancels_the_generation_and_frees_the_session():
    import gc

    model = ScriptedModel([Turn(text="x" * 200), Turn(text="again")], chunk_size=1)  # 200 text-deltas
    with Session(model) as s:
        s.push_user_message("talk")
        stream = s.stream(max_buffer=4)
        assert next(stream).type == "generation-start"
        cycle = [stream]
        cycle.append(cycle)  # only the cyclic garbage collector can free it
        del stream, cycle  # dropped without close(), its generation waiting for room
        gc.collect()
        answered = []
        asker = threading.Thread(target=lambda: answered.append(s.ask("still there?").text), daemon=True)
        asker.start()
        asker.join(60)
        assert answered == ["again"]
        assert [e.data["reason"] for e in s.events if e.type == "control" and e.action == "generation-aborted"] == [
            "the stream was dropped before its end, without close()"]
