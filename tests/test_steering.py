"""Steering and follow-up: messages for a running generation."""

from __future__ import annotations

import threading

from agentkit import FileEventStore, FunctionModel, Session, ToolCall, tool
from agentkit.events import UserMessageEvent


def held_model(texts_seen: list[list[str]], hold_on: int, started: threading.Event, release: threading.Event,
               answers):
    """A model that records what it saw and waits for ``release`` on request ``hold_on``."""

    def reply(request):
        texts_seen.append([m.text for m in request.messages if m.role != "tool"])
        n = len(texts_seen)
        if n == hold_on:
            started.set()
            assert release.wait(20)
        return answers(n, request)

    return FunctionModel(reply)


def test_a_follow_up_pushed_during_the_final_inference_is_answered_in_the_same_generation():
    seen: list[list[str]] = []
    started, release = threading.Event(), threading.Event()
    model = held_model(seen, 1, started, release, lambda n, r: f"answer {n}")
    with Session(model) as s:
        s.push_user_message("first question")
        box = []
        t = threading.Thread(target=lambda: box.append(s.generate()))
        t.start()
        assert started.wait(20)
        s.follow_up("and a follow-up")
        release.set()
        t.join(20)
        result = box[0]
        assert result.text == "answer 2" and len(result.steps) == 2
        # the follow-up is shown after the answer it follows, then answered
        assert seen[1] == ["first question", "answer 1", "and a follow-up"]
        assert [m.text for m in s.model_messages()] == ["first question", "answer 1", "and a follow-up", "answer 2"]


def test_a_plain_message_pushed_during_the_final_inference_waits_for_the_next_generation():
    seen: list[list[str]] = []
    started, release = threading.Event(), threading.Event()
    model = held_model(seen, 1, started, release, lambda n, r: f"answer {n}")
    with Session(model) as s:
        s.push_user_message("q")
        t = threading.Thread(target=s.generate)
        t.start()
        assert started.wait(20)
        s.steer("later")
        release.set()
        t.join(20)
        assert len(seen) == 1  # not answered by this generation
        s.generate()
        assert seen[1] == ["q", "answer 1", "later"]


def test_steer_while_tools_run_is_read_at_the_next_step_after_the_results():
    entered, leave = threading.Event(), threading.Event()

    @tool
    def work() -> str:
        """Do some work."""
        entered.set()
        assert leave.wait(20)
        return "worked"

    seen: list[list[tuple[str, str]]] = []

    def reply(request):
        seen.append([(m.role, m.text) for m in request.messages])
        return ToolCall("work") if len(seen) == 1 else "done"

    with Session(FunctionModel(reply), tools=[work]) as s:
        s.push_user_message("go")
        t = threading.Thread(target=s.generate)
        t.start()
        assert entered.wait(20)
        s.steer("use the fast path")
        leave.set()
        t.join(20)
        roles = [r for r, _ in seen[1]]
        assert roles == ["user", "assistant", "tool", "user"] and seen[1][-1][1] == "use the fast path"
        assert len(seen) == 2  # one generation, two steps


def test_steer_and_follow_up_with_no_generation_running_are_read_by_the_next_one():
    seen: list[list[str]] = []
    model = FunctionModel(lambda r: (seen.append([m.text for m in r.messages]), f"a{len(seen)}")[1])
    with Session(model) as s:
        s.steer("one")
        s.follow_up("two")
        result = s.generate()
        assert seen == [["one", "two"]] and result.text == "a1" and len(result.steps) == 1


def test_follow_ups_are_durable_events_and_survive_a_reopen(tmp_path):
    store = FileEventStore(tmp_path)
    with Session.open("s1", store=store, model=FunctionModel(lambda r: "ok")) as s:
        s.follow_up("remember me")
        s.steer("and me")
    with Session.open("s1", store=store, model=FunctionModel(lambda r: "ok")) as s:
        users = [e for e in s.events if isinstance(e, UserMessageEvent)]
        assert [(u.content[0].text, u.follow_up) for u in users] == [("remember me", True), ("and me", False)]


def test_follow_up_from_many_threads_during_one_inference_all_answered_before_the_end():
    seen: list[list[str]] = []
    started, release = threading.Event(), threading.Event()
    model = held_model(seen, 1, started, release, lambda n, r: f"answer {n}")
    with Session(model) as s:
        s.push_user_message("q")
        box = []
        t = threading.Thread(target=lambda: box.append(s.generate()))
        t.start()
        assert started.wait(20)
        pushers = [threading.Thread(target=s.follow_up, args=(f"f{i}",)) for i in range(5)]
        for p in pushers:
            p.start()
        for p in pushers:
            p.join(20)
        release.set()
        t.join(20)
        assert len(box[0].steps) == 2
        assert sorted(seen[1][2:]) == [f"f{i}" for i in range(5)] and seen[1][:2] == ["q", "answer 1"]
