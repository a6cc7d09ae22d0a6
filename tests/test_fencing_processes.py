"""One conversation served by several OS processes (web workers) over one FileEventStore:
stale decisions are decided again and refused, plain commits always land once, and
scripted tool calls of different processes get different ids. The children are
tests/_fence_child.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _procs import finished, ran, said, spawn, wait_for

from agentkit import ApprovalPolicy, FileEventStore, FunctionModel, Session, SessionPool
from agentkit.events import ControlEvent, RuntimeEvent

CHILD = str(Path(__file__).with_name("_fence_child.py"))


def start(*args: str) -> subprocess.Popen[str]:
    return spawn(CHILD, *args)


def run(*args: str) -> dict:
    return ran(CHILD, *args)


def notes_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _tools(notes: Path):
    sys.path.insert(0, str(Path(__file__).parent))
    from _fence_child import note_reply, note_tools

    return {"model": FunctionModel(note_reply), "tools": note_tools(str(notes)),
            "approval": ApprovalPolicy(mode="ask-writes"), "idle_timeout": None}


@pytest.mark.parametrize(("here", "there", "refused"), [("deny", "approve", "already denied"),
                                                        ("approve", "deny", "already approved"),
                                                        ("approve", "approve", "already approved")])
def test_a_stale_decision_in_another_process_is_refused(tmp_path, here, there, refused):
    store, notes = tmp_path / "store", tmp_path / "notes"
    with SessionPool(FileEventStore(store), **_tools(notes)) as pool:
        session = pool.get("c")
        assert session.ask("refund 5").finish_reason == "approval-required"
        (pending,) = session.pending_approvals()
        other = start("decide", str(store), str(notes), "c", there, "0")
        try:
            assert said(other) == {"ready": [pending.id]}  # B is open and current
            if here == "deny":
                session.deny(pending.id, reason="no")
            else:
                session.approve(pending.id)
            other.stdin.write("go\n")
            other.stdin.flush()
            answer = said(other)
        finally:
            other.communicate(timeout=60)
        assert answer["error"] == "ApprovalError" and refused in answer["message"]
        session.generate()
        assert notes_of(notes) == ([] if here == "deny" else ["refund 5"])
        decided = [e.data["decision"] for e in Session.open("c", store=FileEventStore(store)).events
                   if isinstance(e, ControlEvent) and e.action == "approval-decided"]
        assert decided == ["denied" if here == "deny" else "approved"]


def test_a_remembered_deny_holds_against_a_stale_remembered_approve_in_another_process(tmp_path):
    store, notes = tmp_path / "store", tmp_path / "notes"
    with SessionPool(FileEventStore(store), **_tools(notes)) as pool:
        session = pool.get("c")
        session.ask("refund 5")
        (pending,) = session.pending_approvals()
        other = start("decide", str(store), str(notes), "c", "approve", "1")
        try:
            assert said(other) == {"ready": [pending.id]}
            session.deny(pending.id, reason="never", remember=True)
            other.stdin.write("go\n")
            other.stdin.flush()
            answer = said(other)
        finally:
            other.communicate(timeout=60)
        assert answer["error"] == "ApprovalError"
        session.generate()
        later = session.ask("refund 6")
        assert later.finish_reason == "stop" and later.tool_calls[0].output.is_error
        assert notes_of(notes) == []


def test_pooled_pushes_from_four_processes_never_conflict_and_land_once(tmp_path):
    store = tmp_path / "store"
    n, tags = 200, ("p1", "p2", "p3", "p4")
    procs = [start("push", str(store), "c", tag, str(n)) for tag in tags]
    outs = [finished(proc) for proc in procs]
    assert [o["failures"] for o in outs] == [[]] * len(tags)  # (main before the fix: StoreConflictError)
    events = Session.open("c", store=FileEventStore(store)).events
    ticks = [(e.data["tag"], e.data["i"]) for e in events if isinstance(e, RuntimeEvent)]
    assert sorted(ticks) == sorted((t, i) for t in tags for i in range(n))
    assert len({e.id for e in events}) == len(events) == len(tags) * n
    assert [e.seq for e in events] == list(range(1, len(tags) * n + 1))
    for tag in tags:  # each process's own pushes keep their order
        assert [i for t, i in ticks if t == tag] == list(range(n))


def test_scripted_tool_calls_of_two_processes_get_distinct_ids(tmp_path):
    store = tmp_path / "store"
    first = run("scripted", str(store), "c", "one")
    second = run("scripted", str(store), "c", "two")
    (a,), (b,) = first["call_ids"], second["call_ids"]
    assert a != b and a.startswith("call_") and b.startswith("call_")
    with Session.open("c", store=FileEventStore(store)) as session:
        results = [e for e in session.events if e.type == "tool-result"]
        assert [r.tool_call_id for r in results] == [a, b]



def test_a_session_open_in_one_process_reads_what_another_process_committed_at_once(tmp_path):
    store, notes = tmp_path / "store", tmp_path / "notes"
    here = Session.open("c", store=FileEventStore(store), **{k: v for k, v in _tools(notes).items()
                                                            if k != "idle_timeout"})
    crashed = Session.open("k", store=FileEventStore(store))
    readers = {  # each read, on a session opened before the other process wrote
        "events": lambda: [e.type for e in here.events],
        "history": lambda: [e.type for e in here.history()],
        "model_messages": lambda: [m.role for m in here.model_messages()],
        "pending_approvals": lambda: [p.id for p in here.pending_approvals()],
        "transactions": lambda: list(here.transactions().items()),
    }
    before = {name: read() for name, read in readers.items()}
    assert before["events"] == [] and crashed.uncertain_tool_executions() == []
    made = run("commit", str(store), str(notes), "c")  # process B: an ask, a transaction
    assert made["finish"] == "approval-required"
    after = {name: read() for name, read in readers.items()}  # no refresh() anywhere
    assert after["pending_approvals"] == made["pending"]
    assert after["transactions"] == [(made["generation_id"], "interrupted")]  # B closed its session
    assert here.revision == FileEventStore(store).load("c").revision > made["revision"]  # caught up
    assert after["events"] == after["history"] and "tool-call" not in after["events"]
    assert after["events"][:2] == ["user-message", "assistant-message"]
    assert after["model_messages"][:2] == ["user", "assistant"]
    here.approve(made["pending"][0])  # decided on what B committed
    crash = subprocess.run([sys.executable, CHILD, "crash", str(store), "k"], capture_output=True, timeout=120)
    assert crash.returncode == -9  # SIGKILLed inside the tool
    (unknown,) = crashed.uncertain_tool_executions()
    assert (unknown.tool_name, unknown.input) == ("charge", {"amount": 42})
    here.close()
    crashed.close()


def _prompts(store: Path, sid: str) -> list[str]:
    stored = FileEventStore(store).load(sid)
    return [e.content[0].text for e in stored.events if e.type == "user-message"] if stored else []


def test_an_ask_cancelled_while_another_process_holds_the_turn_leaves_nothing_in_the_log(tmp_path):
    import threading

    from agentkit import CancelledError, CancelToken

    store = tmp_path / "store"
    holder = start("wait-ask", str(store), "c", "first")  # its model waits for the release file
    try:
        wait_for(lambda: _prompts(store, "c") == ["first"], 60, "the other process's turn to start")
        token, box = CancelToken(), {}
        with Session.open("c", store=FileEventStore(store), model=FunctionModel(lambda r: "mine")) as session:
            def ask():
                try:
                    box["result"] = session.ask("second", cancel=token)
                except BaseException as exc:  # noqa: BLE001 - inspected below
                    box["error"] = exc

            asker = threading.Thread(target=ask)
            asker.start()
            token.cancel("the client went away")
            asker.join(60)
            assert isinstance(box.get("error"), CancelledError)
            (store / "release").touch()
            assert said(holder) == {"asked": "first"}
            assert _prompts(store, "c") == ["first"]  # the cancelled prompt was never committed
            kinds = [e.type for e in session.events]
            assert kinds == ["user-message", "assistant-message"]  # no generation-aborted either
            assert session.ask("third").text == "mine"  # the turn is free again
    finally:
        (store / "release").touch()
        holder.communicate(timeout=60)


def test_a_process_killed_inside_its_turn_releases_the_turn_lock(tmp_path):
    import os
    import signal


    store = tmp_path / "store"
    holder = start("wait-ask", str(store), "c", "first")
    wait_for(lambda: _prompts(store, "c") == ["first"], 60, "the other process's turn to start")
    os.kill(holder.pid, signal.SIGKILL)  # dies holding the turn
    holder.communicate(timeout=60)
    with Session.open("c", store=FileEventStore(store), model=FunctionModel(lambda r: "after the crash")) as session:
        assert session.ask("second").text == "after the crash"
    assert _prompts(store, "c") == ["first", "second"]


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
