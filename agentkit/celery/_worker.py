"""The worker side of Celery jobs (private; see :mod:`agentkit.celery._jobs`): the job
task, one delivery of it (claim, settle, or check again later) and a claimed job running
here (the process, its output, its heartbeat, abort requests)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _process
from ..cancel import CancelToken
from ..errors import StoreUnavailableError
from ..events import RuntimeEvent
from ..jobs._base import JobEvent, JobState, JobStatus
from ._record import Record, Records, commit, ended, event_id, persist, report_end, runtime_event

if TYPE_CHECKING:
    from ._app import AgentTasks

__all__ = ["TASK_NAME", "register"]

log = logging.getLogger("agentkit.jobs")

TASK_NAME = "agentkit.run_job"
_STALE_HEARTBEATS = 5
_POLL = 0.25  # seconds between two looks at a running job's record (abort requests, output)
_TAIL_CHARS = 4000
_MAX_OUTPUT = 1_048_576
_KILL_GRACE = 1.0


def register(tasks: AgentTasks) -> Any:
    """Register the job task on ``tasks.app``; returns it."""

    def run_job(self: Any, execution_id: str) -> None:
        _Delivery(tasks, self, execution_id).handle()

    as_task: Callable[[Callable[[Any, str], None]], Any] = tasks.app.task(
        name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True, max_retries=None
    )
    return as_task(run_job)


class _Delivery:
    """One delivery of a job's task to a worker."""

    def __init__(self, tasks: AgentTasks, task: Any, execution_id: str) -> None:
        self.tasks = tasks
        self.task = task
        self.eid = execution_id
        self.records = Records(tasks)
        self.stale_after = _STALE_HEARTBEATS * tasks.heartbeat
        self.me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def handle(self) -> None:
        try:
            rec = persist(f"read job {self.eid}", lambda: self.records.load(self.eid),
                           give_up=self.tasks.store_retry_for)
        except StoreUnavailableError as exc:
            self._give_up(exc)
            return
        if rec is None or "celery" not in rec.body:
            log.warning("agentkit.celery: job %s has no record (its start was rolled back); not run", self.eid)
            return
        rec, _changed = persist(f"claim job {self.eid}", lambda: self.records.update(self.eid, self._claim))
        if rec.terminal:
            report_end(self.tasks, self.records, rec)
        elif rec.meta.get("owner") == self.me:
            _Run(self, rec).run()
        else:  # another worker runs it and still says so: look again once it may have gone quiet
            raise self.task.retry(countdown=self.stale_after, max_retries=None)

    def _claim(self, rec: Record) -> dict[str, Any] | None:
        """Start the job here, settle it, or (None) leave it to the worker that has it."""
        meta = rec.meta
        if rec.terminal:
            return None
        claim: dict[str, Any] = {"phase": "started", "owner": self.me, "worker": socket.gethostname(),
                                 "heartbeat": time.time(), "attempt": int(meta.get("attempt", 0)) + 1}
        if meta.get("phase") == "queued":
            if meta.get("abort"):
                return ended(rec, "aborted", meta["abort"])
            return rec.changed(**claim)
        if time.time() - float(meta.get("heartbeat", 0.0)) < self.stale_after:
            return None  # its worker is alive
        if meta.get("idempotent") and not meta.get("abort"):
            return rec.changed(**claim)  # run again: its worker died, and running it twice is harmless
        return ended(rec, "lost", f"the worker running this job ({meta.get('worker')}) stopped answering "
                                   f"(it died or lost PostgreSQL); its process was not necessarily stopped, "
                                   f"and the job was not started again (it is not idempotent)")

    def _give_up(self, exc: StoreUnavailableError) -> None:
        """PostgreSQL stayed unreachable past store_retry_for: fail the job (once the
        store answers again) without running it."""
        error = (f"the worker could not reach PostgreSQL for {self.tasks.store_retry_for:g} s "
                 f"({exc}); the job was not run")

        def decide(rec: Record) -> dict[str, Any] | None:
            return ended(rec, "failed", error) if rec.meta.get("phase") == "queued" and not rec.terminal else None

        log.error("agentkit.celery: job %s: %s; recording its failure once PostgreSQL answers", self.eid, error)
        rec, _changed = persist(f"fail job {self.eid}", lambda: self.records.update(self.eid, decide))
        report_end(self.tasks, self.records, rec)


class _Run:
    """A claimed job running on this worker: the process, its output, its heartbeat."""

    def __init__(self, delivery: _Delivery, rec: Record) -> None:
        self.d = delivery
        self.rec = rec
        self.eid = delivery.eid
        self.cancel = CancelToken()
        self.superseded = False  # another process settled the job meanwhile
        self.abort_reason: str | None = None
        self.lock = threading.Lock()
        self.pending: list[tuple[str, str]] = []  # output not yet committed
        self.early: list[RuntimeEvent] = []  # events built but not committed yet (store unreachable)
        self.seq = 1
        self.tail: list[str] = []
        self.tail_len = 0
        self.out_bytes = 0
        self.done = threading.Event()

    def run(self) -> None:
        state = self.rec.state
        workdir = state.cwd or os.getcwd()
        if not os.path.isdir(workdir):
            self._finish("failed", f"working directory {workdir!r} does not exist on worker "
                                   f"{socket.gethostname()}", None)
            return
        try:
            proc = _process.spawn(list(state.argv), cwd=workdir, env=None)
        except OSError as exc:
            self._finish("failed", f"could not start: {exc}", None)
            return
        now = time.time()
        try:
            self.rec, _ = self.d.records.update(self.eid, lambda r: self._mine(r, pid=proc.pid, updated_at=now))
        except StoreUnavailableError:
            pass  # the heartbeat records the pid once PostgreSQL answers
        started = JobState.from_dict({**self.rec.body, "pid": proc.pid})
        event = runtime_event(self.d.records, self.rec,
                               JobEvent(type="started", execution_id=self.eid, seq=1, state=started),
                               event_id(self.eid, f"start-{self.rec.meta.get('attempt', 1)}"))
        try:
            commit(self.d.tasks, self.rec.meta["session_id"], [event])
        except StoreUnavailableError:
            with self.lock:
                self.early = [event]  # committed with the first output, once PostgreSQL answers
        keeper = threading.Thread(target=self._keep, name=f"agentkit-celery-job-{self.eid}", daemon=True)
        keeper.start()
        timeout = self.rec.meta.get("timeout")
        try:
            outcome = _process.supervise(proc, command=state.command, timeout=timeout, cancel=self.cancel,
                                         max_output_bytes=_MAX_OUTPUT, on_output=self._output, capture=False,
                                         grace=_KILL_GRACE)
            status, error = self._verdict(outcome, timeout)
            exit_code = outcome.exit_code
        except BaseException as exc:  # noqa: BLE001 - recorded as the job's failure
            _process.kill_group(proc, _KILL_GRACE)
            status, error, exit_code = "failed", f"{type(exc).__name__}: {exc}", proc.wait()
        ended_at = time.time()  # the job's finished_at: when its process ended, not when that was recorded
        self.done.set()
        keeper.join()
        if self.superseded:
            return  # settled elsewhere (lost while this worker could not say it was alive)
        self._flush(forever=True)
        self._finish(status, error, exit_code, ended_at)

    def _mine(self, rec: Record, **fields: Any) -> dict[str, Any] | None:
        """``rec`` with ``fields`` and a fresh heartbeat, while this run still owns it."""
        if rec.terminal or rec.meta.get("owner") != self.d.me:
            return None
        state = JobState.from_dict({**rec.body, **fields}) if fields else rec.state
        return rec.changed(state, heartbeat=time.time())

    def _output(self, stream: str, chunk: str) -> None:
        with self.lock:
            self.pending.append((stream, chunk))
            self.out_bytes += len(chunk.encode("utf-8"))
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= _TAIL_CHARS:
                self.tail_len -= len(self.tail.pop(0))

    def _verdict(self, outcome: Any, timeout: float | None) -> tuple[JobStatus, str | None]:
        if outcome.cancelled and self.abort_reason is not None:
            return "aborted", self.abort_reason
        if outcome.timed_out:
            return "failed", f"timed out after {timeout:g}s; the process group was terminated"
        if outcome.output_limited:
            return "failed", "output exceeded the output cap; the process group was terminated"
        if outcome.cancelled:
            return "aborted", self.cancel.reason or "aborted"
        return "finished", None

    def _keep(self) -> None:
        """Until the process ends: commit output, heartbeat, and watch for an abort
        request or a settlement made elsewhere."""
        last_beat = time.monotonic()
        while not self.done.wait(_POLL):
            self._flush()
            try:
                if time.monotonic() - last_beat >= self.d.tasks.heartbeat:
                    rec, _ = self.d.records.update(self.eid, self._mine)
                    last_beat = time.monotonic()
                else:
                    rec = self.d.records.get(self.eid)
            except StoreUnavailableError:
                continue  # look again; the process keeps running
            if rec.terminal or rec.meta.get("owner") != self.d.me:
                self.superseded = True
                self.cancel.cancel("the job was settled by another process")
                return
            if rec.meta.get("abort") and self.abort_reason is None:
                self.abort_reason = str(rec.meta["abort"])
                self.cancel.cancel(self.abort_reason)

    def _flush(self, forever: bool = False) -> None:
        """Commit the output gathered so far as ``job-output`` events (consecutive
        chunks of one stream become one event)."""
        with self.lock:
            early, self.early = self.early, []
            pending, self.pending = self.pending, []
        events: list[RuntimeEvent] = list(early)
        for stream, chunk in pending:
            self.seq += 1
            events.append(runtime_event(self.d.records, self.rec, JobEvent(
                type="output", execution_id=self.eid, seq=self.seq, stream=stream, chunk=chunk)))  # type: ignore[arg-type]
        if not events:
            return
        sid = self.rec.meta["session_id"]
        if forever:
            persist(f"report the output of job {self.eid}", lambda: commit(self.d.tasks, sid, events))
            return
        try:
            commit(self.d.tasks, sid, events)
        except StoreUnavailableError:
            with self.lock:  # kept for the next flush (the same events: a repeat is refused)
                self.early = events + self.early
        except Exception as exc:  # noqa: BLE001 - the job keeps running; its end is still reported
            log.warning("agentkit.celery: could not commit the output of job %s: %s", self.eid, exc)

    def _finish(self, status: JobStatus, error: str | None, exit_code: int | None,
                ended_at: float | None = None) -> None:
        """Record the terminal state (unless another process settled the job) and
        report it."""
        with self.lock:
            tail = "".join(self.tail)[-_TAIL_CHARS:]
            out_bytes = self.out_bytes

        def decide(rec: Record) -> dict[str, Any] | None:
            if rec.terminal or rec.meta.get("owner") != self.d.me:
                return None
            end = {"finished_at": ended_at} if ended_at is not None else {}
            return ended(rec, status, error, exit_code=exit_code, output_tail=tail, output_bytes=out_bytes, **end)

        rec, changed = persist(f"record the end of job {self.eid}", lambda: self.d.records.update(self.eid, decide))
        if changed:
            report_end(self.d.tasks, self.d.records, rec)
