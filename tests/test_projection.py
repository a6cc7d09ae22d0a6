"""The default projection: events -> model messages."""

from __future__ import annotations

import random

from agentkit import (
    AssistantMessageEvent,
    ContextReplacedEvent,
    ControlEvent,
    Message,
    Projector,
    RuntimeEvent,
    TextPart,
    ToolCallPart,
    ToolOutput,
    ToolResultEvent,
    UserMessageEvent,
    build_model_messages,
    events_from_messages,
)
from agentkit.projection import INTERRUPTED_RESULT


def user(text):
    return UserMessageEvent(content=(TextPart(text=text),))


def calls(*ids):
    return AssistantMessageEvent(
        content=tuple(ToolCallPart(tool_call_id=i, tool_name="t", input={}) for i in ids)
    )


def result(cid, value="ok"):
    return ToolResultEvent(tool_call_id=cid, tool_name="t", output=ToolOutput.text(value))


def runtime(name="job-finished", **data):
    return RuntimeEvent(runtime_type=name, data=data)


def roles(messages):
    return [m.role for m in messages]


def test_tool_results_of_one_message_form_one_tool_message_in_model_order():
    # a call answered later (after an approval) still takes the place the model gave it
    msgs = build_model_messages([user("go"), calls("a", "b"), result("b", "B"), result("a", "A")])
    assert roles(msgs) == ["user", "assistant", "tool"]
    assert [p.tool_call_id for p in msgs[2].content] == ["a", "b"]


def test_runtime_event_is_user_context_not_a_tool_result():
    msgs = build_model_messages([user("go"), runtime(execution_id="j1", exit_code=0)])
    assert roles(msgs) == ["user", "user"]
    text = msgs[1].text
    assert 'type="job-finished"' in text and '"exit_code": 0' in text


def test_runtime_event_during_open_tool_calls_waits_for_their_results():
    msgs = build_model_messages(
        [user("go"), calls("a", "b"), result("a"), runtime(n=1), result("b"), user("next")]
    )
    assert roles(msgs) == ["user", "assistant", "tool", "user", "user"]
    assert len(msgs[2].content) == 2
    assert "runtime-event" in msgs[3].text and msgs[4].text == "next"


def test_interrupted_tool_calls_are_closed_before_the_next_user_message():
    msgs = build_model_messages([user("go"), calls("a", "b"), result("a"), user("stop that")])
    assert roles(msgs) == ["user", "assistant", "tool", "user"]
    closed = msgs[2].content[1]
    assert closed.tool_call_id == "b" and closed.output.is_error
    assert closed.output.value == INTERRUPTED_RESULT


def test_pending_calls_are_reported_while_open():
    p = Projector()
    p.extend([user("go"), calls("a", "b"), result("a")])
    assert p.pending_tool_calls == {"b": "t"}
    p.extend([result("b")])
    assert p.pending_tool_calls == {}


def test_results_without_an_open_call_and_control_events_are_not_shown():
    msgs = build_model_messages([user("go"), result("ghost"), ControlEvent(action="x")])
    assert roles(msgs) == ["user"]


def test_repeated_call_id_across_steps_is_matched_per_message():
    msgs = build_model_messages([user("go"), calls("same"), result("same"), calls("same"), result("same")])
    assert roles(msgs) == ["user", "assistant", "tool", "assistant", "tool"]


def test_context_replaced_restarts_from_its_messages():
    msgs = build_model_messages(
        [user("a"), user("b"), ContextReplacedEvent(messages=(Message.user("summary"),)), user("c")]
    )
    assert [m.text for m in msgs] == ["summary", "c"]


def test_empty_assistant_message_is_not_sent():
    assert roles(build_model_messages([user("a"), AssistantMessageEvent(content=())])) == ["user"]


def test_custom_runtime_renderer_can_hide_events():
    msgs = build_model_messages(
        [user("a"), runtime("noise"), runtime("signal", x=1)],
        render_runtime=lambda ev: None if ev.runtime_type == "noise" else Message.user(f"signal {ev.data['x']}"),
    )
    assert [m.text for m in msgs] == ["a", "signal 1"]


def test_incremental_projection_equals_the_pure_function():
    rng = random.Random(7)
    events = []
    open_ids: list[str] = []
    for i in range(400):
        r = rng.random()
        if open_ids and r < 0.5:
            events.append(result(open_ids.pop(rng.randrange(len(open_ids)))))
        elif r < 0.65:
            ids = [f"c{i}_{k}" for k in range(rng.randint(1, 3))]
            open_ids = ids[:]
            events.append(calls(*ids))
        elif r < 0.8:
            events.append(runtime(i=i))
        elif r < 0.97:
            events.append(user(f"u{i}"))
            open_ids = []
        else:
            events.append(ContextReplacedEvent(messages=(Message.user(f"s{i}"),)))
            open_ids = []
    p = Projector()
    cut = 0
    while cut < len(events):
        step = rng.randint(1, 9)
        p.catch_up(events[: cut + step])
        cut += step
        assert p.model_view() == build_model_messages(events[:cut])


def test_events_from_messages_round_trips_through_the_projection():
    history = build_model_messages([user("go"), calls("a", "b"), result("a"), result("b"), user("more")])
    assert build_model_messages(events_from_messages(history)) == history


def test_running_jobs_get_one_current_summary_that_never_becomes_history():
    p = Projector()
    p.extend(
        [
            user("start two jobs"),
            runtime("job-started", execution_id="j1", command=["make"], tool_call_id=None),
            runtime("job-started", execution_id="j2", command=["sleep", "9"], tool_call_id=None),
        ]
    )
    p.extend(
        [runtime("job-output", execution_id="j1", seq=i, stream="stdout", chunk=f"line {i}\n") for i in range(500)]
    )
    view = p.model_view()
    assert view[:-1] == p.messages  # the status is an extra message at the end only
    status = view[-1].text
    assert status.startswith("<running-jobs") and '"execution_id": "j1"' in status and '"j2"' in status
    assert "line 499" in status and "line 0\\n" not in status  # the tail, bounded
    assert all("job-output" not in m.text for m in p.messages)  # chunks are never shown one by one
    p.extend([runtime("job-finished", execution_id="j1", exit_code=0, output_tail="line 499")])
    status = p.model_view()[-1].text
    assert '"j1"' not in status and '"j2"' in status
    assert 'type="job-finished"' in p.messages[-1].text
    p.extend([calls("c1")])  # an open tool call: nothing may come between it and its result
    assert p.model_view()[-1].role == "assistant"
    p.extend([result("c1"), runtime("job-aborted", execution_id="j2", reason="stop")])
    assert p.model_view() == p.messages  # no job running: no status message
    assert build_model_messages([runtime("job-started", execution_id="x", command="c")])[-1].text.startswith(
        "<running-jobs"
    )


def test_a_user_message_arriving_while_calls_are_open_waits_for_their_real_results():
    msgs = build_model_messages([user("go"), calls("a", "b"), result("a", "A"), user("mid"), result("b", "B")])
    assert roles(msgs) == ["user", "assistant", "tool", "user"]
    assert [p.output.value for p in msgs[2].content] == ["A", "B"] and msgs[3].text == "mid"
    p = Projector()
    p.extend([user("go"), calls("a"), user("held")])
    assert roles(p.messages) == ["user", "assistant"]  # history: the call is still open
    view = p.model_view()  # a valid conversation: the call closed as interrupted, then the message
    assert roles(view) == ["user", "assistant", "tool", "user"] and view[2].content[0].output.is_error
    p.extend([result("a", "late but real")])
    assert p.model_view()[2].content[0].output.value == "late but real"
