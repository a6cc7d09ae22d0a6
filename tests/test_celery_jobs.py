"""Background jobs on real Celery workers (agentkit.celery): a real redis-server, real
``celery worker`` processes (prefork and threads pools) and a real PostgreSQL server
(tests/_celery.py, tests/_pg.py). Every test waits on conditions, never on time."""

from __future__ import annotations

import os
import tempfile

import pytest
from _celery import wait_for
from _procs import alive

from agentkit import ConfigurationError, Session
from agentkit.execution import LocalExecutionContext

pytestmark = [pytest.mark.timeout(600), pytest.mark.processes]  # processes: see tox.ini


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
    heard, job_events = [], []
    session.subscribe(heard.append)
    session.execution_context.jobs.subscribe(job_events.append)  # the port's JobEvents, from the session
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
    wait_for(lambda: job_events and job_events[-1].type == "finished", "the job listener's finished event")
    kinds = [e.type for e in job_events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and set(kinds[1:-1]) == {"output"}
    assert job_events[0].state.pid == pid and job_events[-1].state.state == "finished"
    assert "hello" in "".join(e.chunk for e in job_events if e.type == "output")
    with pytest.raises(ConfigurationError, match="needs the Session"):
        tasks.job_control().subscribe(print)


def _runs(directory, name):
    """How many times job ``name`` really ran (each run appends a line to its file)."""
    try:
        with open(os.path.join(directory, name)) as fh:
            return len(fh.read().splitlines())
    except FileNotFoundError:
        return 0


def _marked(directory, name, rest="sleep 0.3; echo done"):
    """``sh -c`` text that records one real execution of job ``name``, then does ``rest``."""
    return ["-c", f"echo $$ >> {os.path.join(directory, name)}; {rest}"]


def test_fifty_jobs_from_five_sessions_one_worker_killed_each_job_ends_once_none_runs_twice(celery_rig):
    celery_rig.settings.update(visibility_timeout=5.0, heartbeat=1.0)
    _app, tasks, store, job_store = celery_rig.tasks()
    doomed = celery_rig.worker(concurrency=2, name="doomed")
    celery_rig.worker(concurrency=2, name="survivor")
    runs = tempfile.mkdtemp(prefix="agentkit-runs-")
    # every job waits for the gate file: the jobs seen running on the doomed worker are
    # still running when it is killed, however slow the machine (no race with a short job)
    gate = os.path.join(runs, "gate")
    wait_gate = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done"
    sessions = [_session(tasks, store, f"fleet-{i}") for i in range(5)]
    started = {}  # execution id -> (session, marker name)
    for n in range(50):
        session = sessions[n % 5]
        state = session.execution_context.jobs.start("sh", _marked(runs, f"job{n}", wait_gate))
        started[state.execution_id] = (session, f"job{n}")
    control = tasks.job_control()

    def running_on_doomed():
        children = set(doomed.children())
        return [s.execution_id for s in control.list() if s.running and s.pid is not None
                and job_store._get_record(s.execution_id)[0]["celery"]["owner"].split(":")[1]
                in {str(c) for c in children}]

    held = wait_for(running_on_doomed, "a job running on the doomed worker")
    doomed.kill()  # mid-job: its running jobs' processes are orphaned, its tasks unacknowledged
    open(gate, "w").close()  # the other jobs may end now

    def all_ended():
        return all(_terminal(session, eid) for eid, (session, _name) in started.items())

    wait_for(all_ended, "a terminal event for every job", timeout=240, interval=0.25)
    lost, finished = [], []
    for eid, (session, name) in started.items():
        ends = _terminal(session, eid)
        assert len(ends) == 1, f"{eid}: {[e.runtime_type for e in ends]}"  # exactly one terminal event
        assert _runs(runs, name) <= 1, f"{eid} ran {_runs(runs, name)} times"  # never twice
        if ends[0].runtime_type == "job-lost":
            lost.append(eid)
            assert control.get(eid).state == "lost" and "worker" in ends[0].data["error"]
        else:
            assert ends[0].runtime_type == "job-finished" and ends[0].data["exit_code"] == 0, ends[0].data
            assert _runs(runs, name) == 1 and "done" in ends[0].data["output_tail"]
            finished.append(eid)
    # only jobs the doomed worker was running were lost: every other job ran, once
    assert set(held) <= set(lost) and lost, (held, lost)
    assert len(lost) <= 2  # at most its concurrency: nothing queued behind it was lost
    assert len(finished) + len(lost) == 50
    # the terminal events stay single after everything settled (no late report or redelivery)
    for w in celery_rig.workers[1:]:
        w.stop()
    for eid, (session, _name) in started.items():
        assert len(_terminal(session, eid)) == 1


_ABORTER = """
import json, sys, time
sys.path[:0] = {path!r}
import _celery_app
app, tasks, store, job_store = _celery_app.make({broker!r}, {pg!r}, {schema!r})
began = time.monotonic()
state = tasks.job_control().abort({eid!r}, reason="stopped from another process")
print(json.dumps({{"state": state.state, "error": state.error, "seconds": time.monotonic() - began}}))
store.close(); job_store.close()
"""


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_abort_from_another_process_stops_the_running_job_on_its_worker(celery_rig, pool):
    import json
    import subprocess
    import sys
    import time

    from _celery import HERE, ROOT

    _app, tasks, store, _jobs = celery_rig.tasks()
    celery_rig.worker(pool=pool)
    session = _session(tasks, store, f"abort-{pool}")
    state = session.execution_context.jobs.start("sh", ["-c", "echo begun; exec sleep 120"])

    def begun():
        return [e for e in _job_events(session, state.execution_id) if e.runtime_type == "job-output"]

    wait_for(begun, "the job's first output")
    pid = next(e.data["pid"] for e in _job_events(session, state.execution_id) if e.runtime_type == "job-started")
    assert alive(pid)
    code = _ABORTER.format(path=[HERE, ROOT], broker=celery_rig.redis.url, pg=celery_rig.pg.conninfo,
                           schema=celery_rig.schema, eid=state.execution_id)
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["state"] == "aborted" and answer["error"] == "stopped from another process"
    wait_for(lambda: _terminal(session, state.execution_id), "the job-aborted event")
    seen = time.monotonic() - began
    [end] = _terminal(session, state.execution_id)
    assert end.runtime_type == "job-aborted" and end.data["reason"] == "stopped from another process"
    assert not alive(pid)  # the worker stopped the process itself
    assert session.execution_context.jobs.get(state.execution_id).state == "aborted"
    print(f"\nabort ({pool}): the other process's abort() returned after {answer['seconds']:.2f} s; "
          f"job-aborted seen here {seen:.2f} s after it started (process start included)")


def test_abort_of_a_queued_job_settles_it_and_no_worker_runs_it(celery_rig):
    _app, tasks, store, _jobs = celery_rig.tasks()
    runs = tempfile.mkdtemp(prefix="agentkit-runs-")
    session = _session(tasks, store, "abort-queued")
    jobs = session.execution_context.jobs
    state = jobs.start("sh", _marked(runs, "queued"))  # no worker yet: it stays queued
    final = jobs.abort(state.execution_id, reason="not needed")
    assert final.state == "aborted" and final.error == "not needed"
    [end] = _terminal(session, state.execution_id)
    assert end.runtime_type == "job-aborted"
    # a worker that starts now does not run it; a job started after it does run
    celery_rig.worker(pool="threads")
    later = jobs.start("sh", _marked(runs, "later", "echo ok"))
    wait_for(lambda: _terminal(session, later.execution_id), "the later job's end")
    assert _runs(runs, "later") == 1 and _runs(runs, "queued") == 0
    assert len(_terminal(session, state.execution_id)) == 1
    assert jobs.abort(state.execution_id).state == "aborted"  # aborting an ended job changes nothing


def test_a_broker_that_is_down_fails_start_at_once_naming_it_and_leaves_nothing(celery_rig):
    from agentkit.celery import BrokerUnavailableError

    _app, tasks, store, job_store = celery_rig.tasks()
    session = _session(tasks, store, "no-broker")
    before = len(session.events)
    celery_rig.redis.stop()
    with pytest.raises(BrokerUnavailableError) as caught:
        session.execution_context.jobs.start("sh", ["-c", "echo never"])
    assert f"127.0.0.1:{celery_rig.redis.port}" in str(caught.value)
    assert caught.value.broker == celery_rig.redis.url and "Nothing was started" in str(caught.value)
    assert job_store._records() == [] and tasks.job_control().list() == []  # no job record
    assert len(session.events) == before  # no session event
    # the broker back: the same control starts jobs again
    celery_rig.redis.start()
    celery_rig.worker(pool="threads")
    state = session.execution_context.jobs.start("sh", ["-c", "echo back"])
    wait_for(lambda: _terminal(session, state.execution_id), "the job's end")
    assert _terminal(session, state.execution_id)[0].runtime_type == "job-finished"


def test_a_redis_restart_mid_run_loses_no_terminal_event(celery_rig):
    _app, tasks, store, _jobs = celery_rig.tasks()
    worker = celery_rig.worker(pool="threads")
    runs = tempfile.mkdtemp(prefix="agentkit-runs-")
    gate = os.path.join(runs, "gate")
    session = _session(tasks, store, "redis-restart")
    jobs = session.execution_context.jobs
    # the job runs until the test opens the gate, after Redis came back empty
    state = jobs.start("sh", _marked(runs, "long", f"echo waiting; while [ ! -e {gate} ]; do sleep 0.05; done; "
                                                   f"echo through"))
    wait_for(lambda: [e for e in _job_events(session, state.execution_id) if e.runtime_type == "job-output"],
             "the job's first output")
    celery_rig.redis.restart()  # every queue and unacknowledged task is gone
    open(gate, "w").close()
    wait_for(lambda: _terminal(session, state.execution_id), "the job's end")
    [end] = _terminal(session, state.execution_id)
    assert end.runtime_type == "job-finished" and "through" in end.data["output_tail"]
    assert _runs(runs, "long") == 1
    # new jobs run on the restarted broker. (Celery 5.7's worker itself may exit on the
    # reconnect -- kombu fails restoring its unacknowledged task -- after finishing the
    # task at hand; run workers under a supervisor that restarts them, as here.)
    def exited_or_answers():
        if worker.proc.poll() is not None:
            return "exited"
        try:
            return "answers" if _app.control.ping(destination=[worker.name], timeout=0.5) else None
        except Exception:  # noqa: BLE001 - this process's broker connection is reconnecting too
            return None

    if wait_for(exited_or_answers, "the worker to reconnect or exit") == "exited":
        celery_rig.worker(pool="threads", name="restarted")
    again = jobs.start("sh", _marked(runs, "again", "echo ok"))
    wait_for(lambda: _terminal(session, again.execution_id), "a job after the restart")
    assert _runs(runs, "again") == 1 and len(_terminal(session, state.execution_id)) == 1


def test_an_idempotent_job_whose_worker_died_runs_again_a_plain_one_is_lost_once(celery_rig):
    celery_rig.settings.update(visibility_timeout=4.0, heartbeat=0.5)
    _app, tasks, store, _jobs = celery_rig.tasks()
    first = celery_rig.worker(pool="threads", concurrency=2, name="first")
    runs = tempfile.mkdtemp(prefix="agentkit-runs-")
    gate = os.path.join(runs, "gate")
    session = _session(tasks, store, "idempotent")
    jobs = session.execution_context.jobs
    body = f"echo waiting; while [ ! -e {gate} ]; do sleep 0.05; done; echo through"
    again = jobs.start("sh", _marked(runs, "again", body), idempotent=True)
    once = jobs.start("sh", _marked(runs, "once", body))
    wait_for(lambda: _runs(runs, "again") == 1 and _runs(runs, "once") == 1, "both jobs running")
    first.kill()
    open(gate, "w").close()  # the orphaned first runs end on their own; nobody records them
    os.remove(gate)  # (a run started again waits for the gate once more)
    celery_rig.worker(pool="threads", concurrency=2, name="second")
    wait_for(lambda: _terminal(session, once.execution_id), "the plain job settled")
    [lost] = _terminal(session, once.execution_id)
    assert lost.runtime_type == "job-lost" and jobs.get(once.execution_id).state == "lost"
    wait_for(lambda: _runs(runs, "again") == 2, "the idempotent job started again")
    open(gate, "w").close()
    wait_for(lambda: _terminal(session, again.execution_id), "the idempotent job's end")
    [end] = _terminal(session, again.execution_id)
    assert end.runtime_type == "job-finished"
    starts = [e.data["attempt"] for e in _job_events(session, again.execution_id) if e.runtime_type == "job-started"]
    assert starts == [1, 2]
    assert _runs(runs, "once") == 1 and len(_terminal(session, once.execution_id)) == 1


def test_postgresql_down_a_worker_retries_then_fails_the_job_visibly_and_a_run_ends_once_it_is_back(redis_server):
    from _celery import Rig
    from _env import missing
    from _pg import HOW_TO, Cluster, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        missing(f"missing the PostgreSQL server binaries: {HOW_TO}")
    cluster = Cluster(bin_dir)  # a server of this test's own: it is stopped and started again
    rig = Rig(redis_server, cluster, store_retry_for=2.0, migrate=False)
    try:
        _app, tasks, store, _jobs = rig.tasks(migrate=True)
        runs = tempfile.mkdtemp(prefix="agentkit-runs-")
        gate = os.path.join(runs, "gate")
        session = _session(tasks, store, "pg-down")
        jobs = session.execution_context.jobs
        # 1. a job queued while no worker runs; PostgreSQL goes away; a worker takes the task
        never = jobs.start("sh", _marked(runs, "never", "echo ran"))
        cluster.stop()
        worker = rig.worker(pool="threads")
        wait_for(lambda: "recording its failure once PostgreSQL answers" in worker.tail(20000),
                 "the worker to give up on PostgreSQL")
        cluster.start()
        wait_for(lambda: _terminal(session, never.execution_id), "the failed job's event once PostgreSQL is back")
        [failed] = _terminal(session, never.execution_id)
        assert failed.runtime_type == "job-failed" and "PostgreSQL" in failed.data["error"]
        assert "not run" in failed.data["error"] and _runs(runs, "never") == 0
        # 2. a running job whose store goes away: it finishes meanwhile; its output and end
        #    are committed once PostgreSQL is back, once
        state = jobs.start("sh", _marked(runs, "through", f"echo before; while [ ! -e {gate} ]; do sleep 0.05; "
                                                          f"done; echo after"))
        wait_for(lambda: [e for e in _job_events(session, state.execution_id) if e.runtime_type == "job-output"],
                 "the job's first output")
        cluster.stop()
        open(gate, "w").close()
        wait_for(lambda: f"of job {state.execution_id}: PostgreSQL unreachable" in worker.tail(50000),
                 "the worker to retry committing the job's output and end")
        cluster.start()
        wait_for(lambda: _terminal(session, state.execution_id), "the job's end once PostgreSQL is back")
        [end] = _terminal(session, state.execution_id)
        assert end.runtime_type == "job-finished" and "after" in end.data["output_tail"]
        output = "".join(e.data["chunk"] for e in _job_events(session, state.execution_id)
                         if e.runtime_type == "job-output")
        assert output.count("before") == 1 and output.count("after") == 1  # nothing lost, nothing twice
        assert _runs(runs, "through") == 1 and len(_terminal(session, never.execution_id)) == 1
    finally:
        rig.close()
        cluster.destroy()


def test_a_tool_starts_a_job_on_a_worker_and_the_model_sees_its_end(celery_rig):
    from agentkit import ScriptedModel, ToolCall, shell_tools

    _app, tasks, store, _jobs = celery_rig.tasks()
    celery_rig.worker(pool="threads")
    ctx = LocalExecutionContext(tempfile.mkdtemp(prefix="agentkit-celery-ctx-"), jobs=tasks.job_control())
    model = ScriptedModel([ToolCall(name="start_shell", input={"command": "sh", "args": ["-c", "echo from-a-worker"]}),
                           "started it", "it printed from-a-worker"])
    session = Session.open("tool-job", store=store, execution_context=ctx, model=model,
                           tools=shell_tools(ctx, include_raw=False))
    session.ask("run it in the background")
    [state] = ctx.jobs.list()
    assert state.tool_call_id is not None  # the tool call that started it
    wait_for(lambda: _terminal(session, state.execution_id), "the job's end")
    session.generate()  # the next inference reads the worker's job-finished
    seen = " ".join(p.text for m in model.requests[-1].messages for p in m.content if hasattr(p, "text"))
    assert 'type="job-finished"' in seen and "from-a-worker" in seen


def test_bad_input_and_a_control_without_a_session_are_refused_before_anything_is_recorded(celery_rig):
    from agentkit import JobNotFoundError

    _app, tasks, store, job_store = celery_rig.tasks()
    session = _session(tasks, store, "refusals")
    jobs = session.execution_context.jobs
    for call in (lambda: jobs.start(""), lambda: jobs.start("sh", "-c true"),
                 lambda: jobs.start("echo hi", ["x"], raw=True), lambda: jobs.start("true", timeout=0),
                 lambda: jobs.start("true", cwd="relative/dir"), lambda: jobs.start("true", idempotent="yes"),
                 lambda: tasks.job_control().start("true")):
        with pytest.raises(ConfigurationError):
            call()
    with pytest.raises(ConfigurationError, match="own tasks.job_control"):
        Session.open("another", store=store, execution_context=session.execution_context)
    with pytest.raises(ConfigurationError, match="event store the workers share"):
        Session(execution_context=LocalExecutionContext(tempfile.mkdtemp(), jobs=tasks.job_control()))
    with pytest.raises(JobNotFoundError):
        jobs.get("job_unknown")
    assert job_store._records() == [] and not _job_events(session)
    bound = tasks.job_control(session_id="refusals")  # bound without a Session object
    state = bound.start("true")
    assert [s.execution_id for s in jobs.list()] == [state.execution_id]


def test_a_failed_pooled_session_is_opened_afresh_for_a_job_event(celery_rig):
    """A worker's pooled session that failed (an append error it cannot resolve) would
    refuse every later job event; the commit closes it and the pool opens it again."""
    from agentkit.celery._record import commit
    from agentkit.events import RuntimeEvent

    _app, tasks, store, _jobs = celery_rig.tasks()
    pooled = tasks._sessions().get("failed-once")
    pooled._log.failed = RuntimeError("an append failed")  # what a failed append leaves
    event = RuntimeEvent(runtime_type="job-output", data={"execution_id": "job_x", "chunk": "hi"})
    commit(tasks, "failed-once", [event, event])  # the same event twice: committed once
    assert [e.id for e in store.load("failed-once").events] == [event.id]
    assert pooled.closed and tasks._sessions().get("failed-once") is not pooled


def test_a_prefork_pool_process_killed_mid_job_requeues_its_task_which_settles_the_job_lost(celery_rig):
    """Only the pool process dies (the worker lives): Celery requeues the task at once
    (reject on worker lost); while its owner's heartbeat is still fresh the delivery checks
    again later (``retry``), and it settles the job lost once the heartbeat went quiet."""
    import signal

    celery_rig.settings.update(heartbeat=0.5)
    _app, tasks, store, job_store = celery_rig.tasks()
    worker = celery_rig.worker(pool="prefork", concurrency=1)
    runs = tempfile.mkdtemp(prefix="agentkit-runs-")
    session = _session(tasks, store, "pool-process")
    state = session.execution_context.jobs.start("sh", _marked(runs, "job", "exec sleep 30"))
    wait_for(lambda: _runs(runs, "job") == 1, "the job running")
    owner = job_store._get_record(state.execution_id)[0]["celery"]["owner"]
    child = int(owner.split(":")[1])
    assert child in worker.children()
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: _terminal(session, state.execution_id), "the job settled", timeout=120)
    [end] = _terminal(session, state.execution_id)
    assert end.runtime_type == "job-lost" and _runs(runs, "job") == 1
    assert worker.proc.poll() is None  # the worker itself lives on and runs the next job
    later = session.execution_context.jobs.start("sh", _marked(runs, "later", "echo ok"))
    wait_for(lambda: _terminal(session, later.execution_id), "a later job")
    assert _terminal(session, later.execution_id)[0].runtime_type == "job-finished"
