"""JobRunner: real background processes on worker threads, ordered events, backpressure,
failing subscribers, abort and retention."""

from __future__ import annotations

import re
import threading
import time
import warnings

import pytest
from _procs import alive, escaping, kill_escaped, our_ends_of_its_stdout, wait_for, within

from agentkit import AccessDenied, ConfigurationError, JobNotFoundError
from agentkit.execution import LocalExecutionContext


class Recorder:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, event):
        with self.lock:
            self.events.append(event)

    def of(self, eid):
        with self.lock:
            return [e for e in self.events if e.execution_id == eid]

    def finished(self, eid):
        return [e for e in self.of(eid) if e.type == "finished"]


@pytest.fixture
def ctx(tmp_path):
    with LocalExecutionContext(tmp_path, kill_grace=0.3) as c:
        yield c


def test_start_returns_at_once_and_events_arrive_in_order(ctx):
    rec = Recorder()
    ctx.jobs.subscribe(rec)
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done; exit 4"
    started = time.monotonic()
    state = ctx.jobs.start("bash", ["-c", script], tool_call_id="tc-1")
    assert time.monotonic() - started < 5
    assert state.state == "running" and state.pid and state.tool_call_id == "tc-1"
    done = wait_for(lambda: rec.finished(state.execution_id), what="finished event")[0]
    events = rec.of(state.execution_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "started" and events[-1] is done
    out = "".join(e.chunk for e in events if e.type == "output" and e.stream == "stdout")
    err = "".join(e.chunk for e in events if e.type == "output" and e.stream == "stderr")
    assert out == "out1\nout2\nout3\n" and err == "err1\nerr2\nerr3\n"
    final = ctx.jobs.get(state.execution_id)
    assert final == done.state
    assert final.state == "finished" and final.exit_code == 4 and final.finished_at
    assert "out3" in final.output_tail and final.output_bytes == 30


def test_slow_subscriber_applies_backpressure_and_loses_nothing(tmp_path):
    gate = threading.Event()
    received = []

    def slow(event):
        gate.wait(30)
        if event.type == "output":
            received.append(event.chunk)

    with LocalExecutionContext(tmp_path, max_shell_output_bytes=50_000_000,
                               job_listener_queue_size=1) as c:
        c.jobs.subscribe(slow)
        state = c.jobs.start("seq", ["1", "1000000"])  # ~6.9 MB, far more than all buffers
        time.sleep(1.0)
        # the subscriber has not taken anything: the job is held back, not finished
        assert c.jobs.get(state.execution_id).state == "running"
        assert alive(state.pid)
        gate.set()
        wait_for(lambda: not c.jobs.get(state.execution_id).running, what="job end")
        final = c.jobs.get(state.execution_id)
    assert final.state == "finished" and final.exit_code == 0
    wait_for(lambda: len("".join(received)) >= final.output_bytes, what="all output delivered")
    text = "".join(received)
    assert text == "".join(f"{i}\n" for i in range(1, 1_000_001))


def test_raising_subscriber_is_removed_with_a_warning_and_its_job_terminated(ctx):
    rec = Recorder()
    ctx.jobs.subscribe(rec)

    def broken(event):
        if event.type == "output":
            raise RuntimeError("listener bug")

    ctx.jobs.subscribe(broken)
    with pytest.warns(RuntimeWarning, match="listener bug"):
        state = ctx.jobs.start("bash", ["-c", "echo hello; sleep 60"])
        wait_for(lambda: rec.finished(state.execution_id), what="job terminated")
    final = ctx.jobs.get(state.execution_id)
    assert final.state == "failed" and "listener bug" in final.error
    assert not alive(state.pid) or wait_for(lambda: not alive(state.pid))
    # the healthy subscriber keeps receiving later jobs; the broken one is gone
    second = ctx.jobs.start("echo", ["again"])
    wait_for(lambda: rec.finished(second.execution_id))
    assert ctx.jobs.get(second.execution_id).state == "finished"


def test_stalled_subscriber_is_removed_and_its_job_terminated(tmp_path):
    release = threading.Event()
    seen = []
    delivery = {}

    def stalled(event):
        seen.append(event.type)
        delivery["thread"] = threading.current_thread()
        if event.type == "output":
            release.wait(60)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with LocalExecutionContext(tmp_path, job_listener_timeout=0.5, job_listener_queue_size=1,
                                   kill_grace=0.3) as c:
            c.jobs.subscribe(stalled)
            state = c.jobs.start("bash", ["-c", "while true; do echo tick; sleep 0.01; done"])
            wait_for(lambda: not c.jobs.get(state.execution_id).running, what="stalled job ended")
            final = c.jobs.get(state.execution_id)
            release.set()
            wait_for(lambda: not delivery["thread"].is_alive(), what="delivery thread to end")
    assert final.state == "failed" and "stalled" in final.error
    assert any("stalled" in str(w.message) for w in caught)
    assert seen == ["started", "output"]  # what was queued is not delivered after removal
    wait_for(lambda: not alive(state.pid), what="process gone")


def test_abort_kills_the_process_tree(ctx):
    rec = Recorder()
    ctx.jobs.subscribe(rec)
    state = ctx.jobs.start("sleep 60 & echo bg=$!; echo sh=$$; wait", raw=True)

    def pids():
        text = "".join(e.chunk for e in rec.of(state.execution_id) if e.type == "output")
        found = [int(p) for p in re.findall(r"(?:bg|sh)=(\d+)", text)]
        return found if len(found) == 2 else None

    tree = wait_for(pids, what="pids printed")
    final = ctx.jobs.abort(state.execution_id, "no longer needed")
    assert final.state == "aborted" and final.error == "no longer needed"
    wait_for(lambda: not any(alive(p) for p in tree), what="tree gone")
    assert ctx.jobs.abort(state.execution_id).state == "aborted"  # idempotent


def test_timeout_fails_the_job(ctx):
    state = ctx.jobs.start("sleep", ["60"], timeout=0.5)
    wait_for(lambda: not ctx.jobs.get(state.execution_id).running)
    final = ctx.jobs.get(state.execution_id)
    assert final.state == "failed" and "timed out" in final.error


def test_abort_ends_a_job_whose_escaped_grandchild_keeps_printing(ctx, tmp_path):
    pidfile = tmp_path / "escaped.pid"
    rec = Recorder()
    ctx.jobs.subscribe(rec)
    try:
        state = ctx.jobs.start(escaping(pidfile) + " sleep 30", raw=True)
        wait_for(lambda: any(e.type == "output" for e in rec.of(state.execution_id)), what="first output")
        final = within(lambda: ctx.jobs.abort(state.execution_id, "enough"))
    finally:
        kill_escaped(pidfile)
    assert final.state == "aborted" and final.error == "enough"


def test_a_timeout_fails_a_job_whose_escaped_grandchild_prints_nothing(ctx, tmp_path):
    pidfile = tmp_path / "escaped.pid"
    try:
        # 1 s: the timeout must come before the pipes are abandoned (2 s after the exit)
        state = ctx.jobs.start(escaping(pidfile, chatty=False), raw=True, timeout=1.0)
        final = within(lambda: wait_for(lambda: ctx.jobs.get(state.execution_id).running is False
                                        and ctx.jobs.get(state.execution_id), 30.0))
        # the escaped process writes its pid by itself, maybe after the job ended
        pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the pid file"))
        assert our_ends_of_its_stdout(pid) == []  # its pipes are let go
    finally:
        kill_escaped(pidfile)
    assert final.state == "failed" and "timed out" in final.error


def test_bad_requests_fail_before_anything_runs(ctx, tmp_path):
    with pytest.raises(ConfigurationError, match="not found on PATH"):
        ctx.jobs.start("no-such-program-xyz")
    with pytest.raises(ConfigurationError, match="list of strings"):
        ctx.jobs.start("echo", "a b")
    with pytest.raises(AccessDenied):
        ctx.jobs.start("true", cwd="../..")
    with pytest.raises(JobNotFoundError, match="job_missing"):
        ctx.jobs.get("job_missing")
    with pytest.raises(JobNotFoundError):
        ctx.jobs.abort("job_missing")
    assert ctx.jobs.list() == []


def test_guard_can_veto_a_job_start(tmp_path):
    def guard(request):
        if request.operation == "job-start":
            raise PermissionError("no background work")

    with LocalExecutionContext(tmp_path, before_operation=guard) as c:
        with pytest.raises(AccessDenied, match="no background work"):
            c.jobs.start("touch", ["made"])
        assert c.jobs.list() == []
    assert not (tmp_path / "made").exists()


def test_retention_keeps_the_newest_terminal_jobs(tmp_path):
    with LocalExecutionContext(tmp_path, max_retained_jobs=2) as c:
        ids = []
        for i in range(4):
            s = c.jobs.start("echo", [str(i)])
            wait_for(lambda s=s: not c.jobs.get(s.execution_id).running)
            ids.append(s.execution_id)
        assert [s.execution_id for s in c.jobs.list()] == ids[2:]


def test_closing_the_context_aborts_its_jobs(tmp_path):
    c = LocalExecutionContext(tmp_path, kill_grace=0.3)
    state = c.jobs.start("sleep", ["60"])
    c.close()
    assert c.jobs.get(state.execution_id).state == "aborted"
    wait_for(lambda: not alive(state.pid))
    with pytest.raises(ConfigurationError, match="closed"):
        c.jobs.start("true")


def test_a_context_closed_while_a_job_starts_runs_nothing(tmp_path):
    def guard(request):  # runs inside start(), after its first closed-check
        if request.operation == "job-start":
            c.jobs.close()

    c = LocalExecutionContext(tmp_path, before_operation=guard)
    with pytest.raises(ConfigurationError, match="closed"):
        c.jobs.start("touch", ["made"])
    c.close()
    time.sleep(0.2)
    assert not (tmp_path / "made").exists()
    assert c.jobs.list() == []


def test_close_leaves_no_threads_or_processes_behind(tmp_path):
    delivery = set()
    c = LocalExecutionContext(tmp_path, kill_grace=0.3)
    c.jobs.subscribe(lambda event: delivery.add(threading.current_thread()))
    states = [c.jobs.start("bash", ["-c", "sleep 60 & sleep 60"]) for _ in range(3)]
    wait_for(lambda: delivery, what="an event delivered")
    c.close()
    names = {t.name for t in threading.enumerate()}
    assert not [s for s in states if f"agentkit-job-{s.execution_id}" in names]
    # job events are delivered on the process's shared delivery threads (a pool, not a leak)
    assert not [t for t in delivery if t.is_alive() and t.name != "agentkit-listener"]
    assert all(c.jobs.get(s.execution_id).state == "aborted" for s in states)
    assert not [s.pid for s in states if alive(s.pid)]


def test_a_listener_may_abort_the_job_it_is_hearing(tmp_path):
    """abort() from a delivery thread must not wait for events queued behind itself."""
    box = {}

    def listener(event):
        if event.type == "output" and "returned" not in box:
            started = time.monotonic()
            box["returned"] = c.jobs.abort(event.execution_id, "saw enough")
            box["took"] = time.monotonic() - started
        elif event.type == "finished":
            box["finished"] = event.state

    with LocalExecutionContext(tmp_path, job_listener_queue_size=1, kill_grace=0.3) as c:
        c.jobs.subscribe(listener)
        c.jobs.start("bash", ["-c", "while true; do echo line; done"])
        final = wait_for(lambda: box.get("finished"), what="the finished event")
    assert final.state == "aborted" and final.error == "saw enough"
    assert box["took"] < 5  # it did not sit out the ten-second wait for its own queue
