"""Session over a FileEventStore: durable commits, restore after a restart, a second
writer in another process, failed appends, and listeners that hear only durable events."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import warnings

import pytest
from _env import MOUNT
from _procs import killed_after_first_line, wait_for
from _store_child import child_cmd, child_env, mount_works, remount, texts, tmpfs, user
from _tools import add

from agentkit import (
    ConfigurationError,
    FileEventStore,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    SessionFailedError,
    StoreError,
    ToolCall,
    tool,
)
from agentkit.events import AssistantMessageEvent, ContextReplacedEvent, ControlEvent, ToolResultEvent, UserMessageEvent


def dump(messages) -> list[dict]:
    return json.loads(json.dumps([m.to_dict() for m in messages], sort_keys=True))


def run_first_conversation(store, sid="conv") -> list:
    model = ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "2 + 3 = 5"])
    with Session.open(sid, store=store, model=model, tools=[add], system="be brief") as s:
        s.push_user_message("what is 2 + 3?")
        result = s.generate()
        assert result.text == "2 + 3 = 5"
        s.push_runtime_event("timer-fired", {"at": "noon"})
        return s.model_messages()


def test_a_restored_session_projects_the_same_messages_and_continues(tmp_path):
    before = run_first_conversation(FileEventStore(tmp_path))
    store = FileEventStore(tmp_path)  # a new store object, as after a restart
    model = ScriptedModel(["you asked about 2 + 3"])
    with Session.open("conv", store=store, model=model, tools=[add], system="be brief") as s:
        assert [type(e) for e in s.events][:5] == [
            UserMessageEvent,
            AssistantMessageEvent,
            ControlEvent,  # the tool call's execution intent
            ToolResultEvent,
            AssistantMessageEvent,
        ]
        assert [e.seq for e in s.events] == list(range(1, len(s.events) + 1))
        assert s.revision == len(s.events)
        assert dump(s.model_messages()) == dump(before)
        s.push_user_message("what did I ask?")
        assert s.generate().text == "you asked about 2 + 3"
        sent = model.requests[0].messages
        assert dump(sent[: len(before)]) == dump(before)
        assert sent[-1].role == "user" and "what did I ask?" in sent[-1].text
        assert s.events[-1].seq == len(s.events)
    stored = FileEventStore(tmp_path).load("conv")
    assert [e.seq for e in stored.events] == list(range(1, stored.revision + 1))


def test_a_compacted_session_restores_from_its_summary_and_continues(tmp_path):
    before = run_first_conversation(FileEventStore(tmp_path))
    store = FileEventStore(tmp_path)
    stored = store.load("conv")
    last_seq = stored.events[-1].seq
    # the whole history moves to an archive; a summary (here: the projected messages)
    # takes its place, committed with the next seq
    summary = ContextReplacedEvent(messages=tuple(before), reason="compaction").with_seq(last_seq + 1)
    revision = store.compact(
        "conv", "c1", expected_revision=stored.revision, remove=len(stored.events), summary=[summary]
    )
    assert store.load_archive("conv", "c1") == stored.events
    model = ScriptedModel(["continued from the summary"])
    with Session.open("conv", store=FileEventStore(tmp_path), model=model, tools=[add], system="be brief") as s:
        assert s.revision == revision and len(s.events) == 1
        assert dump(s.model_messages()) == dump(before)
        s.push_user_message("and now?")
        assert s.generate().text == "continued from the summary"
        assert dump(model.requests[0].messages[: len(before)]) == dump(before)
        assert [e.seq for e in s.events] == list(range(last_seq + 1, last_seq + 4))
    assert len(FileEventStore(tmp_path).load("conv").events) == 3


def test_a_new_process_restores_the_session_and_continues(tmp_path):
    before = run_first_conversation(FileEventStore(tmp_path))
    proc = subprocess.run(
        child_cmd("session-turn", tmp_path, "conv", "and now?", "now it is later"),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert json.loads(lines["before"]) == dump(before)
    request = json.loads(lines["request"])
    assert request[: len(before)] == dump(before)
    with Session.open("conv", store=FileEventStore(tmp_path)) as s:
        assert s.revision == int(lines["revision"])
        assert s.model_messages()[-1].text == "now it is later"


def test_a_second_writer_in_another_process_makes_the_stale_session_catch_up(tmp_path):
    store = FileEventStore(tmp_path)
    s = Session.open("shared", store=store)
    s.push_user_message("mine 1")
    heard = []
    s.subscribe(heard.append)
    proc = subprocess.run(
        child_cmd("session-push", tmp_path, "shared", "theirs"),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    s.push_user_message("mine 2")  # stale: it loads "theirs", then appends after it
    assert s.revision == 3 and [e.seq for e in s.events] == [1, 2, 3]
    assert s.refresh() == []
    s.close()
    assert [e.content[0].text for e in heard] == ["theirs", "mine 2"]
    with Session.open("shared", store=FileEventStore(tmp_path)) as again:
        assert [e.content[0].text for e in again.events] == ["mine 1", "theirs", "mine 2"]
        assert [m.text for m in again.model_messages()] == ["mine 1", "theirs", "mine 2"]


def test_refresh_after_another_process_compacted_the_log_rebuilds_the_view(tmp_path):
    from agentkit.events import ContextReplacedEvent
    from agentkit.messages import Message

    store = FileEventStore(tmp_path)
    s = Session.open("shared", store=store)
    s.push_user_message("old 1")
    s.push_user_message("old 2")
    summary = ContextReplacedEvent(messages=(Message.user("summary of old"),), reason="compaction")
    other = FileEventStore(tmp_path)
    stored = other.load("shared")
    other.compact("shared", "archive-1", expected_revision=stored.revision, remove=2,
                  summary=[summary.with_seq(3)])
    s.refresh()
    assert [m.text for m in s.model_messages()] == ["summary of old"]
    s.push_user_message("new")
    assert [m.text for m in s.model_messages()] == ["summary of old", "new"]
    s.close()


def test_refresh_without_a_store_is_a_no_op():
    with Session() as s:
        s.push_user_message("x")
        assert s.refresh() == []


def test_a_session_killed_mid_tool_reopens_and_continues(tmp_path):
    assert killed_after_first_line(child_cmd("session-crash", tmp_path, "crash"), env=child_env()) == ["tool-running"]
    model = ScriptedModel(["the slow thing was interrupted; shall I retry?"])
    with Session.open("crash", store=FileEventStore(tmp_path), model=model, tools=[add]) as s:
        # the tool call and its intent were durable before the tool ran; its result never was
        assert [type(e) for e in s.events] == [UserMessageEvent, AssistantMessageEvent, ControlEvent]
        call = s.events[1].tool_calls[0]
        assert call.tool_name == "slow_side_effect"
        assert s.generate().text.startswith("the slow thing was interrupted")
        sent = model.requests[0].messages
        assert sent[-1].role == "tool"
        assert sent[-1].content[0].tool_call_id == call.tool_call_id
        assert sent[-1].content[0].output.is_error
    stored = FileEventStore(tmp_path).load("crash")
    assert [type(e) for e in stored.events] == [
        UserMessageEvent,
        AssistantMessageEvent,
        ControlEvent,
        ToolResultEvent,
        AssistantMessageEvent,
    ]


def test_every_step_is_durable_before_the_loop_continues(tmp_path):
    seen: list[list[str]] = []
    reader = FileEventStore(tmp_path)

    @tool
    def check_store(x: int) -> str:
        """Look at what is durable right now."""
        seen.append([type(e).__name__ for e in reader.load("steps").events])
        return "ok"

    model = ScriptedModel([ToolCall("check_store", {"x": 1}), lambda req: f"saw {len(req.messages)} messages"])
    with Session.open("steps", store=FileEventStore(tmp_path), model=model, tools=[check_store]) as s:
        s.push_user_message("go")
        s.generate()
    # when the tool ran, the assistant message calling it and its intent were already durable
    assert seen == [["UserMessageEvent", "AssistantMessageEvent", "ControlEvent"]]
    # and the tool result was durable before the second inference
    stored = [type(e).__name__ for e in FileEventStore(tmp_path).load("steps").events]
    assert stored == [
        "UserMessageEvent", "AssistantMessageEvent", "ControlEvent", "ToolResultEvent", "AssistantMessageEvent"
    ]


def test_listeners_hear_committed_events_in_commit_order_only_once_durable(tmp_path):
    reader = FileEventStore(tmp_path)
    heard: list[tuple[int, bool]] = []

    def listener(event):
        durable = any(e.id == event.id for e in reader.load("listen").events)
        heard.append((event.seq, durable))

    with Session.open("listen", store=FileEventStore(tmp_path)) as s:
        s.subscribe(listener)

        def pusher(n: int) -> None:
            for i in range(15):
                s.push_runtime_event("tick", {"thread": n, "i": i})

        threads = [threading.Thread(target=pusher, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert wait_for(lambda: len(heard) == 60)
    assert [seq for seq, _ in heard] == list(range(1, 61))
    assert all(durable for _, durable in heard)
    stored = FileEventStore(tmp_path).load("listen").events
    assert [e.seq for e in stored] == list(range(1, 61))


def test_a_raising_or_stalled_listener_is_removed_and_commits_stay_durable(tmp_path):
    release = threading.Event()
    good: list[int] = []

    def bad(event):
        raise RuntimeError("listener bug")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Session.open(
            "l", store=FileEventStore(tmp_path), listener_timeout=0.3, listener_queue_size=100
        ) as s:
            s.subscribe(bad)
            s.subscribe(lambda e: release.wait(30))
            s.subscribe(lambda e: good.append(e.seq))
            deadline = time.monotonic() + 30
            while len(s._subs) > 1 and time.monotonic() < deadline:
                s.push_runtime_event("tick")
                time.sleep(0.01)
            assert len(s._subs) == 1
            n = len(s.events)
            assert wait_for(lambda: len(good) == n)
            release.set()
    messages = " ".join(str(w.message) for w in caught)
    assert "listener bug" in messages and "removed session listener" in messages
    assert good == list(range(1, n + 1))
    assert FileEventStore(tmp_path).load("l").revision == n


def _read_only_after(root, prepare):
    """Run ``prepare`` on a fresh tmpfs store, then make it read-only."""
    store = FileEventStore(root)
    prepare(store)
    remount(root, read_only=True)
    return store


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_a_failed_append_is_fatal_for_the_session_and_drops_nothing_silently(tmp_path):
    root = tmp_path / "fs"
    with tmpfs(root, "1m"):
        store = FileEventStore(root)
        heard: list[int] = []
        s = Session.open("f", store=store)
        s.subscribe(lambda e: heard.append(e.seq))
        s.push_user_message("one")
        s.push_user_message("two")
        remount(root, read_only=True)
        try:
            with pytest.raises(SessionFailedError, match="read-only.*Session.open") as info:
                s.push_user_message("three")
            assert "revision 2" in str(info.value)
            with pytest.raises(SessionFailedError, match="refuses work"):
                s.push_runtime_event("later")
            with pytest.raises(SessionFailedError):
                s.generate(model=ScriptedModel(["never"]))
            assert [e.content[0].text for e in s.events] == ["one", "two"]
            assert wait_for(lambda: heard == [1, 2])
        finally:
            remount(root, read_only=False)
        s.close()
        assert heard == [1, 2]  # the failed event was never announced
        with Session.open("f", store=FileEventStore(root)) as again:
            assert [e.content[0].text for e in again.events] == ["one", "two"]
            again.push_user_message("three")
            assert again.revision == 3


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_a_store_failure_during_generate_stops_before_the_next_inference(tmp_path):
    root = tmp_path / "fs"
    with tmpfs(root, "1m"):

        @tool
        def break_disk() -> str:
            """Make the store read-only (a side effect the session cannot record)."""
            remount(root, read_only=True)
            return "done"

        model = ScriptedModel([ToolCall("break_disk", {}), "should never be asked"])
        s = Session.open("g", store=FileEventStore(root), model=model, tools=[break_disk])
        s.push_user_message("go")
        try:
            with pytest.raises(SessionFailedError):
                s.generate()
            assert len(model.requests) == 1  # no inference after the lost tool result
        finally:
            remount(root, read_only=False)
            s.close()
        stored = FileEventStore(root).load("g")
        kinds = [type(e).__name__ for e in stored.events]
        assert kinds == ["UserMessageEvent", "AssistantMessageEvent", "ControlEvent"]  # the call and its intent
        # reopening shows the unanswered tool call; the next generation closes it first
        model2 = ScriptedModel(["recovered"])
        with Session.open("g", store=FileEventStore(root), model=model2, tools=[break_disk]) as again:
            assert again.generate().text == "recovered"
            assert any(isinstance(e, ToolResultEvent) for e in again.events)


def test_the_in_memory_store_restores_sessions_too():
    store = InMemoryEventStore()
    before = run_first_conversation(store)
    with Session.open("conv", store=store, model=ScriptedModel(["again"])) as s:
        assert dump(s.model_messages()) == dump(before)
        assert s.revision == len(s.events)


@pytest.mark.parametrize("bad", ["../../etc", "a/b", "..", "x\n"])
def test_session_open_refuses_a_path_as_session_id_before_touching_the_store(tmp_path, bad):
    root = tmp_path / "store"
    with pytest.raises(ConfigurationError, match="invalid session id"):
        Session.open(bad, store=FileEventStore(root))
    with pytest.raises(ConfigurationError, match="invalid session id"):
        Session(session_id=bad, store=FileEventStore(root))
    assert list(tmp_path.iterdir()) == []  # no store directory, nothing above it


# -- opening a stored session ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_constructing_a_session_with_a_stored_id_restores_it(tmp_path, kind):
    store = InMemoryEventStore() if kind == "memory" else FileEventStore(tmp_path)
    with Session.open("x", store=store) as first:
        first.push_user_message("one")
    with Session(store=store, session_id="x") as again:  # was: empty, then a false conflict
        assert texts(again.events) == ["one"] and again.revision == 1
        assert again.push_user_message("two").seq == 2
    assert texts(store.load("x")) == ["one", "two"]
    expected = r"session 'x' already exists .*Session\.open\('x', store=store, events="
    with pytest.raises(ConfigurationError, match=expected):
        Session(store=store, session_id="x", events=[user("seed")])
    assert store.load("x").revision == 2  # nothing was written
    with Session(store=store, session_id="fresh", events=[user("seed")]) as new:  # seeds a new one
        assert new.revision == 1
    assert texts(store.load("fresh")) == ["seed"]


def test_session_open_seeds_a_new_session_and_restores_a_stored_one_as_it_is(tmp_path):
    store = FileEventStore(tmp_path)
    with Session.open("n", store=store, events=[user("seed")]) as s:  # the first run
        s.push_user_message("more")
    with Session.open("n", store=store, events=[user("seed again")]) as s:  # a later run
        assert texts(s.events) == ["seed", "more"] and s.revision == 2
    assert texts(store.load("n")) == ["seed", "more"]


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_opening_a_session_on_a_read_only_store_fails_at_once_naming_the_path(tmp_path):
    root = tmp_path / "fs"
    with tmpfs(root, "1m"):
        with Session.open("old", store=FileEventStore(root)) as s:
            s.push_user_message("one")
        remount(root, read_only=True)
        try:
            for sid in ("old", "new"):
                expected = rf"cannot write session '{sid}': cannot create files in {re.escape(str(root))}: .*read-only"
                with pytest.raises(StoreError, match=expected):
                    Session.open(sid, store=FileEventStore(root))
                with pytest.raises(StoreError, match=expected):
                    Session(store=FileEventStore(root), session_id=sid)
            assert texts(FileEventStore(root).load("old")) == ["one"]  # reading still works
        finally:
            remount(root, read_only=False)
        with Session.open("old", store=FileEventStore(root)) as s:
            assert s.push_user_message("two").seq == 2


def test_opening_a_session_where_a_file_sits_in_place_of_a_directory_names_that_path(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / ".locks").write_text("not a directory")
    path = re.escape(str(root / ".locks"))
    with pytest.raises(StoreError, match=f"cannot create the store directory {path}: exists and is not a directory"):
        Session.open("a", store=FileEventStore(root))
    (root / ".locks").unlink()
    (root / "b").write_text("not a directory")
    path = re.escape(str(root / "b"))
    with pytest.raises(StoreError, match=f"cannot write session 'b': cannot create files in {path}: Not a directory"):
        Session.open("b", store=FileEventStore(root))
    with Session.open("a", store=FileEventStore(root)) as s:  # the other sessions are fine
        s.push_user_message("one")
    assert texts(FileEventStore(root).load("a")) == ["one"]
