"""The default projection: events -> model messages."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agentkit import (
    AssistantMessageEvent,
    ConfigurationError,
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
from agentkit.messages import ToolResultPart
from agentkit.projection import INTERRUPTED_RESULT, render_runtime_event


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


def check_conversation(events, view, *, complete: bool):
    """Independent invariants of a projected view (not the projector's own code):

    * every assistant message with tool calls is followed at once by one tool message
      answering exactly its calls, and every tool message follows one (``complete=False``:
      the last assistant's calls may still be open when nothing came after them);
    * the user, runtime and assistant messages are exactly those of the events after the
      last context replacement (after its own messages), each once, in commit order;
    * each call's answer is the first real result committed for it before the next
      assistant message, else the "interrupted" error; later or unmatched results are dropped;
    * a tool message lists its results in the order the model wrote the calls (a repeated
      id: its real results in commit order, then its "interrupted" ones).
    """
    last_cr = max((i for i, e in enumerate(events) if isinstance(e, ContextReplacedEvent)), default=-1)
    base = list(events[last_cr].messages) if last_cr >= 0 else []
    later = events[last_cr + 1 :]
    expected_other = [m for m in base if m.role != "tool"]
    for ev in later:
        if isinstance(ev, UserMessageEvent):
            expected_other.append(Message(role="user", content=ev.content))
        elif isinstance(ev, RuntimeEvent):
            expected_other.append(render_runtime_event(ev))
        elif isinstance(ev, AssistantMessageEvent) and ev.content:
            expected_other.append(Message(role="assistant", content=ev.content))
    assert [m for m in view if m.role != "tool"] == expected_other

    # the answers each step's calls should get, from the events alone:
    # [ids, results, closed by a later assistant message, must be answered in the view]
    steps: list[list] = []
    if base and base[-1].role == "assistant" and base[-1].tool_calls:
        steps.append([[c.tool_call_id for c in base[-1].tool_calls], [], False, False])
    base_steps = sum(1 for m in base if m.role == "assistant" and m.tool_calls) - len(steps)
    for ev in later:
        if isinstance(ev, AssistantMessageEvent):  # even an empty one closes the open calls
            for step in steps:
                step[2] = step[3] = True
            if ev.tool_calls:
                steps.append([[c.tool_call_id for c in ev.tool_calls], [], False, False])
        elif isinstance(ev, ToolResultEvent) and steps and not steps[-1][2]:
            ids, got = steps[-1][:2]
            if Counter(i for i, _ in got)[ev.tool_call_id] < ids.count(ev.tool_call_id):
                got.append((ev.tool_call_id, ev.output))
        elif isinstance(ev, (UserMessageEvent, RuntimeEvent)) and steps:
            steps[-1][3] = True  # the view must close them before showing this (results may still come)
    answered = [(i, view[i + 1] if i + 1 < len(view) else None)
                for i, m in enumerate(view) if m.role == "assistant" and m.tool_calls][base_steps:]
    assert len(answered) == len(steps)
    for (ids, got, _, settled), (i, tool_msg) in zip(steps, answered, strict=True):
        all_in = Counter(i for i, _ in got) == Counter(ids)
        def in_model_order(answers, ids=ids):
            return sorted(answers, key=lambda a: ids.index(a[0]))  # stable: commit order within an id

        if not settled and not all_in and not complete:
            parts = tool_msg.content if tool_msg is not None and tool_msg.role == "tool" else ()
            # still open: real results only
            assert [(p.tool_call_id, p.output) for p in parts] == in_model_order(got)
            continue
        assert tool_msg is not None and tool_msg.role == "tool", f"calls at message {i} are not answered"
        parts = [(p.tool_call_id, p.output) for p in tool_msg.content]
        missing = Counter(ids) - Counter(i for i, _ in got)
        interrupted = [(cid, ToolOutput.error(INTERRUPTED_RESULT)) for cid in missing.elements()]
        assert parts == in_model_order(got + interrupted)
    for i, m in enumerate(view):
        if m.role == "tool":
            assert i > 0 and view[i - 1].role == "assistant" and view[i - 1].tool_calls, i


def random_events(rng: random.Random, n: int) -> list:
    """Tool calls (ids sometimes repeated), results in any order, late, duplicated or for
    no call, user and runtime messages arriving while calls are open, empty assistant
    messages and context replacements (some ending in open calls)."""
    events = []
    open_ids: list[str] = []
    recent: list[str] = []
    for i in range(n):
        r = rng.random()
        if open_ids and r < 0.4:
            events.append(result(open_ids.pop(rng.randrange(len(open_ids))), f"r{i}"))
        elif r < 0.45 and recent:
            events.append(result(rng.choice(recent), f"late{i}"))  # duplicate, late or closed
        elif r < 0.47:
            events.append(result(f"ghost{i}"))
        elif r < 0.62:
            ids = [rng.choice([f"c{i}_{k}", "same"]) for k in range(rng.randint(1, 3))]
            open_ids, recent = ids[:], ids[:]
            events.append(calls(*ids))
        elif r < 0.65:
            events.append(AssistantMessageEvent(content=(TextPart(text=f"a{i}"),)))
            open_ids = []
        elif r < 0.67:
            events.append(AssistantMessageEvent(content=()))
        elif r < 0.78:
            events.append(runtime("note", i=i))
        elif r < 0.95:
            events.append(user(f"u{i}"))
        elif r < 0.975:
            events.append(ContextReplacedEvent(messages=(Message.user(f"s{i}"),)))
            open_ids = []
        else:
            ids = [f"k{i}"]
            pending = calls(*ids)
            events.append(ContextReplacedEvent(messages=(Message.user(f"s{i}"), Message(role="assistant",
                                                                                  content=pending.content))))
            open_ids, recent = ids[:], ids[:]
    return events


def test_random_histories_keep_the_invariants_incrementally_and_in_one_pass():
    for seed in range(6):
        rng = random.Random(seed)
        events = random_events(rng, 300)
        p = Projector()
        cut = 0
        while cut < len(events):
            cut += rng.randint(1, 9)
            p.catch_up(events[:cut])
            assert p.count == min(cut, len(events))
            view = p.model_view()
            check_conversation(events[:cut], view, complete=False)
            assert view == build_model_messages(events[:cut])
        # a new assistant message closes every open call: the whole history is then complete
        closed = [*events, AssistantMessageEvent(content=(TextPart(text="end"),))]
        check_conversation(closed, build_model_messages(closed), complete=True)


def test_the_invariant_checker_sees_a_broken_projection():
    """The checker itself catches each kind of wrong answer."""
    events = [user("go"), calls("a"), result("a", "A"), user("next")]
    good = build_model_messages(events)
    check_conversation(events, good, complete=True)
    broken = [
        good[:2] + good[3:],  # results missing
        [good[0], good[2], good[1], good[3]],  # results before their call
        good + [good[3]],  # a user message twice
        good[:3],  # a user message lost
        [good[0], good[1], Message(role="tool", content=(ToolResultPart(
            tool_call_id="a", tool_name="t", output=ToolOutput.error(INTERRUPTED_RESULT)),)), good[3]],
    ]
    for view in broken:
        with pytest.raises(AssertionError):
            check_conversation(events, view, complete=True)


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


def test_a_new_assistant_message_closes_unanswered_calls_for_good():
    events = [user("go"), calls("a", "b"), result("a", "A"), AssistantMessageEvent(content=(TextPart(text="hm"),))]
    msgs = build_model_messages(events)
    assert roles(msgs) == ["user", "assistant", "tool", "assistant"]
    assert [(p.tool_call_id, p.output) for p in msgs[2].content] == [
        ("a", ToolOutput.text("A")), ("b", ToolOutput.error(INTERRUPTED_RESULT))]
    # a result arriving after that is for no open call: dropped, the history stays valid
    assert build_model_messages([*events, result("b", "too late")]) == msgs
    # no result at all before the next step: a tool message of its own
    msgs = build_model_messages([user("go"), calls("a"), calls("c"), result("c")])
    assert roles(msgs) == ["user", "assistant", "tool", "assistant", "tool"]
    assert msgs[2].content[0].output.value == INTERRUPTED_RESULT and msgs[4].content[0].output.value == "ok"
    p = Projector()
    p.extend([user("go"), calls("a"), AssistantMessageEvent(content=())])  # an empty message closes them too
    assert p.pending_tool_calls == {} and roles(p.model_view()) == ["user", "assistant", "tool"]


def test_a_context_replacement_ending_in_a_tool_call_takes_its_result_later():
    pending = calls("k1", "k2")
    replaced = ContextReplacedEvent(
        messages=(Message.user("summary"), Message(role="assistant", content=pending.content))
    )
    p = Projector()
    p.extend([user("old"), calls("x"), replaced])
    assert p.pending_tool_calls == {"k1": "t", "k2": "t"}
    p.extend([result("x", "stale"), result("k2", "K2"), user("meanwhile")])
    view = p.model_view()  # k1 still open: closed as interrupted in the view, before the held-back message
    assert roles(view) == ["user", "assistant", "tool", "user"]
    # results in the order the model wrote the calls, whatever order they came in
    assert [(q.tool_call_id, q.output.value) for q in view[2].content] == [("k1", INTERRUPTED_RESULT), ("k2", "K2")]
    p.extend([result("k1", "K1")])
    msgs = p.model_view()
    assert [(q.tool_call_id, q.output.value) for q in msgs[2].content] == [("k1", "K1"), ("k2", "K2")]
    assert msgs[3].text == "meanwhile" and p.messages == msgs


def test_a_replacement_restarts_open_calls_and_held_back_messages():
    p = Projector()
    p.extend([user("go"), calls("a"), user("held"), ContextReplacedEvent(messages=(Message.user("fresh"),))])
    assert p.pending_tool_calls == {} and [m.text for m in p.model_view()] == ["fresh"]
    p.extend([result("a"), user("next")])
    assert [m.text for m in p.model_view()] == ["fresh", "next"]


def test_a_call_id_used_twice_in_one_message_takes_two_results():
    msgs = build_model_messages([user("go"), calls("d", "d"), result("d", "1"), result("d", "2"), result("d", "3")])
    assert [q.output.value for q in msgs[2].content] == ["1", "2"]
    p = Projector()
    p.extend([user("go"), calls("d", "d"), result("d", "1")])
    assert p.pending_tool_calls == {"d": "t"}
    p.extend([user("later")])
    assert [q.output.value for q in p.model_view()[2].content] == ["1", INTERRUPTED_RESULT]


def test_open_calls_without_held_back_messages_are_shown_as_they_are():
    p = Projector()
    p.extend([user("go"), calls("a", "b"), result("a")])
    assert p.model_view() == p.messages and roles(p.messages) == ["user", "assistant", "tool"]
    p.extend([runtime("note", n=1)])
    view = p.model_view()
    assert roles(view) == ["user", "assistant", "tool", "user"] and len(view[2].content) == 2
    assert view[3].text.startswith('<runtime-event type="note">')


def test_count_catch_up_and_messages_copy():
    events = [user("a"), user("b"), user("c")]
    p = Projector()
    p.catch_up(events[:2])
    assert p.count == 2
    p.catch_up(events[:1])  # nothing new
    p.catch_up(events[:2])
    assert p.count == 2 and [m.text for m in p.messages] == ["a", "b"]
    p.catch_up(events)
    assert p.count == 3
    copy = p.messages
    copy.clear()
    assert len(p.messages) == 3
    view = p.model_view()
    view.clear()
    assert len(p.model_view()) == 3


def test_default_rendering_of_runtime_events():
    ev = runtime("timer-fired", when="späť", b=2, a=1)
    assert render_runtime_event(ev) == Message.user('<runtime-event type="timer-fired">{"a": 1, "b": 2, "when": "späť"}'
                                                    "</runtime-event>")
    assert render_runtime_event(runtime("job-output", execution_id="j", chunk="x")) is None
    assert render_runtime_event(runtime("job-started", execution_id="j", tool_call_id="c1")) is None
    shown = render_runtime_event(runtime("job-started", execution_id="j", tool_call_id=None))
    assert shown is not None and 'type="job-started"' in shown.text


def test_job_status_is_left_out_on_request_and_with_a_custom_renderer():
    started = runtime("job-started", execution_id="j1", command="make", tool_call_id=None)
    p = Projector()
    p.extend([user("go"), started])
    assert p.model_view()[-1].text.startswith("<running-jobs")
    assert p.model_view(job_status=False) == p.messages
    custom = Projector(render_runtime=lambda ev: Message.user(ev.runtime_type))
    custom.extend([user("go"), started])
    assert custom.model_view() == custom.messages and custom.messages[-1].text == "job-started"


def test_events_from_messages_refuses_what_is_not_an_event():
    with pytest.raises(ConfigurationError, match="messages must be agentkit Message objects, not dict"):
        events_from_messages([{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigurationError, match="a system message cannot be an event; pass it as system= instead"):
        events_from_messages([Message.user("hi"), Message(role="system", content=(TextPart(text="be brief"),))])
    events = events_from_messages([Message.user("hi"), Message.assistant("hello")])
    assert [type(e) for e in events] == [UserMessageEvent, AssistantMessageEvent]
    assert events_from_messages([]) == []


def test_an_empty_replacement_leaves_an_empty_view():
    p = Projector()
    p.extend([user("a"), calls("x"), ContextReplacedEvent(messages=())])
    assert p.model_view() == [] and p.pending_tool_calls == {}
    p.extend([user("b")])
    assert [m.text for m in p.model_view()] == ["b"]


def test_answered_calls_are_forgotten_so_a_long_session_does_not_grow():
    p = Projector()
    for step in range(50):
        p.extend([calls(f"a{step}", f"b{step}"), result(f"a{step}"), result(f"b{step}")])
    p.extend([calls("open"), user("held"), AssistantMessageEvent(content=(TextPart(text="next"),))])
    p.extend([calls("r1"), ContextReplacedEvent(messages=(Message.user("s"),))])
    assert p._pending_names == {} and p.pending_tool_calls == {}
    p.extend([calls("late"), result("late")])
    assert p._pending_names == {}
