"""Background jobs on Celery workers (private): the :class:`CeleryJobControl` a session's
execution context holds, and the worker-side job task.

The job's record in the :class:`~agentkit.stores.postgres.PostgresJobStore` is the one
truth about it: a :class:`~agentkit.execution.JobState` plus agentkit.celery's own fields
(``celery``: the session, the phase ``queued``/``started``/``done``, the worker holding it
and its last heartbeat, an abort request, whether the terminal runtime event was
committed). Every change is a compare-and-swap on the record's revision, decided again on
the current record after a conflict, so two processes never both start, settle or report
one job.

- ``start`` records the job (``queued``), then publishes its task; a broker that cannot
  take it rolls the record back and raises :class:`~agentkit.errors.BrokerUnavailableError`
  (nothing is left: no record, no session event).
- A worker claims a ``queued`` job (``started``, its owner token, ``attempt`` + 1) before it
  spawns the process, heartbeats while it runs, polls the record for an abort request,
  commits ``job-started``, ``job-output`` and the terminal runtime event to the session
  through the event store, and marks the terminal event reported.
- A delivery that finds the job ``started`` by an owner that still heartbeats checks again
  later (``retry``); one whose owner went silent for 5 heartbeats (its worker died) settles
  it ``lost`` (``job-lost``), or, for a job started with ``idempotent=True``, runs it again.
- The terminal runtime event has an id derived from the execution id, so a report repeated
  after a crash between the commit and its mark is refused by the session's log (a
  duplicate id) instead of being committed twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import (
    BrokerUnavailableError,
    ConfigurationError,
    JobNotFoundError,
    StoreConflictError,
    StoreError,
    StoreUnavailableError,
)
from ..events import RuntimeEvent
from ..execution import _process
from ..execution.base import JobEvent, JobListener, JobState, JobStatus, _display
from ..jobs._bridge import _job_runtime_event

if TYPE_CHECKING:
    from ._app import AgentTasks

__all__ = ["TASK_NAME", "CeleryJobControl", "register"]

log = logging.getLogger("agentkit.jobs")

TASK_NAME = "agentkit.run_job"
_STALE_HEARTBEATS = 5
_POLL = 0.25  # seconds between two looks at a running job's record (abort requests)
_FLUSH = 0.2  # seconds output waits before it is committed to the session
_TAIL_CHARS = 4000
_MAX_OUTPUT = 1_048_576
_KILL_GRACE = 1.0
_ABORT_WAIT = 15.0  # seconds abort() waits for a worker to report the job stopped


def _event_id(execution_id: str, what: str) -> str:
    """A deterministic event id (32 hex digits) for one of a job's runtime events."""
    return hashlib.sha256(f"agentkit-celery-job/{execution_id}/{what}".encode()).hexdigest()[:32]


class _Record:
    """One stored job record: the JSON object and its revision."""

    __slots__ = ("body", "revision")

    def __init__(self, body: dict[str, Any], revision: int) -> None:
        self.body = body
        self.revision = revision

    @property
    def state(self) -> JobState:
        return JobState.from_dict(self.body)

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.body.get("celery") or {}
        return meta

    @property
    def terminal(self) -> bool:
        return self.body.get("state") != "running"

    def changed(self, state: JobState | None = None, **meta: Any) -> dict[str, Any]:
        """A new body: ``state`` (default: the current one) and the meta fields given."""
        body = (state or self.state).to_dict()
        body["celery"] = {**self.meta, **meta}
        return body


def _ended(rec: _Record, status: JobStatus, error: str | None, **fields: Any) -> dict[str, Any]:
    """A terminal body for ``rec``: ``status``, ``error``, the JobState ``fields`` given."""
    now = time.time()
    state = JobState.from_dict({**rec.body, "state": status, "error": error, "updated_at": now,
                                "finished_at": now, **fields})
    return rec.changed(state, phase="done", reported=False)


# -- the record -------------------------------------------------------------------------


class _Records:
    """The job records of one AgentTasks (its PostgresJobStore)."""

    def __init__(self, tasks: AgentTasks) -> None:
        self.tasks = tasks
        self.store: Any = tasks.job_store

    def load(self, execution_id: str) -> _Record | None:
        found = self.store._get_record(execution_id)
        return None if found is None else _Record(*found)

    def get(self, execution_id: str) -> _Record:
        rec = self.load(execution_id)
        if rec is None or "celery" not in rec.body:
            raise JobNotFoundError(
                f"no Celery job with execution id {execution_id!r} in {self.store!r}; list() shows the known jobs"
            )
        return rec

    def create(self, body: dict[str, Any]) -> _Record:
        return _Record(body, self.store._put_record(body["execution_id"], body["started_at"], body, 0))

    def update(self, execution_id: str, decide: Callable[[_Record], dict[str, Any] | None]) -> tuple[_Record, bool]:
        """Apply ``decide(record)`` (a new body, or None: nothing to change) with
        compare-and-swap, deciding again on the current record after a conflict.
        Returns (the record now, whether this call changed it)."""
        while True:
            rec = self.get(execution_id)
            body = decide(rec)
            if body is None:
                return rec, False
            try:
                revision = self.store._put_record(execution_id, body["started_at"], body, rec.revision)
            except StoreConflictError:
                continue  # another process changed it: decide again
            return _Record(body, revision), True

    def session_jobs(self, session_id: str | None) -> list[JobState]:
        """The jobs of ``session_id`` (None: every Celery job), oldest first."""
        return [
            JobState.from_dict(body) for body, _rev in self.store._records()
            if "celery" in body and (session_id is None or body["celery"].get("session_id") == session_id)
        ]


class _SessionJobs:
    """What the bridge's event builder asks of a job control: the session's jobs."""

    def __init__(self, records: _Records, session_id: str) -> None:
        self._records, self._sid = records, session_id

    def list(self) -> list[JobState]:  # noqa: A003 - the port's name
        return self._records.session_jobs(self._sid)


def _runtime_event(records: _Records, rec: _Record, event: JobEvent, event_id: str | None = None) -> RuntimeEvent:
    """The session runtime event a local job would produce for ``event``."""
    runtime_type, data = _job_runtime_event(event, _SessionJobs(records, rec.meta["session_id"]))
    if event.type == "started":
        data.update(attempt=rec.meta.get("attempt", 1), worker=rec.meta.get("worker"))
    kwargs: dict[str, Any] = {"id": event_id} if event_id else {}
    return RuntimeEvent(runtime_type=runtime_type, data=data, **kwargs)


def _commit(tasks: AgentTasks, session_id: str, events: Sequence[RuntimeEvent]) -> None:
    """Commit ``events`` to the session (through this process's session pool). An event
    already committed (the same id: a report repeated after a crash) is skipped."""
    with tasks._sessions().session(session_id) as session:
        for event in events:
            try:
                session.push_event(event)
            except ConfigurationError:
                if any(e.id == event.id for e in session.events):
                    continue  # committed before (by an earlier attempt): not twice
                raise


def _persist(what: str, fn: Callable[[], Any], *, give_up: float | None = None) -> Any:
    """``fn()``, retried with backoff while PostgreSQL is unreachable: for ``give_up``
    seconds (then its StoreUnavailableError), or (None) until it answers."""
    deadline = None if give_up is None else time.monotonic() + give_up
    delay = 0.1
    while True:
        try:
            return fn()
        except StoreUnavailableError as exc:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            log.warning("agentkit.celery: %s: PostgreSQL unreachable (%s); retrying in %.1f s", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _report_end(tasks: AgentTasks, records: _Records, rec: _Record) -> None:
    """Commit the terminal runtime event of ``rec`` (once) and mark it reported."""
    if not rec.terminal or rec.meta.get("reported"):
        return
    eid = rec.body["execution_id"]
    event = _runtime_event(records, rec, JobEvent(type="finished", execution_id=eid, seq=0, state=rec.state),
                           _event_id(eid, "end"))
    _persist(f"report the end of job {eid}", lambda: _commit(tasks, rec.meta["session_id"], [event]))
    _persist(f"mark job {eid} reported",
             lambda: records.update(eid, lambda r: None if r.meta.get("reported") else r.changed(reported=True)))


# -- the job control (any process) ------------------------------------------------------


class CeleryJobControl:
    """Jobs that run on Celery workers, behind the :class:`~agentkit.execution.JobControl`
    port (``tasks.job_control()``).

    A session binds it when it is in the session's execution context; the jobs it starts
    belong to that session, which receives their runtime events (``job-started``,
    ``job-output``, ``job-finished``, ``job-failed``, ``job-aborted``, ``job-lost``) from the
    workers through the event store. ``get``, ``list`` and ``abort`` work from any process.
    """

    def __init__(self, tasks: AgentTasks, *, session_id: str | None = None) -> None:
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise ConfigurationError(f"session_id must be a non-empty string, got {session_id!r}")
        self._tasks = tasks
        self._records = _Records(tasks)
        self._session_id = session_id
        self._session: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<CeleryJobControl session={self._session_id!r} broker={self._tasks.broker!r}>"

    @property
    def session_id(self) -> str | None:
        """The session whose jobs this control starts (None until one binds it)."""
        return self._session_id

    def bind_session(self, session: Any) -> Callable[[], None]:
        """Make the jobs started here belong to ``session`` (the job bridge calls this when
        the session is made with an execution context holding this control). The
        session must be on the event store the workers write to. Returns a function
        that ends the binding."""
        sid = getattr(session, "session_id", None)
        if getattr(session, "store", None) is None or not sid:
            raise ConfigurationError(
                "Celery jobs need a session on the event store the workers share (a PostgresEventStore "
                "with a session_id): their runtime events are committed there by the workers"
            )
        with self._lock:
            if self._session_id not in (None, sid):
                raise ConfigurationError(
                    f"this job control already belongs to session {self._session_id!r}; give each session "
                    f"its own tasks.job_control()"
                )
            self._session_id, self._session = sid, session

        def unbind() -> None:
            with self._lock:
                if self._session is session:
                    self._session = None

        return unbind

    # -- start -------------------------------------------------------------------------

    def start(self, executable: str, args: Sequence[str] = (), *, raw: bool = False,
              cwd: str | None = None, timeout: float | None = None,
              tool_call_id: str | None = None, idempotent: bool = False) -> JobState:
        """Queue a job for a worker and return its ``running`` state at once (``pid`` is
        None until a worker starts it: ``job-started`` says when).

        ``raw=True`` runs ``executable`` as shell text (``bash -lc``); otherwise the
        worker runs ``executable`` with ``args`` as literal arguments, in ``cwd`` (a
        directory on the worker; default: the worker's working directory). ``timeout``
        (seconds) ends it as failed. ``idempotent=True`` declares that running it again
        is harmless: a job whose worker died is then started again on another worker
        instead of being settled ``lost``. Bad input raises before anything is recorded;
        a broker that cannot take the task raises
        :class:`~agentkit.errors.BrokerUnavailableError` and leaves nothing behind."""
        argv = _argv(executable, args, raw)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds (or None), got {timeout!r}")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
            raise ConfigurationError(f"cwd must be an absolute path on the workers (or None), got {cwd!r}")
        if not isinstance(idempotent, bool):
            raise ConfigurationError(f"idempotent must be True or False, got {idempotent!r}")
        sid = self._session_id
        if sid is None:
            raise ConfigurationError(
                "this job control belongs to no session: put it in a session's execution context "
                "(LocalExecutionContext(..., jobs=tasks.job_control())) or pass "
                "tasks.job_control(session_id=...)"
            )
        now = time.time()
        execution_id = f"job_{uuid.uuid4().hex[:12]}"
        state = JobState(execution_id=execution_id, command=_display(argv, raw), argv=tuple(argv),
                         state="running", tool_call_id=tool_call_id, cwd=cwd or "", started_at=now, updated_at=now)
        body = state.to_dict()
        body["celery"] = {"session_id": sid, "phase": "queued", "idempotent": idempotent, "timeout": timeout,
                          "attempt": 0, "owner": None, "worker": None, "heartbeat": 0.0, "abort": None,
                          "reported": False}
        self._records.create(body)  # the job is known before any worker can see its task
        try:
            self._tasks._job_task.apply_async(
                args=[execution_id], task_id=execution_id, retry=True,
                retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2},
            )
        except Exception as exc:  # noqa: BLE001 - any publish failure: roll back, say which broker
            rolled_back = self._roll_back(execution_id)
            broker = self._tasks.broker
            raise BrokerUnavailableError(
                f"cannot start the job: the Celery broker {broker} did not take its task "
                f"({type(exc).__name__}: {exc}). Nothing was started"
                + ("" if rolled_back else f" (its record {execution_id!r} could not be removed: it is "
                   f"settled as failed when a worker or abort() next looks at it)")
                + ". Start the broker (or fix broker_url) and try again.",
                broker=broker,
            ) from exc
        return state

    def _roll_back(self, execution_id: str) -> bool:
        try:
            self._records.store.delete(execution_id)
            return True
        except StoreError as exc:
            log.error("agentkit.celery: could not remove the record of job %s whose task was not published: %s",
                      execution_id, exc)
            return False

    # -- queries -----------------------------------------------------------------------

    def get(self, execution_id: str) -> JobState:
        """A job's current state, from its record (any process)."""
        return self._records.get(execution_id).state

    def list(self) -> list[JobState]:  # noqa: A003 - the port's name
        """The jobs of this control's session (every Celery job when it belongs to none),
        oldest first."""
        return self._records.session_jobs(self._session_id)

    # -- abort -------------------------------------------------------------------------

    def abort(self, execution_id: str, reason: str = "aborted") -> JobState:
        """Stop a job from any process and return its final state (a job that already
        ended: its state unchanged). A queued job is settled ``aborted`` here and its task
        revoked; a running one is stopped by its worker (which polls the record) and
        settled there; this waits until the record says so (about 15 s at most, then
        returns the state as it is)."""
        if not isinstance(reason, str):
            raise ConfigurationError(f"reason must be a string, got {reason!r}")

        def decide(rec: _Record) -> dict[str, Any] | None:
            if rec.terminal:
                return None
            if rec.meta.get("phase") == "queued":
                return _ended(rec, "aborted", reason)
            if rec.meta.get("abort"):
                return None
            return rec.changed(abort=reason)

        rec, changed = self._records.update(execution_id, decide)
        if changed and rec.terminal:  # settled here, before any worker ran it
            try:
                self._tasks.app.control.revoke(execution_id)
            except Exception as exc:  # noqa: BLE001 - the record already refuses to run it
                log.info("agentkit.celery: could not revoke the task of job %s (%s); its worker will skip it",
                         execution_id, exc)
            _report_end(self._tasks, self._records, rec)
            return rec.state
        deadline = time.monotonic() + _ABORT_WAIT
        while not rec.terminal and time.monotonic() < deadline:
            time.sleep(0.05)
            rec = self._records.get(execution_id)
        return rec.state

    # -- events ------------------------------------------------------------------------

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Celery jobs report through their session: subscribe to the session's events
        (``job-*`` runtime events), which are the same in every process."""
        raise ConfigurationError(
            "the events of Celery jobs arrive as runtime events of their session (job-started, job-output, "
            "job-finished, ...): use session.subscribe(listener) in any process"
        )


def _argv(executable: str, args: Sequence[str], raw: bool) -> list[str]:
    """The argument vector a worker runs, or ConfigurationError for bad input."""
    if not isinstance(executable, str) or not executable:
        raise ConfigurationError("give the executable (or, with raw=True, the shell text) as a non-empty string")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise ConfigurationError("args must be a list of strings, not one string")
    if raw:
        if args:
            raise ConfigurationError("raw shell text takes no separate args; put them in the text")
        return ["bash", "-lc", executable]
    return [executable, *args]


# -- the worker side ------------------------------------------------------------------------


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
        self.records = _Records(tasks)
        self.stale_after = _STALE_HEARTBEATS * tasks.heartbeat
        self.me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def handle(self) -> None:
        try:
            rec = _persist(f"read job {self.eid}", lambda: self.records.load(self.eid),
                           give_up=self.tasks.store_retry_for)
        except StoreUnavailableError as exc:
            self._give_up(exc)
            return
        if rec is None or "celery" not in rec.body:
            log.warning("agentkit.celery: job %s has no record (its start was rolled back); not run", self.eid)
            return
        rec, _changed = _persist(f"claim job {self.eid}", lambda: self.records.update(self.eid, self._claim))
        if rec.terminal:
            _report_end(self.tasks, self.records, rec)
        elif rec.meta.get("owner") == self.me:
            _Run(self, rec).run()
        else:  # another worker runs it and still says so: look again once it may have gone quiet
            raise self.task.retry(countdown=self.stale_after, max_retries=None)

    def _claim(self, rec: _Record) -> dict[str, Any] | None:
        """Start the job here, settle it, or (None) leave it to the worker that has it."""
        meta = rec.meta
        if rec.terminal:
            return None
        claim: dict[str, Any] = {"phase": "started", "owner": self.me, "worker": socket.gethostname(),
                                 "heartbeat": time.time(), "attempt": int(meta.get("attempt", 0)) + 1}
        if meta.get("phase") == "queued":
            if meta.get("abort"):
                return _ended(rec, "aborted", meta["abort"])
            return rec.changed(**claim)
        if time.time() - float(meta.get("heartbeat", 0.0)) < self.stale_after:
            return None  # its worker is alive
        if meta.get("idempotent") and not meta.get("abort"):
            return rec.changed(**claim)  # run again: its worker died, and running it twice is harmless
        return _ended(rec, "lost", f"the worker running this job ({meta.get('worker')}) stopped answering "
                                   f"(it died or lost PostgreSQL); its process was not necessarily stopped, "
                                   f"and the job was not started again (it is not idempotent)")

    def _give_up(self, exc: StoreUnavailableError) -> None:
        """PostgreSQL stayed unreachable past store_retry_for: fail the job (once the
        store answers again) without running it."""
        error = (f"the worker could not reach PostgreSQL for {self.tasks.store_retry_for:g} s "
                 f"({exc}); the job was not run")

        def decide(rec: _Record) -> dict[str, Any] | None:
            return _ended(rec, "failed", error) if rec.meta.get("phase") == "queued" and not rec.terminal else None

        log.error("agentkit.celery: job %s: %s; recording its failure once PostgreSQL answers", self.eid, error)
        rec, _changed = _persist(f"fail job {self.eid}", lambda: self.records.update(self.eid, decide))
        _report_end(self.tasks, self.records, rec)


class _Run:
    """A claimed job running on this worker: the process, its output, its heartbeat."""

    def __init__(self, delivery: _Delivery, rec: _Record) -> None:
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
        event = _runtime_event(self.d.records, self.rec,
                               JobEvent(type="started", execution_id=self.eid, seq=1, state=started),
                               _event_id(self.eid, f"start-{self.rec.meta.get('attempt', 1)}"))
        try:
            _commit(self.d.tasks, self.rec.meta["session_id"], [event])
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
        ended = time.time()  # the job's finished_at: when its process ended, not when that was recorded
        self.done.set()
        keeper.join()
        if self.superseded:
            return  # settled elsewhere (lost while this worker could not say it was alive)
        self._flush(forever=True)
        self._finish(status, error, exit_code, ended)

    def _mine(self, rec: _Record, **fields: Any) -> dict[str, Any] | None:
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
            events.append(_runtime_event(self.d.records, self.rec, JobEvent(
                type="output", execution_id=self.eid, seq=self.seq, stream=stream, chunk=chunk)))  # type: ignore[arg-type]
        if not events:
            return
        sid = self.rec.meta["session_id"]
        if forever:
            _persist(f"report the output of job {self.eid}", lambda: _commit(self.d.tasks, sid, events))
            return
        try:
            _commit(self.d.tasks, sid, events)
        except StoreUnavailableError:
            with self.lock:  # kept for the next flush (the same events: a repeat is refused)
                self.early = events + self.early
        except Exception as exc:  # noqa: BLE001 - the job keeps running; its end is still reported
            log.warning("agentkit.celery: could not commit the output of job %s: %s", self.eid, exc)

    def _finish(self, status: JobStatus, error: str | None, exit_code: int | None,
                ended: float | None = None) -> None:
        """Record the terminal state (unless another process settled the job) and
        report it."""
        with self.lock:
            tail = "".join(self.tail)[-_TAIL_CHARS:]
            out_bytes = self.out_bytes

        def decide(rec: _Record) -> dict[str, Any] | None:
            if rec.terminal or rec.meta.get("owner") != self.d.me:
                return None
            end = {"finished_at": ended} if ended is not None else {}
            return _ended(rec, status, error, exit_code=exit_code, output_tail=tail, output_bytes=out_bytes, **end)

        rec, changed = _persist(f"record the end of job {self.eid}", lambda: self.d.records.update(self.eid, decide))
        if changed:
            _report_end(self.d.tasks, self.d.records, rec)
