"""Compaction: boundaries, the compactor paths, overflow and auto-compaction."""

from __future__ import annotations

import pytest

from agentkit import (
    ConfigurationError,
    ContextOverflowError,
    FunctionModel,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    Threshold,
    ToolCall,
    summarizing_compactor,
    tool,
)
from agentkit.context import check_messages, compaction_boundary
from agentkit.events import AssistantMessageEvent, CompactionEvent, ControlEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import Message, TextPart, ToolCallPart, ToolOutput


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


def answer(text: str) -> AssistantMessageEvent:
    return AssistantMessageEvent(content=(TextPart(text=text),))


def calls(*ids: str) -> AssistantMessageEvent:
    return AssistantMessageEvent(content=tuple(ToolCallPart(tool_call_id=i, tool_name="t", input={}) for i in ids))


def result(call_id: str) -> ToolResultEvent:
    return ToolResultEvent(tool_call_id=call_id, tool_name="t", output=ToolOutput.text("r"))


def texts(messages: list[Message]) -> list[str]:
    return [p.text for m in messages for p in m.content if isinstance(p, TextPart)]


def summary_of(label: str):
    seen: list[list[Message]] = []

    def compactor(messages, *, reason, cancel):
        seen.append(list(messages))
        return f"{label} ({reason}, {len(messages)} messages)"

    compactor.seen = seen  # type: ignore[attr-defined]
    return compactor


# -- boundaries ------------------------------------------------------------------------


def test_boundary_keeps_the_last_conversation_events():
    events = [user("a"), answer("b"), user("c"), answer("d"), user("e")]
    assert compaction_boundary(events, 2) == 3
    assert compaction_boundary(events, 0) == 5
    assert compaction_boundary(events, 5) is None  # nothing left to cover


def test_boundary_never_splits_a_call_from_its_results():
    events = [user("a"), calls("c1", "c2"), result("c1"), result("c2"), answer("done"), user("more")]
    # keep_last=3 would start the tail at result("c2"): it moves back to the call
    assert compaction_boundary(events, 3) == 1
    # keep_last=2 starts at the answer: the call and both results are covered together
    assert compaction_boundary(events, 2) == 4


def test_boundary_never_covers_an_open_tool_call():
    events = [user("a"), answer("b"), user("c"), calls("open"), user("pushed meanwhile")]
    assert compaction_boundary(events, 0) == 3  # the call without a result stays visible
    assert compaction_boundary(events, 1) == 3


def test_a_hidden_call_without_a_result_holds_nothing_back():
    # a call of an interrupted transaction: the model never sees it, it never gets a result
    events = [user("a"), calls("hidden"), user("b"), answer("c")]
    assert compaction_boundary(events, 1) == 1
    assert compaction_boundary(events, 1, hidden=lambda e: e is events[1]) == 3


def test_boundary_respects_pinned_events_and_the_last_compaction():
    events = [user("a"), answer("b"), ControlEvent(action="intent"), user("c"), answer("d")]
    assert compaction_boundary(events, 0, pinned=lambda e: isinstance(e, ControlEvent)) == 2
    summary = CompactionEvent(summary=(Message.user("s"),), covered_through=events[1].id)
    later = [*events, summary, user("e"), answer("f")]
    # the kept tail may not reach back past the last compaction event: it is covered
    assert compaction_boundary(later, 5) == 6
    assert compaction_boundary(later, 2) == 6
    assert compaction_boundary([ControlEvent(action="x"), user("a")], 1) is None  # only control records


# -- manual compaction -----------------------------------------------------------------


def conversation(session: Session, turns: int) -> None:
    for i in range(turns):
        session.push_user_message(f"question {i}")
        session.generate()


def test_compact_shows_the_summary_then_the_kept_tail_and_keeps_every_event():
    model = FunctionModel(lambda r: f"answer {len(r.messages)}")
    compactor = summary_of("SUMMARY")
    with Session(model) as s:
        conversation(s, 4)
        before = s.events
        event = s.compact(keep_last=2, compactor=compactor)
        assert isinstance(event, CompactionEvent) and event.reason == "manual"
        assert s.events[: len(before)] == before and s.events[-1] == event  # nothing removed
        seen = compactor.seen[0]
        assert texts(seen) == ["question 0", "answer 1", "question 1", "answer 3", "question 2", "answer 5"]
        view = s.model_messages()
        assert "SUMMARY (manual, 6 messages)" in view[0].content[0].text
        assert texts(view)[1:] == ["question 3", "answer 7"]
        s.push_user_message("next")
        s.generate()
        sent = model.requests[-1].messages
        assert len(sent) == 4 and texts(list(sent))[1:] == ["question 3", "answer 7", "next"]
        check_messages(sent)


def test_a_compactor_may_return_messages_and_a_bad_return_is_refused():
    with Session(ScriptedModel(["a1", "a2", "a3"])) as s:
        conversation(s, 3)
        replacement = [Message.user("we talked about a1 and a2"), Message.assistant("noted")]
        s.compact(keep_last=2, compactor=lambda m, *, reason, cancel: replacement)
        assert texts(s.model_messages()) == ["we talked about a1 and a2", "noted", "question 2", "a3"]
        count = len(s.events)
        with pytest.raises(ConfigurationError, match="must return the summary"):
            s.compact(keep_last=1, compactor=lambda m, *, reason, cancel: 42)
        with pytest.raises(ConfigurationError, match="empty summary"):
            s.compact(keep_last=1, compactor=lambda m, *, reason, cancel: "  ")
        with pytest.raises(ConfigurationError, match="conversation rule"):
            s.compact(keep_last=1, compactor=lambda m, *, reason, cancel: [Message.assistant("first")])
        open_call = [Message.user("x"), Message(role="assistant", content=(
            ToolCallPart(tool_call_id="c", tool_name="t", input={}),))]
        with pytest.raises(ConfigurationError, match="end with tool calls"):
            s.compact(keep_last=1, compactor=lambda m, *, reason, cancel: open_call)
        assert len(s.events) == count  # a refused summary commits nothing


def test_compact_with_nothing_to_cover_returns_none():
    with Session(ScriptedModel(["a"])) as s:
        conversation(s, 1)
        assert s.compact(keep_last=10, compactor=summary_of("x")) is None


def test_the_default_compactor_asks_the_session_model_for_a_summary():
    def reply(request):
        if request.system and "compress a conversation" in request.system:
            prompt = request.messages[0].content[0].text
            assert "question 0" in prompt and "read_file" in prompt and "notes.txt" in prompt
            return "the user asked about notes.txt"
        return ToolCall(name="read_file", input={"path": "notes.txt"}) if len(request.messages) == 1 else "done"

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return "contents of " + path

    model = FunctionModel(reply)
    with Session(model, tools=[read_file]) as s:
        conversation(s, 1)
        s.push_user_message("and now?")
        s.generate()
        event = s.compact(keep_last=2)
        assert "the user asked about notes.txt" in event.summary[0].content[0].text
        summarising = [r for r in model.requests if r.system and "compress" in r.system]
        assert len(summarising) == 1 and summarising[0].tools == ()


def test_summarizing_compactor_with_its_own_model_instructions_and_max_tokens():
    summariser = FunctionModel(lambda r: f"short ({r.settings.max_tokens})")
    compactor = summarizing_compactor(summariser, instructions="Be terse.", max_tokens=50)
    with Session(ScriptedModel(["a1", "a2", "a3"]), compactor=compactor) as s:
        conversation(s, 3)
        event = s.compact(keep_last=2)
        assert "short (50)" in event.summary[0].content[0].text
        assert summariser.requests[0].system == "Be terse."
    with pytest.raises(ConfigurationError, match="ChatModel"):
        summarizing_compactor(42)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        summarizing_compactor(summariser, max_tokens=0)


def test_compaction_survives_reopening_from_the_store():
    store = InMemoryEventStore()
    with Session(ScriptedModel(["a1", "a2", "a3"]), store=store, session_id="s1") as s:
        conversation(s, 3)
        s.compact(keep_last=2, compactor=summary_of("S"))
        view = s.model_messages()
    with Session.open("s1", store=store) as again:
        assert again.model_messages() == view


# -- overflow and auto-compaction ------------------------------------------------------


def test_overflow_compacts_and_retries_within_the_retry_limit():
    limit = 6  # the "provider" refuses requests with more messages than this

    def reply(request):
        if len(request.messages) > limit:
            raise ContextOverflowError("prompt is too long")
        return f"answer {len(request.messages)}"

    model = FunctionModel(reply)
    compactor = summary_of("S")
    with Session(model, compactor=compactor) as s:
        conversation(s, 3)  # 6 messages
        s.push_user_message("one more")
        result = s.generate()
        assert result.text.startswith("answer")
        compactions = [e for e in s.events if isinstance(e, CompactionEvent)]
        assert [c.reason for c in compactions] == ["context-overflow"]
        assert len(model.requests[-1].messages) <= limit
        # the retry limit holds: a provider that always overflows ends the generation
        always = FunctionModel(lambda r: (_ for _ in ()).throw(ContextOverflowError("too long")))
        s.push_user_message("again")
        with pytest.raises(ContextOverflowError):
            s.generate(model=always, max_context_overflow_retries=2)
        later = [e for e in s.events if isinstance(e, CompactionEvent)]
        assert 1 <= len(later) - 1 <= 2


def test_overflow_without_a_compactor_still_raises():
    model = FunctionModel(lambda r: (_ for _ in ()).throw(ContextOverflowError("too long")))
    with Session(model) as s:
        s.push_user_message("hi")
        with pytest.raises(ContextOverflowError):
            s.generate()
        assert not any(isinstance(e, CompactionEvent) for e in s.events)


def test_auto_compact_runs_before_a_request_past_the_threshold():
    model = FunctionModel(lambda r: "x" * 400)
    compactor = summary_of("S")
    with Session(model, compactor=compactor, auto_compact=Threshold(tokens=300, keep_last=2)) as s:
        conversation(s, 6)
        compactions = [e for e in s.events if isinstance(e, CompactionEvent)]
        assert compactions and all(c.reason == "auto" for c in compactions)
        # every request was compacted down when it would have passed the threshold
        from agentkit.context import estimate_tokens

        assert all(estimate_tokens(list(r.messages)) < 700 for r in model.requests)
    with pytest.raises(ConfigurationError, match="Threshold tokens"):
        Threshold(tokens=0)
    with pytest.raises(ConfigurationError, match="auto_compact must be a Threshold"):
        Session(model, auto_compact=1000)


def test_events_pushed_while_the_compactor_runs_stay_visible():
    with Session(ScriptedModel(["a1", "a2", "a3"])) as s:
        conversation(s, 3)

        def slow_compactor(messages, *, reason, cancel):
            s.push_user_message("pushed while summarising")  # another thread would do this
            return "summary"

        s.compact(keep_last=0, compactor=slow_compactor)
        view = s.model_messages()
        assert "summary" in view[0].content[0].text
        assert texts(view)[1:] == ["pushed while summarising"]


def test_usage_reasoning_tokens_add_up_and_round_trip():
    from agentkit import Usage

    total = Usage(output_tokens=10, reasoning_tokens=4) + Usage(output_tokens=5, reasoning_tokens=1)
    assert total.reasoning_tokens == 5
    assert Usage.from_dict(total.to_dict()) == total
    assert "reasoning_tokens" not in Usage(output_tokens=3).to_dict()  # older records stay as they were


def test_an_unresolved_execution_intent_is_covered_and_carried_not_pinned(caplog):
    from agentkit.transactions._ledger import INTENT

    # what a crash inside a tool call leaves: the intent, then (on reopen) the call
    # closed with an "interrupted" result that does not settle the intent
    intent = ControlEvent(action=INTENT, data={"tool_call_id": "c1", "tool_name": "t", "input": {}})
    log = [user("run it"), calls("c1"), intent, result("c1")]
    for i in range(3):
        log += [user(f"q{i}"), answer(f"a{i}")]
    store = InMemoryEventStore()
    store.append("i", [e.with_seq(n) for n, e in enumerate(log, start=1)], expected_revision=0)
    compactor = summary_of("S")
    model = ScriptedModel(["a3", "a4"])
    with caplog.at_level("WARNING", logger="agentkit"), Session.open("i", store=store, model=model) as s:
        assert [u.intent_id for u in s.uncertain_tool_executions()] == [intent.id]
        event = s.compact(keep_last=0, compactor=compactor)
        # everything is covered; the compactor summarised all but the uncertain call
        assert event.covered == len(log) and event.covered_through == log[-1].id
        assert texts(compactor.seen[0]) == ["run it", "q0", "a0", "q1", "a1", "q2", "a2"]
        assert not any(isinstance(p, ToolCallPart) for m in compactor.seen[0] for p in m.content)
        # the summary ends with the call and its result: the model still sees it
        view = s.model_messages()
        assert [m.role for m in view] == ["user", "assistant", "tool"]
        assert view[1].tool_calls[0].tool_call_id == "c1" and view[2].content[0].tool_call_id == "c1"
        # a copy of the intent stands for it, under the same id, and it is reported once
        carried = [e for e in s.events[len(log) + 1:] if isinstance(e, ControlEvent)]
        assert [(e.action, e.data.get("intent_id")) for e in carried] == [
            (INTENT, intent.id), ("retention-held", intent.id)]
        assert carried[0].data["carried_by"] == event.id
        assert carried[1].data == {"tool_call_id": "c1", "intent_id": intent.id}
        assert [u.intent_id for u in s.uncertain_tool_executions()] == [intent.id]
        # compacting again carries it again, without a second report
        s.push_user_message("q3")
        s.generate()
        again = s.compact(keep_last=0, compactor=compactor)
        assert again is not None and [m.role for m in s.model_messages()] == ["user", "assistant", "tool"]
        assert sum(isinstance(e, ControlEvent) and e.action == "retention-held" for e in s.events) == 1
        warnings = [r for r in caplog.records if "'c1'" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
        # once reconciled it is covered like any other call
        s.reconcile_tool_execution(intent.id, "not-executed")
        assert s.uncertain_tool_executions() == []
        s.push_user_message("q4")
        s.generate()
        s.compact(keep_last=0, compactor=compactor)
        assert [m.role for m in s.model_messages()] == ["user"]  # only the summary
        assert not any(isinstance(p, ToolCallPart) for m in s.model_messages() for p in m.content)
