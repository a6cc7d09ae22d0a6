"""Exactly once across real processes (the in-process tests are tests/test_loop_calls.py).

- The kill loop: a child process fulfils an order with a tool of three journaled steps
  (charge and reserve keyed by ``ctx.idempotency_key``, as a payment API is; email a
  plain append, so the tool's reconcile probe looks for it) on a FileEventStore session
  and is SIGKILLed at every point of its run (after each append to the store and after
  each effect: the child waits there for the parent's word), again and again, each new
  child reopening the session and calling ``generate()`` until the conversation
  finishes. Every step happened exactly once, no call is left uncertain and the model
  read the call's result: the tool's own, or, when the probe settled the call as
  executed (a kill after the email went out), the probe's "it took effect" (the tool's
  output is then not known, even when all three steps were recorded).
- Two processes answer the same human-input request at once: one wins, the other gets
  InputError, and the tool sees the winner's answer.
- A step that finishes after its process lost the turn (frozen with SIGSTOP while its
  PostgreSQL lock connection is cut) is refused: the other process's run of the call is
  the one recorded.

The children are tests/_calls_child.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import _calls_child
import pytest
from _procs import said, spawn, wait_for

from agentkit import FileEventStore, FunctionModel, Session, ToolCall, ToolContext, tool
from agentkit.events import ControlEvent, ToolResultEvent

CHILD = str(Path(__file__).with_name("_calls_child.py"))
PROGRESS_SECONDS = 120.0  # a generous guard against a child that hangs, not a timing
PROBE_EXECUTED = "the tool's reconcile probe found that it took effect"


def controls(events, action: str) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == action]


# -- the kill loop --------------------------------------------------------------------------


def forkserver() -> Any:
    """Children forked from a clean server process that imported agentkit and the child
    module once (cheap to start; never forked from this threaded test process)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["agentkit", "_calls_child"])
    return ctx


def attempt(ctx: Any, root: Path, sid: str, ledger: Path, order: str, kill_at: int,
            points: list[str] | None = None) -> tuple[str | None, dict | None]:
    """One child on the order's session, SIGKILLed at its ``kill_at``-th point (1-based):
    ``(the point it was killed at, None)``, or ``(None, what it said at its end)`` when it
    finished before reaching that point. ``points``: where the points it passed go."""
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_calls_child.fulfil_in, args=(theirs, str(root), sid, str(ledger), order),
                        daemon=True)
    child.start()
    theirs.close()
    try:
        seen = 0
        while True:
            assert ours.poll(PROGRESS_SECONDS), f"the child of order {order} made no progress"
            try:
                message = ours.recv()
            except EOFError:
                child.join(60)
                raise AssertionError(f"the child of order {order} died (exit code {child.exitcode})") from None
            if "finished" in message:
                child.join(60)
                assert child.exitcode == 0
                return None, message
            seen += 1
            if points is not None:
                points.append(message["point"])
            if seen == kill_at:
                os.kill(child.pid, signal.SIGKILL)
                child.join(60)
                assert child.exitcode == -signal.SIGKILL
                return message["point"], None
            ours.send("go")
    finally:
        if child.is_alive():
            child.kill()
            child.join(60)
        ours.close()


@pytest.mark.timeout(900)
def test_a_three_step_tool_killed_at_every_point_of_its_run_does_each_step_exactly_once(tmp_path):
    root, ledger = tmp_path / "store", tmp_path / "ledger"
    ledger.mkdir()
    ctx = forkserver()
    (tmp_path / "ledger-clean").mkdir()
    whole: list[str] = []
    killed, end = attempt(ctx, tmp_path / "clean", "clean", tmp_path / "ledger-clean", "clean", 10**6, whole)
    assert killed is None and end is not None and end["finish"] == "stop"
    assert len(set(whole)) == len(whole) == 11, whole  # every append and every effect
    kills: list[tuple[str, int, str]] = []  # (order, attempt, point)
    ends: dict[str, dict] = {}
    orders: list[str] = []
    for first in range(1, len(whole) + 1):
        # the first child of an order dies at the first-th point of a whole run; the
        # next ones recover what their predecessors left, each killed one point further
        # than the last: from the recovery's first point (kills inside the recovery
        # too) or from where the first one died
        for schedule, later in (("r", 1), ("f", first + 1)):
            order = f"{schedule}{first}"
            orders.append(order)
            for n in range(2 * len(whole)):
                killed, end = attempt(ctx, root, f"s-{order}", ledger, order, first if n == 0 else later + n - 1)
                if killed is None:
                    ends[order] = end
                    break
                kills.append((order, n, killed))
            assert order in ends, f"order {order} did not finish"
    effects = Counter(tuple(line.split()[:2]) for name in ("ledger", "emails")
                      for line in (ledger / name).read_text().splitlines())
    assert effects == Counter({(step, order): 1 for step in ("charge", "reserve", "email") for order in orders})
    print(f"{len(kills)} kills over {len(orders)} orders; points of a whole run: {whole}")
    assert len(kills) >= 50
    assert {p for o, n, p in kills if n == 0} == set(whole)  # every point of a run was a kill point
    assert {p for o, n, p in kills if n > 0} >= {"appended tool-execution-reconciled", "charge repeated"}

    store = FileEventStore(root)
    settled_by_probe = 0  # the model read the probe's "it took effect" instead of the tool's output
    for order in orders:
        with Session.open(f"s-{order}", store=store) as s:
            assert s.uncertain_tool_executions() == []
            assert s.pending_inputs() == []
            results = [e for e in s.events if isinstance(e, ToolResultEvent)]
            real = f"charge-{order}-"
            final = results[-1].output.as_text()
            assert final.startswith(real) or PROBE_EXECUTED in final
            assert ends[order]["finished"] == "done: " + final  # the model read that result
            assert ends[order]["finish"] in ("stop", "nothing-to-answer")
            settled_by_probe += PROBE_EXECUTED in final
    print(f"{settled_by_probe} of {len(orders)} calls were settled as executed by the probe")


def test_a_call_killed_before_its_intent_was_committed_never_ran_and_is_closed_without_a_probe(tmp_path):
    root, ledger = tmp_path / "store", tmp_path / "ledger"
    ledger.mkdir()
    killed, _ = attempt(forkserver(), root, "s", ledger, "A", 2)
    assert killed == "appended assistant-message:call"  # the call is committed, its intent is not
    read: list[str] = []

    def model(request):
        read.append(request.messages[-1].content[0].output.as_text())
        return "I will try again"

    ran: list[str] = []

    @tool(reconcile=lambda args, ctx: ran.append("probed") or "not-executed")
    def fulfil(order: str) -> str:
        """Fulfil an order."""
        ran.append(order)
        return "fulfilled"

    with Session.open("s", store=FileEventStore(root), model=FunctionModel(model), tools=[fulfil]) as s:
        assert s.generate().text == "I will try again"
        assert s.uncertain_tool_executions() == []  # not uncertain: it never started
        assert controls(s.events, "tool-execution-intent") == []
    assert ran == [] and not (ledger / "ledger").exists()  # no tool, no probe
    # what the model reads is the orphan rule's cautious text (the lead's call whether a
    # call with no intent in a durable session should say "did not run" instead)
    assert read == ["error: this tool call was interrupted before it returned a result; "
                    "it may or may not have taken effect"]


# -- two processes answer one question ------------------------------------------------------


def released_together(*children: subprocess.Popen[str]) -> list[dict]:
    """Wait until every child said it is ready, release them all at once; what each says next."""
    readies = [said(c) for c in children]
    for c in children:
        c.stdin.write("go\n")
    for c in children:
        c.stdin.flush()
    return [*readies, *(said(c) for c in children)]


def test_two_processes_answering_one_question_at_once_one_wins_and_the_tool_sees_its_answer(tmp_path):
    heard: list[object] = []

    @tool
    def ship(order: str, ctx: ToolContext) -> str:
        """Ask where to ship, then ship."""
        where = ctx.ask_human(f"where to ship {order}?", schema={"type": "string"})
        heard.append(where)
        return f"shipped {order} to {where}"

    model = FunctionModel(lambda r: ToolCall("ship", {"order": "A1"}) if r.messages[-1].role == "user"
                          else r.messages[-1].content[0].output.as_text())
    store = FileEventStore(tmp_path / "store")
    with Session.open("q", store=store, model=model, tools=[ship]) as s:
        assert s.ask("ship A1").finish_reason == "input-required"
        (request,) = s.pending_inputs()
        children = [spawn(CHILD, "answer", str(tmp_path / "store"), "q", json.dumps(v)) for v in ("Paris", "Rome")]
        try:
            ready_a, ready_b, a, b = released_together(*children)
        finally:
            for c in children:
                c.communicate(timeout=60)
        assert ready_a == ready_b == {"ready": [request.id]}  # both saw it pending
        (won,) = [i for i, answer in enumerate((a, b)) if answer == {"answered": True}]
        lost = (a, b)[1 - won]
        assert lost["error"] == "InputError" and "already answered" in lost["message"], lost
        winner = ("Paris", "Rome")[won]
        assert s.generate().text == f"shipped A1 to {winner}"  # this process caught up with the answer
    assert heard == [winner]
    with Session.open("q", store=store) as after:
        assert [e.data["value"] for e in controls(after.events, "input-answered")] == [winner]


# -- a step is fenced by its process's turn ---------------------------------------------------


def test_a_step_that_finishes_after_its_process_lost_the_turn_is_refused_and_the_other_run_is_recorded(
        pg_cluster, tmp_path):
    from _pg import freeze_and_cut_lock

    from agentkit.stores.postgres import PostgresEventStore

    schema = pg_cluster.fresh_schema()
    spec = f"pg:{schema}:{pg_cluster.conninfo}"
    store = PostgresEventStore(pg_cluster.conninfo, schema=schema)
    store.migrate()
    marker, release = tmp_path / "marker", tmp_path / "release"
    frozen = spawn(CHILD, "stall", spec, "c", str(tmp_path))
    try:
        wait_for(lambda: marker.exists() and "started" in marker.read_text(), 60, "the step to start")
        freeze_and_cut_lock(frozen.pid, pg_cluster.conninfo)  # its turn is lost while its step runs

        entered, go = threading.Event(), threading.Event()

        def ours_run() -> dict:
            entered.set()  # this process's run of the call is in its step...
            assert go.wait(120)  # ...until the frozen one's step has finished and tried to commit
            return {"charged": 7, "by": os.getpid()}

        @tool(reconcile=lambda args, ctx: "not-executed")
        def charge(amount: int, ctx: ToolContext) -> str:
            """Charge."""
            return json.dumps(ctx.step("charge", ours_run))

        model = FunctionModel(lambda r: "answer: " + r.messages[-1].content[0].output.as_text())
        with Session.open("c", store=store, model=model, tools=[charge]) as other:
            box: dict = {}
            # the call is uncertain here: the probe settles it and it runs again, same key
            runner = threading.Thread(target=lambda: box.setdefault("result", other.generate()))
            runner.start()
            assert entered.wait(120)
            release.touch()
            os.kill(frozen.pid, signal.SIGCONT)  # the frozen run's step finishes first
            lost = said(frozen)
            go.set()
            runner.join(120)
            taken_over = box["result"]
    finally:
        release.touch()
        os.kill(frozen.pid, signal.SIGCONT)
        frozen.communicate(timeout=120)
    ours = {"charged": 7, "by": os.getpid()}
    assert taken_over.text == "answer: " + json.dumps(ours)
    assert lost["error"] == "TurnLockLostError", lost  # its step finished, its commit was refused
    assert marker.read_text().split() == ["started", "step-TurnLockLostError"]  # refused, not committed
    with Session.open("c", store=store) as after:
        steps = controls(after.events, "tool-step-recorded")
        assert [(e.data["name"], e.data["result"]) for e in steps] == [("charge", ours)]  # ours, not the frozen one's
        (result,) = [e for e in after.events if isinstance(e, ToolResultEvent)]
        assert result.output.as_text() == json.dumps(ours)
        assert [e.data["resolution"] for e in controls(after.events, "tool-execution-reconciled")] == ["not-executed"]
        assert after.uncertain_tool_executions() == []
    store.close()


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
