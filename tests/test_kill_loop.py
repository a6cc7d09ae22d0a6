"""The kill loop: a worker process taking turns in one conversation (plain answers and
approved refunds) is SIGKILLed again and again, mid-turn and inside the approved tool,
and a new worker goes on each time. Afterwards: every event a worker acknowledged is in
the log, no refund ran twice, and every refund whose result never came is listed as
uncertain under the key the tool got. The same harness runs on the file store and on
PostgreSQL.

Each runs without and with retention (then kills also land inside compaction, archiving
and pruning, and the active log must stay bounded). ``AGENTKIT_KILL_LOOP_KILLS`` sets
the number of kills per run (default 50, half of them inside the tool);
``AGENTKIT_KILL_LOOP_SEED`` the seed of where the mid-turn kills land.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import _kill_worker
import pytest

from agentkit import ApprovalPolicy, FunctionModel, Session
from agentkit.events import ControlEvent, ToolResultEvent

KILLS = int(os.environ.get("AGENTKIT_KILL_LOOP_KILLS", "50"))
SEED = int(os.environ.get("AGENTKIT_KILL_LOOP_SEED", str(random.randrange(1 << 30))))
_PROGRESS_SECONDS = 60.0  # a generous guard against a worker that hangs, not a timing


def _context() -> Any:
    """Workers forked from a clean server process that imported agentkit (and psycopg,
    when it is installed) once: cheap to start, and never forked from this threaded test
    process."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["agentkit", "_kill_worker", "agentkit.stores.postgres"])
    return ctx


def _kill_once(ctx: Any, spec: dict, sid: str, marker: Path, *, in_tool: bool, after: int,
               acknowledged: list[str]) -> str | None:
    """Start a worker, SIGKILL it inside the tool (``in_tool``) or after it acknowledged
    ``after`` events; collect what it acknowledged. Returns the call killed in its tool."""
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_kill_worker.run, args=(spec, sid, str(marker), writer, in_tool), daemon=True)
    proc.start()
    writer.close()
    killed_call: str | None = None
    seen = 0
    try:
        while True:
            assert reader.poll(_PROGRESS_SECONDS), f"the worker made no progress in {_PROGRESS_SECONDS:g}s"
            try:
                kind, value = reader.recv_bytes().decode().split(" ", 1)
            except EOFError:
                raise AssertionError(f"the worker died on its own (exit code {proc.exitcode})") from None
            if kind == "E":
                acknowledged.append(value)
                seen += 1
                if not in_tool and seen >= after:
                    break
            elif kind == "T" and in_tool:
                killed_call = value
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        assert proc.exitcode == -signal.SIGKILL
        while True:  # what it acknowledged before it died
            try:
                kind, value = reader.recv_bytes().decode().split(" ", 1)
            except EOFError:
                break
            if kind == "E":
                acknowledged.append(value)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(30)
        reader.close()
    return killed_call


def kill_loop(spec: dict, tmp_path: Path, *, kills: int = KILLS, seed: int = SEED) -> None:
    """The loop and its checks (see the module docstring)."""
    rng = random.Random(seed)
    marker = tmp_path / "refunds.txt"
    marker.touch()
    sid = "kill-loop"
    ctx = _context()
    acknowledged: list[str] = []
    killed_in_tool: list[str] = []
    for i in range(kills):
        in_tool = i % 2 == 0
        call = _kill_once(ctx, spec, sid, marker, in_tool=in_tool, after=rng.randint(1, 24),
                          acknowledged=acknowledged)
        if call is not None:
            killed_in_tool.append(call)
    assert len(killed_in_tool) == (kills + 1) // 2, f"seed {seed}"

    store = _kill_worker.open_store(spec)
    try:
        # the conversation goes on in a fresh process's session: an approved refund runs
        with Session.open(sid, store=store, model=FunctionModel(_kill_worker.reply),
                          tools=[_kill_worker.refund_tool(marker)],
                          approval=ApprovalPolicy(mode="ask-writes"), **_kill_worker.session_options(spec)) as s:
            result = s.ask("refund order final")
            while result.finish_reason == "approval-required":
                for request in s.pending_approvals():
                    s.approve(request.id)
                result = s.generate()
            assert result.text == "the refund tool said: refunded final", f"seed {seed}"
            events = list(s.history())
            uncertain = {u.tool_call_id: u.intent_id for u in s.uncertain_tool_executions()}
            if spec.get("retention"):  # bounded: each uncertain call keeps only its intent copy
                assert len(s.events) <= 3 * spec["retention"] + len(uncertain), f"seed {seed}"
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()

    # 0 acknowledged events lost
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids)), f"seed {seed}: an event is in the log twice"
    lost = set(acknowledged) - set(ids)
    assert not lost, f"seed {seed}: {len(lost)} of {len(set(acknowledged))} acknowledged events lost"
    # 0 side effects repeated silently: each refund ran at most once (nothing here was
    # reconciled as not executed), under the key of its one intent
    runs = [line.split() for line in marker.read_text().splitlines()]
    counts = Counter(cid for cid, _ in runs)
    repeated = {cid: n for cid, n in counts.items() if n > 1}
    assert not repeated, f"seed {seed}: {len(repeated)} refunds ran more than once, e.g. {min(repeated.items())}"
    intents = {}
    for e in events:
        if isinstance(e, ControlEvent) and e.action == "tool-execution-intent" and "carried_by" not in e.data:
            assert e.data["tool_call_id"] not in intents, f"seed {seed}: a call was declared twice"
            intents[e.data["tool_call_id"]] = e.id
    settled = {e.tool_call_id: e.intent_id for e in events if isinstance(e, ToolResultEvent) and e.intent_id}
    for cid, key in runs:
        assert intents.get(cid) == key, f"seed {seed}: call {cid} ran under a key that is not its intent's"
        # its result is recorded under that key, or it is listed as uncertain
        assert settled.get(cid) == key or uncertain.get(cid) == key, f"seed {seed}: call {cid} ran unrecorded"
    for cid in killed_in_tool:
        assert cid in uncertain, f"seed {seed}: call {cid} was killed in its tool and is not listed as uncertain"
    # an uncertain call a compaction carried is reported once, whichever worker compacted
    controls = [e for e in events if isinstance(e, ControlEvent)]
    reports = Counter(e.data["intent_id"] for e in controls if e.action == "retention-held")
    assert all(n == 1 for n in reports.values()), f"seed {seed}: reported more than once: {reports}"
    carried = {e.data["intent_id"] for e in controls if "carried_by" in e.data}
    assert set(reports) == carried, f"seed {seed}"
    assert settled  # refunds also finished


# retention: None, or max_events: kills also land in compaction, archiving and pruning
RETENTION = pytest.mark.parametrize("retention", [None, 12], ids=["no-retention", "retention"])


@RETENTION
@pytest.mark.timeout(600)
def test_kill_loop_on_the_file_store(tmp_path, retention):
    kill_loop({"kind": "file", "root": str(tmp_path / "store"), "retention": retention}, tmp_path)


@RETENTION
@pytest.mark.timeout(600)
def test_kill_loop_on_postgres(tmp_path, pg_cluster, retention):
    from agentkit.stores.postgres import PostgresEventStore

    schema = pg_cluster.fresh_schema()
    store = PostgresEventStore(pg_cluster.conninfo, schema=schema, connect_timeout=10)
    try:
        store.migrate()
    finally:
        store.close()
    kill_loop({"kind": "postgres", "conninfo": pg_cluster.conninfo, "schema": schema, "retention": retention},
              tmp_path)


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
