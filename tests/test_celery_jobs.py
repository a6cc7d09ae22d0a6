"""Background jobs on real Celery workers (agentkit.celery): a real redis-server, real
``celery worker`` processes (prefork and threads pools) and a real PostgreSQL server
(tests/_celery.py, tests/_pg.py). Every test waits on conditions, never on time."""

from __future__ import annotations

import os
import tempfile

import pytest
from _celery import wait_for

from agentkit import Session
from agentkit.execution import LocalExecutionContext

pytestmark = pytest.mark.timeout(600)


def _session(tasks, store, session_id):
    """A session in this (the web) process whose execution context runs jobs on the workers."""
    ctx = LocalExecutionContext(tempfile.mkdtemp(prefix="agentkit-celery-ctx-"), jobs=tasks.job_control())
    return Session.open(session_id, store=store, execution_context=ctx)


def _job_events(session, execution_id=None):
    return [e for e in session.events if getattr(e, "runtime_type", "").startswith("job-")
            and (execution_id is None or e.data.get("execution_id") == execution_id)]


def _terminal(session, execution_id):
    return [e for e in _job_events(session, execution_id)
            if e.runtime_type in ("job-finished", "job-failed", "job-aborted", "job-lost")]


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_job_runs_on_a_worker_and_its_events_reach_the_session(celery_rig, pool):
    _app, tasks, store, _jobs = celery_rig.tasks()
    celery_rig.worker(pool=pool)
    session = _session(tasks, store, f"s-{pool}")
    heard = []
    session.subscribe(heard.append)
    state = session.execution_context.jobs.start("sh", ["-c", "echo hello; echo oops >&2; echo $$"])
    assert state.running and state.pid is None  # queued: a worker starts it
    wait_for(lambda: _terminal(session, state.execution_id), "the job's terminal event")
    [end] = _terminal(session, state.execution_id)
    assert end.runtime_type == "job-finished"
    assert end.data["exit_code"] == 0 and "hello" in end.data["output_tail"]
    kinds = [e.runtime_type for e in _job_events(session, state.execution_id)]
    assert kinds[0] == "job-started" and kinds[-1] == "job-finished" and "job-output" in kinds
    output = "".join(e.data["chunk"] for e in _job_events(session, state.execution_id)
                     if e.runtime_type == "job-output")
    assert "hello" in output and "oops" in output
    pid = next(e.data["pid"] for e in _job_events(session, state.execution_id) if e.runtime_type == "job-started")
    assert str(pid) in output  # the process the worker started
    assert pid != os.getpid()
    final = session.execution_context.jobs.get(state.execution_id)
    assert final.state == "finished" and final.exit_code == 0
    # the listener in this process heard the worker's commits, in store order
    wait_for(lambda: any(getattr(e, "runtime_type", "") == "job-finished" for e in heard), "the listener")
    ids = [e.id for e in heard if getattr(e, "runtime_type", "").startswith("job-")]
    assert ids == [e.id for e in _job_events(session, state.execution_id)]
