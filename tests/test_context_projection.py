"""The default projection: events -> model messages."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agentkit import ConfigurationError
from agentkit.context import (
    INTERRUPTED_RESULT,
    Projector,
    build_model_messages,
    events_from_messages,
    render_runtime_event,
)
from agentkit.events import (
    AssistantMessageEvent,
    CompactionEvent,
    ContextReplacedEvent,
    ControlEvent,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from agentkit.messages import Message, TextPart, ToolCallPart, ToolOutput, ToolResultPart


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
    assert len(p._since) == 1  # what a compaction could replay starts at the replacement
    p.extend([calls("late"), result("late")])
    assert p._pending_names == {}


# -- commit numbers, follow-ups and messages committed while the model answered --------


def at(seq, event):
    """``event`` as committed with number ``seq``."""
    return event.with_seq(seq)


def answer(text, request_seq=None, *ids):
    content = (TextPart(text=text), *(ToolCallPart(tool_call_id=i, tool_name="t", input={}) for i in ids))
    return AssistantMessageEvent(content=content, request_seq=request_seq)


def follow_up(text):
    return UserMessageEvent(content=(TextPart(text=text),), follow_up=True)


def test_last_seq_is_that_of_the_last_committed_event():
    p = Projector()
    assert p.last_seq == 0 and p.count == 0
    p.extend([at(1, user("a")), at(2, user("b"))])
    assert p.last_seq == 2
    p.extend([user("not committed")])  # seq 0: applied, but it has no commit number
    assert p.last_seq == 2 and p.count == 3


def test_a_follow_up_waits_until_the_next_answer_and_nothing_else_is_one():
    p = Projector()
    assert p.follow_up_waiting is False
    p.extend([user("go"), runtime("note"), answer("hi")])
    assert p.follow_up_waiting is False  # a user message and a runtime event are not follow-ups
    p.extend([runtime("note")])
    assert p.follow_up_waiting is False  # a runtime event after the answer is not one either
    p.extend([follow_up("and then?")])
    assert p.follow_up_waiting is True
    p.extend([runtime("note")])
    assert p.follow_up_waiting is True
    p.extend([answer("then this")])
    assert p.follow_up_waiting is False  # answered
    p.extend([follow_up("more"), ContextReplacedEvent(messages=(Message.user("s"),))])
    assert p.follow_up_waiting is False  # a replacement starts over
    # a follow-up held back behind an open call is waiting once it is shown
    p.extend([calls("a"), follow_up("held")])
    assert p.follow_up_waiting is False
    p.extend([result("a")])
    assert p.follow_up_waiting is True and p.messages[-1].text == "held"
    p.extend([answer("done")])
    assert p.follow_up_waiting is False


def test_a_message_committed_while_the_model_answered_comes_after_the_answer():
    # "late" (seq 3) was committed after the request for the answer was built (from seq 2)
    events = [at(1, user("go")), at(2, runtime("note")), at(3, user("late")), at(4, answer("hi", 2))]
    msgs = build_model_messages(events)
    assert [m.text for m in msgs] == ["go", '<runtime-event type="note">{}</runtime-event>', "hi", "late"]
    # seen by the model (request_seq 3): it stays before the answer
    assert [m.text for m in build_model_messages([*events[:3], at(4, answer("hi", 3))])] == [
        "go", '<runtime-event type="note">{}</runtime-event>', "late", "hi"]
    # no request_seq (an answer from before it was recorded): nothing moves
    assert [m.text for m in build_model_messages([*events[:3], at(4, answer("hi"))])][-1] == "hi"
    # two late messages keep their order; a late follow-up is still waiting after the answer
    p = Projector()
    p.extend([at(1, user("go")), at(2, user("l1")), at(3, follow_up("l2")), at(4, answer("hi", 1))])
    assert [m.text for m in p.messages] == ["go", "hi", "l1", "l2"] and p.follow_up_waiting
    # only messages since the last answer can be late: the earlier answer's are settled
    p.extend([at(5, answer("again", 3))])
    assert [m.text for m in p.messages] == ["go", "hi", "l1", "l2", "again"] and not p.follow_up_waiting


def test_a_replacement_is_never_rearranged_by_the_answer_after_it():
    p = Projector()
    p.extend([at(1, user("go")), at(2, user("late"))])
    # a replacement that keeps the very message objects (e.g. a trimmed history)
    p.extend([at(3, ContextReplacedEvent(messages=tuple(p.messages))), at(4, answer("hi", 1))])
    assert [m.text for m in p.messages] == ["go", "late", "hi"]


def test_a_message_held_behind_tool_calls_can_still_be_late_for_the_next_answer():
    p = Projector()
    p.extend([at(1, user("go")), at(2, calls("a")), at(3, user("held")), at(4, result("a")),
              at(5, answer("hi", 2))])
    # "held" (seq 3) was shown after the result, but the answer's request was built at seq 2
    assert [m.role for m in p.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert p.messages[-1].text == "held"


def test_a_late_message_behind_the_answers_own_calls_waits_for_their_results():
    p = Projector()
    p.extend([at(1, user("go")), at(2, user("late")), at(3, answer("calling", 1, "c"))])
    assert roles(p.messages) == ["user", "assistant"] and p.pending_tool_calls == {"c": "t"}
    assert roles(p.model_view()) == ["user", "assistant", "tool", "user"]
    p.extend([at(4, result("c"))])
    assert [m.text for m in p.messages][-1] == "late" and roles(p.messages) == ["user", "assistant", "tool", "user"]


# -- compaction ------------------------------------------------------------------------


def compaction(covered_through, text="summary"):
    return CompactionEvent(summary=(Message.user(text),), covered_through=covered_through)


def test_a_compaction_shows_its_summary_then_the_kept_tail():
    history = [user("u0"), answer("a0"), user("u1"), answer("a1"), user("u2"), answer("a2")]
    for i, covered in enumerate(history):
        msgs = build_model_messages([*history, compaction(covered.id)])
        assert [m.text for m in msgs] == ["summary", *[m.content[0].text for m in history[i + 1:]]], i


def test_a_compaction_whose_covered_events_were_archived_keeps_the_whole_active_log():
    tail = [user("kept"), answer("too")]
    msgs = build_model_messages([*tail, compaction("an-archived-event-id"), user("after")])
    assert [m.text for m in msgs] == ["summary", "kept", "too", "after"]


def test_a_compaction_after_a_replacement_replays_only_what_came_since():
    replaced = ContextReplacedEvent(messages=(Message.user("fresh"),))
    events = [user("before the replacement"), replaced, user("u1"), answer("a1")]
    assert [m.text for m in build_model_messages([*events, compaction(replaced.id)])] == ["summary", "u1", "a1"]
    # covering through an event before the replacement: the replacement is in the kept tail
    assert [m.text for m in build_model_messages([*events, compaction(events[0].id)])] == ["fresh", "u1", "a1"]
    # a second compaction replays from the first one on, not from the replacement
    first = compaction(events[2].id, "s1")
    msgs = build_model_messages([*events, first, user("u2"), compaction(first.id, "s2")])
    assert [m.text for m in msgs] == ["s2", "u2"]


def test_a_compacted_tail_with_open_calls_and_held_messages_is_replayed_as_it_was():
    history = [user("u0"), calls("a"), user("held"), result("a", "A")]
    msgs = build_model_messages([*history, compaction(history[0].id)])
    assert roles(msgs) == ["user", "assistant", "tool", "user"]
    assert msgs[0].text == "summary" and msgs[2].content[0].output.value == "A" and msgs[3].text == "held"


def test_a_job_seen_before_a_compaction_is_not_counted_twice():
    started = runtime("job-started", execution_id="j", command="make", tool_call_id=None)
    events = [user("go"), started, runtime("job-output", execution_id="j", seq=0, stream="stdout", chunk="AB")]
    p = Projector()
    p.extend([*events, compaction(started.id)])
    status = p.model_view()[-1].text
    assert '"output_chars": 2' in status and '"output_tail": "AB"' in status


# -- transactions: hidden generations and the checkpoint copy --------------------------


def tagged(gid, event):
    return event.__class__(**{**event.__dict__, "generation_id": gid})


def test_a_compaction_as_the_first_event_shows_its_summary():
    # the log before it was archived: the projector has nothing it could keep
    assert [m.text for m in build_model_messages([compaction("archived")])] == ["summary"]


# -- an input guardrail's trip ----------------------------------------------------------


def trip(kind="input"):
    return ControlEvent(action="guardrail-tripped", data={"guardrail": "g", "kind": kind, "output": True})


def test_an_input_trip_leaves_out_the_user_messages_it_refused():
    events = [user("hi"), answer("hello"), user("bad"), runtime("timer-fired", n=1), user("worse"), trip(),
              user("ok")]
    shown = [m.text for m in build_model_messages(events)]
    assert shown == ["hi", "hello", '<runtime-event type="timer-fired">{"n": 1}</runtime-event>', "ok"]
    # a message committed while the model answered (after its request) was refused with the turn's input
    answered = [at(1, user("hi")), at(2, user("sent while the model answered")), at(3, answer("hello", 1)),
                at(4, trip())]
    assert [m.text for m in build_model_messages(answered)] == ["hi", "hello"]
    # an output trip takes nothing out
    assert [m.text for m in build_model_messages([user("hi"), answer("hello"), trip("output")])] == ["hi", "hello"]


def test_an_input_trip_takes_out_messages_held_behind_open_calls_and_nothing_else():
    p = Projector()
    p.extend([user("go"), calls("a"), user("held and refused"), runtime("note"), trip()])
    assert [m.role for m in p.model_view()] == ["user", "assistant", "tool", "user"]
    assert "runtime-event" in p.model_view()[-1].text
    p.extend([result("a")])
    assert roles(p.messages) == ["user", "assistant", "tool", "user"] and "runtime-event" in p.messages[-1].text


def test_a_refused_follow_up_is_no_longer_waiting_and_an_answered_one_is_not_counted_again():
    p = Projector()
    p.extend([runtime("note"), follow_up("refused"), trip()])
    assert p.follow_up_waiting is False  # the runtime context left is no follow-up
    assert [m.text for m in p.messages] == ['<runtime-event type="note">{}</runtime-event>']
    q = Projector()
    q.extend([follow_up("answered"), answer("hi"), user("refused"), trip()])
    assert q.follow_up_waiting is False and [m.text for m in q.messages] == ["answered", "hi"]
    q.extend([follow_up("next")])
    assert q.follow_up_waiting is True


def test_events_of_hidden_generations_are_left_out_but_counted():
    hidden = {"g1"}
    p = Projector(hidden=lambda gid: gid in hidden)
    p.extend([at(1, user("go")), at(2, tagged("g1", answer("candidate"))), at(3, tagged("g2", answer("shown")))])
    assert [m.text for m in p.messages] == ["go", "shown"]
    assert p.count == 3 and p.last_seq == 3  # a hidden event is still one the projector has seen
    # without a predicate every event is shown
    q = Projector()
    q.extend([user("go"), tagged("g1", answer("candidate"))])
    assert [m.text for m in q.messages] == ["go", "candidate"]


def test_a_hidden_event_is_not_replayed_by_a_compaction():
    hidden = {"g"}
    first = user("u0")
    p = Projector(hidden=lambda gid: gid in hidden)
    p.extend([first, tagged("g", user("rejected")), user("kept"), compaction(first.id)])
    assert [m.text for m in p.messages] == ["summary", "kept"]


def rich_events():
    """A history that leaves every part of the state in use: messages, open calls, held
    messages, late messages, a follow-up, a running job and events a compaction replays."""
    return [
        at(1, user("go")),
        at(2, runtime("job-started", execution_id="j", command="make", tool_call_id=None)),
        at(3, answer("calling", 2, "a", "b")),
        at(4, result("b", "B")),
        at(5, follow_up("held")),
    ]


def rest_events(first):
    return [
        at(6, runtime("job-output", execution_id="j", seq=0, stream="stdout", chunk="out")),
        at(7, result("a", "A")),
        at(8, user("late")),
        at(9, answer("after", 7)),
        at(10, compaction(first.id)),
        at(11, calls("c")),
        at(12, result("c")),
    ]


def state(p):
    return (p.messages, p.model_view(), p.model_view(job_status=False), p.pending_tool_calls, p.count, p.last_seq,
            p.follow_up_waiting)


@pytest.mark.parametrize("render", [None, lambda ev: Message.user(f"rt {ev.runtime_type}")])
def test_a_copy_goes_on_exactly_as_the_original_would_and_apart_from_it(render):
    head = rich_events()
    rest = rest_events(head[0])
    p = Projector(render)
    p.extend(head)
    before = state(p)
    copy = p.copy()
    assert state(copy) == before
    copy.extend(rest)  # the copy goes on ...
    assert state(p) == before  # ... and the original does not move
    whole = Projector(render)
    whole.extend([*head, *rest])
    assert state(copy) == state(whole)
    p.extend(rest)  # and the original, going on by itself, is unchanged by the copy
    assert state(p) == state(whole)
    for cut in range(len(head) + len(rest) + 1):  # a copy at any point, even of a fresh one
        events = [*head, *rest]
        q = Projector(render)
        q.extend(events[:cut])
        c = q.copy()
        c.extend(events[cut:])
        assert state(c) == state(whole), cut


def test_a_copy_keeps_the_hidden_predicate_and_serves_as_the_checkpoint_of_a_transaction():
    """What the event log does (agentkit/session/_eventlog.py, _reproject_from): a copy taken
    before a transaction's first event, extended with the events from there once what
    is hidden changed, equals a projection of the whole log from scratch."""
    hidden = {"g"}

    def is_hidden(gid):
        return gid in hidden

    before = [at(1, user("go")), at(2, answer("hi"))]
    txn = [at(3, tagged("g", user("inside"))), at(4, tagged("g", answer("candidate", 3))), at(5, user("outside"))]
    p = Projector(hidden=is_hidden)
    p.extend(before)
    checkpoint = p.copy()
    p.extend(txn)
    assert [m.text for m in p.messages] == ["go", "hi", "outside"]
    hidden.clear()  # the host accepted the transaction
    rebuilt = checkpoint.copy()
    rebuilt.extend([*before, *txn][checkpoint.count:])
    scratch = Projector(hidden=is_hidden)
    scratch.extend([*before, *txn])
    assert state(rebuilt) == state(scratch)
    assert [m.text for m in rebuilt.messages] == ["go", "hi", "inside", "candidate", "outside"]
    hidden.add("g")  # the copy asks the same predicate: rejected again, hidden again
    again = checkpoint.copy()
    again.extend(txn)
    assert [m.text for m in again.messages] == ["go", "hi", "outside"]
