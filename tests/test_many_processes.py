"""Conversations shared by real worker processes over one store (FileEventStore and
PostgreSQL), attacked as issue 27's defect reports describe, and further: an approved
call settled by two workers at once (runs once, one idempotency key); approve, deny and
generate from three workers at once; 3 processes x 2 threads asking over shared
conversations (no StoreConflictError, each answer its own, turns contiguous, one result
per call); pooled pushes from 3 processes; a worker frozen (SIGSTOP) holding the
PostgreSQL turn lock while its lock connection is killed (fenced, and an approved call it
was running is uncertain, never re-run); a call running in another process cannot be
reconciled; a transaction interrupted from another process runs no further tool, one
claimed by two workers at once runs once and is not interrupted by the loser closing; a
compaction in another process keeps a running turn whole, and one overtaken by a newer
compaction is dropped. The workers are tests/_many_child.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _pg import freeze_and_cut_lock
from _procs import finished, said, spawn, wait_for

from agentkit.events import RuntimeEvent

CHILD = str(Path(__file__).with_name("_many_child.py"))
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(params=["file", "pg"])
def spec(request, tmp_path) -> str:
    """The store the workers share, as _many_child.py's ``<store>`` argument."""
    if request.param == "file":
        return f"file:{tmp_path / 'store'}"
    cluster = request.getfixturevalue("pg_cluster")
    from agentkit.stores.postgres import PostgresEventStore

    schema = cluster.fresh_schema()
    store = PostgresEventStore(cluster.conninfo, schema=schema)
    store.migrate()
    store.close()
    return f"pg:{schema}:{cluster.conninfo}"


def opened(spec: str):
    from _many_child import open_store

    return open_store(spec)


def start(*args: str) -> subprocess.Popen[str]:
    return spawn(CHILD, *args)


def stored(spec: str, sid: str) -> list:
    store = opened(spec)
    try:
        log = store.load(sid)
        return list(log.events) if log else []
    finally:
        getattr(store, "close", lambda: None)()


def results_by_call(events) -> dict[str, list]:
    by: dict[str, list] = {}
    for e in events:
        if e.type == "tool-result":
            by.setdefault(e.tool_call_id, []).append(e)
    return by


def calls_in(events) -> list:
    return [c for e in events if e.type == "assistant-message" for c in e.tool_calls]


def text_of(event) -> str:
    return "".join(getattr(p, "text", "") for p in event.content)


def test_an_approved_call_two_workers_settle_at_once_runs_once(spec, tmp_path):
    marker = tmp_path / "refunds"
    pending_refund(spec, marker)
    # A approves, then A and B are released together: both generate() calls overlap
    ready_a, _, *answers = released_together(*(start("settle", spec, "c", str(marker), a) for a in ("1", "0")))
    assert len(ready_a["ready"]) == 1
    assert all("error" not in a for a in answers), answers
    runs = marker.read_text().splitlines()
    assert len(runs) == 1, runs  # the refund ran once, under one idempotency key
    events = stored(spec, "c")
    (call,) = calls_in(events)
    assert [(k, len(r)) for k, r in results_by_call(events).items()] == [(call.tool_call_id, 1)]
    assert results_by_call(events)[call.tool_call_id][0].output.as_text() == "refunded 5"


def pending_refund(spec: str, marker: Path) -> None:
    """Ask for a refund in conversation ``c``: its approval request stays pending."""
    from _many_child import refund_tools

    from agentkit import ApprovalPolicy, FunctionModel, SessionPool, ToolCall

    with SessionPool(opened(spec), model=FunctionModel(lambda r: ToolCall("refund", {"amount": 5})),
                     tools=refund_tools(str(marker), 0), approval=ApprovalPolicy(mode="ask-writes"),
                     idle_timeout=None) as pool:
        assert pool.get("c").ask("refund 5").finish_reason == "approval-required"


def released_together(*workers: subprocess.Popen[str]) -> list[dict]:
    """Wait until every worker is ready, release them at once; their answers."""
    try:
        readies = [said(w) for w in workers]
        for w in workers:
            w.stdin.write("go\n")
            w.stdin.flush()
        return [*readies, *(said(w) for w in workers)]
    finally:
        for w in workers:
            w.communicate(timeout=120)


def test_approve_deny_and_generate_from_three_workers_at_once_decide_once(spec, tmp_path):
    from agentkit.events import ControlEvent

    marker = tmp_path / "refunds"
    pending_refund(spec, marker)
    answers = released_together(*(start("race", spec, "c", str(marker), verb)
                                  for verb in ("approve", "deny", "generate")))[3:]
    events = stored(spec, "c")
    (decided,) = [e.data["decision"] for e in events if isinstance(e, ControlEvent) and e.action == "approval-decided"]
    loser = answers[1] if decided == "approved" else answers[0]  # the decision made second is refused
    assert loser["error"] == "ApprovalError" and f"already {decided}" in loser["message"]
    assert [a.get("error") for a in answers].count("ApprovalError") == 1
    runs = marker.read_text().splitlines() if marker.exists() else []
    assert len(runs) == (1 if decided == "approved" else 0)  # the tool ran only if approved, and once
    assert [len(r) for r in results_by_call(events).values()] == [1]


def test_three_processes_of_two_threads_asking_over_shared_conversations(spec):
    sids = ("c1", "c2")
    n = 12  # per thread: 3 processes x 2 threads x 12 = 72 asks
    workers = [start("asks", spec, tag, str(n), ",".join(sids)) for tag in ("p1", "p2", "p3")]
    try:
        outs = [finished(w) for w in workers]
    finally:
        for w in workers:  # none left holding a turn lock in the shared cluster
            if w.poll() is None:
                w.kill()
                w.communicate()
    assert [o["errors"] for o in outs] == [[]] * 3  # no StoreConflictError, nothing else either
    answers = [a for o in outs for a in o["answers"]]
    assert len(answers) == 3 * 2 * n
    wrong = [(p, t) for p, t in answers if t != "answer: " + p]
    assert wrong == []
    asked = 0
    for sid in sids:
        events = stored(spec, sid)
        results = results_by_call(events)
        assert all(len(r) == 1 for r in results.values()), {k: len(v) for k, v in results.items() if len(v) > 1}
        assert not [e for e in events if e.type == "tool-result" and "may or may not" in e.output.as_text()]
        # every turn contiguous: its user message, then only its own events, ending in its answer
        turns: list[list] = []
        for e in events:
            if e.type == "user-message":
                turns.append([e])
            elif turns:
                turns[-1].append(e)
        for turn in turns:
            prompt = turn[0].content[0].text
            said = [e for e in turn if e.type == "assistant-message"]
            assert said and text_of(said[-1]) == "answer: " + prompt, [e.type for e in turn]
            calls = calls_in(turn)
            assert [c.input for c in calls] == ([{"text": prompt}] if prompt.endswith("!") else [])
            assert sorted(results_by_call(turn)) == sorted(c.tool_call_id for c in calls)
        asked += len(turns)
    assert asked == 3 * 2 * n


def test_pooled_pushes_from_three_processes_never_conflict_and_land_once(spec):
    n, tags = 200, ("p1", "p2", "p3")
    workers = [start("push", spec, "c", tag, str(n)) for tag in tags]
    outs = [finished(w) for w in workers]
    assert [o["failures"] for o in outs] == [[]] * len(tags)
    events = stored(spec, "c")
    ticks = [(e.data["tag"], e.data["i"]) for e in events if isinstance(e, RuntimeEvent)]
    assert sorted(ticks) == sorted((t, i) for t in tags for i in range(n))
    assert len({e.id for e in events}) == len(events) == len(tags) * n


def test_a_frozen_worker_whose_turn_lock_was_taken_over_commits_nothing(pg_cluster, tmp_path):
    spec = "pg:" + pg_cluster.fresh_schema() + ":" + pg_cluster.conninfo
    opened(spec).migrate()
    marker = tmp_path / "marker"
    frozen = start("stall", spec, "c", str(marker))
    try:
        wait_for(lambda: marker.exists() and "started" in marker.read_text(), 60, "the tool to start")
        freeze_and_cut_lock(frozen.pid, pg_cluster.conninfo)
        from agentkit import FunctionModel, SessionPool

        with SessionPool(opened(spec), model=FunctionModel(lambda r: "taken over"), idle_timeout=None) as pool:
            assert pool.get("c").ask("second").text == "taken over"
        before = [(e.id, e.type) for e in stored(spec, "c")]
        (tmp_path / "marker.release").touch()
        os.kill(frozen.pid, signal.SIGCONT)
        answer = said(frozen)
        after_loss = [(e.id, e.type) for e in stored(spec, "c")]
        frozen.stdin.write("again\n")
        frozen.stdin.flush()
        again = said(frozen)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
        (tmp_path / "marker.release").touch()
        frozen.communicate(timeout=120)
    assert marker.read_text().splitlines()[:2] == ["started", "finished"]  # its tool did finish...
    assert answer.get("error") == "TurnLockLostError", answer  # ...but nothing it did after is committed
    assert after_loss == before
    assert again == {"again": "answer: stuck again"}  # its pool goes on with a new turn lock
    events = stored(spec, "c")
    assert all(len(r) == 1 for r in results_by_call(events).values())
    assert [e.content[0].text for e in events if e.type == "user-message"] == ["first", "second", "again"]


def test_a_call_running_in_another_process_cannot_be_reconciled(spec, tmp_path):
    from agentkit import Session, StoreUnavailableError

    marker = tmp_path / "marker"
    running = start("stall", spec, "c", str(marker))
    try:
        wait_for(lambda: marker.exists() and "started" in marker.read_text(), 60, "the tool to start")
        with Session.open("c", store=opened(spec)) as other:
            (listed,) = other.uncertain_tool_executions()  # listed: its turn may have crashed
            with pytest.raises(StoreUnavailableError, match="another turn of this conversation"):
                other.reconcile_tool_execution(listed.intent_id, "not-executed")  # (main: accepted)
            (tmp_path / "marker.release").touch()
            assert said(running) == {"text": "answer: stuck first"}  # built on the real result
            assert other.uncertain_tool_executions() == []
    finally:
        (tmp_path / "marker.release").touch()
        running.communicate("\n", timeout=120)
    events = stored(spec, "c")
    assert [len(r) for r in results_by_call(events).values()] == [1]
    assert not [e for e in events if e.type == "control" and e.action == "tool-execution-reconciled"]


def test_a_transaction_another_process_interrupted_mid_model_call_runs_no_tool(spec, tmp_path):
    from agentkit import Session
    from agentkit.transactions import GenerationTransaction

    marker = tmp_path / "marker"
    running = start("txn", spec, "c", str(marker))
    try:
        handle = said(running)
        wait_for(lambda: marker.exists() and "model" in marker.read_text(), 60, "the model call to start")
        with Session.open("c", store=opened(spec)) as other:  # e.g. the client's cancel, in another worker
            other.finalize_generation(GenerationTransaction(**handle), "interrupted")
            (tmp_path / "marker.release").touch()
            answer = said(running)
            assert other.transactions() == {handle["generation_id"]: "interrupted"}
    finally:
        (tmp_path / "marker.release").touch()
        running.communicate(timeout=120)
    assert answer["error"] == "TransactionError" and "interrupted" in answer["message"]
    assert marker.read_text().splitlines() == ["model"]  # its tool never ran (main: it ran)
    events = stored(spec, "c")
    assert not [e for e in events if e.type == "control" and e.action == "tool-execution-intent"]


def test_a_compaction_in_another_process_during_a_turn_keeps_the_turn_whole(spec, tmp_path):
    from agentkit import FunctionModel, Retention, Session, SessionPool

    with SessionPool(opened(spec), model=FunctionModel(lambda r: "hi " + r.messages[-1].text),
                     idle_timeout=None) as pool:
        for i in range(3):
            pool.get("c").ask(f"q{i}")
    marker = tmp_path / "marker"
    running = start("stall", spec, "c", str(marker))
    try:
        wait_for(lambda: marker.exists() and "started" in marker.read_text(), 60, "the tool to start")
        with Session.open("c", store=opened(spec), retention=Retention(max_events=4, keep_last=0)) as other:
            compaction = other.compact(keep_last=0, compactor=lambda messages, reason, cancel: "earlier talk")
            assert compaction is not None  # covered the earlier turns and archived them, not the open call
        (tmp_path / "marker.release").touch()
        assert said(running) == {"text": "answer: stuck first"}
    finally:
        (tmp_path / "marker.release").touch()
        running.communicate("\n", timeout=120)
    events = stored(spec, "c")
    assert [len(r) for r in results_by_call(events).values()] == [1]
    (call,) = calls_in(events)
    with Session.open("c", store=opened(spec)) as fresh:
        roles = [m.role for m in fresh.model_messages()]
        assert roles[-3:] == ["assistant", "tool", "assistant"]  # the call, its one result, the answer
        assert [e.type for e in fresh.events if e.type == "user-message"] == []  # "first" was summarised too
        assert results_by_call(fresh.events)[call.tool_call_id][0].output.as_text() == "stuck first"


def test_an_approved_call_whose_frozen_worker_lost_the_lock_is_uncertain_never_rerun(pg_cluster, tmp_path):
    from agentkit import Session

    spec = "pg:" + pg_cluster.fresh_schema() + ":" + pg_cluster.conninfo
    opened(spec).migrate()
    marker = tmp_path / "refunds"
    (tmp_path / "refunds.hold").touch()  # the refund returns only once released
    pending_refund(spec, marker)
    first = start("settle", spec, "c", str(marker), "1")  # approves, then resumes: the refund runs
    try:
        assert len(said(first)["ready"]) == 1
        first.stdin.write("go\n")
        first.stdin.flush()
        wait_for(marker.exists, 60, "the approved refund to start")
        freeze_and_cut_lock(first.pid, pg_cluster.conninfo)
        (taken_over,) = released_together(start("settle", spec, "c", str(marker), "0"))[1:]
        assert "may or may not have taken effect" in taken_over["text"]  # told, not run again
        (tmp_path / "refunds.release").touch()
        os.kill(first.pid, signal.SIGCONT)
        assert said(first)["error"] == "TurnLockLostError"
    finally:
        os.kill(first.pid, signal.SIGCONT)
        (tmp_path / "refunds.release").touch()
        first.communicate(timeout=120)
    assert len(marker.read_text().splitlines()) == 1  # one run, one idempotency key
    events = stored(spec, "c")
    assert [len(r) for r in results_by_call(events).values()] == [1]
    with Session.open("c", store=opened(spec)) as after:
        (uncertain,) = after.uncertain_tool_executions()
        assert uncertain.tool_name == "refund"


def test_a_compaction_overtaken_by_another_process_s_compaction_is_dropped(spec, tmp_path):
    from agentkit import FunctionModel, Session

    model = FunctionModel(lambda r: "hi " + r.messages[-1].text)
    with Session.open("c", store=opened(spec), model=model) as here:
        for i in range(4):
            here.ask(f"q{i}")
        marker = tmp_path / "marker"
        slow = start("compact", spec, "c", str(marker))  # decides to cover q0..q2, summarises slowly
        try:
            wait_for(lambda: marker.exists(), 60, "the other compaction to start")
            for i in range(4, 6):
                here.ask(f"q{i}")
            mine = here.compact(keep_last=2, compactor=lambda messages, reason, cancel: "summary A")
            assert mine is not None  # covers q0..q4's turns
            (tmp_path / "marker.release").touch()
            assert said(slow) == {"compacted": None}  # moot: what it summarised was summarised again since
        finally:
            (tmp_path / "marker.release").touch()
            slow.communicate(timeout=120)
    with Session.open("c", store=opened(spec)) as fresh:
        seen = [m.text for m in fresh.model_messages()]
    assert "summary A" in seen[0] and seen[1:] == ["q5", "hi q5"]  # (main: B's summary, and q3..q4 lost)


def test_one_transaction_claimed_by_two_workers_at_once_runs_once_and_awaits_its_decision(spec, tmp_path):
    from agentkit import Session

    marker = tmp_path / "model-calls"
    workers = [start("claim", spec, "c", str(marker)) for _ in range(2)]
    try:
        assert [said(w) for w in workers] == [{"ready": True}] * 2  # open before it begins
        with Session.open("c", store=opened(spec)) as here:
            txn = here.begin_generation("the prompt")
            for w in workers:  # the client sends its handle to both workers at once
                w.stdin.write(f"{txn.generation_id} {txn.claim_token}\n")
                w.stdin.flush()
            answers = [said(w) for w in workers]
            loser = next(w for w, a in zip(workers, answers, strict=True) if "error" in a)
            loser.communicate(timeout=120)  # the worker that lost closes its pool meanwhile
            assert here.transactions() == {txn.generation_id: "execution-completed"}  # (main: interrupted)
            here.finalize_generation(txn, "accepted")  # the client decides
    finally:
        for w in workers:
            if w.returncode is None:
                w.communicate("\n", timeout=120)
    assert sorted(a.get("text", a.get("error")) for a in answers) == ["TransactionError", "answer: the prompt"]
    assert "already claimed" in next(a["message"] for a in answers if "error" in a)
    assert len(marker.read_text().splitlines()) == 1  # one model call in all


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
