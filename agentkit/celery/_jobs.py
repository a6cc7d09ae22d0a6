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
  take it rolls the record back and raises :class:`~agentkit.celery.BrokerUnavailableError`
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

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import BrokerUnavailableError, ConfigurationError, JobNotFoundError, StoreError
from ..jobs._base import JobEvent, JobListener, JobState, _display
from ._record import Record, Records, ended, report_end

if TYPE_CHECKING:
    from ._app import AgentTasks

__all__ = ["CeleryJobControl"]

log = logging.getLogger("agentkit.jobs")

_ABORT_WAIT = 15.0  # seconds abort() waits for a worker to report the job stopped

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
        self._records = Records(tasks)
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
        :class:`~agentkit.celery.BrokerUnavailableError` and leaves nothing behind."""
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

        def decide(rec: Record) -> dict[str, Any] | None:
            if rec.terminal:
                return None
            if rec.meta.get("phase") == "queued":
                return ended(rec, "aborted", reason)
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
            report_end(self._tasks, self._records, rec)
            return rec.state
        deadline = time.monotonic() + _ABORT_WAIT
        while not rec.terminal and time.monotonic() < deadline:
            time.sleep(0.05)
            rec = self._records.get(execution_id)
        return rec.state

    # -- events ------------------------------------------------------------------------

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Receive this session's job events from now on, as a local job control gives
        them (``started``, ``output``, ``finished`` :class:`~agentkit.execution.JobEvent` s,
        in order per job), from the runtime events the workers commit to the session.
        Needs the Session this control is bound to (in this process); returns a function
        that unsubscribes."""
        if not callable(listener):
            raise ConfigurationError("subscribe() needs a callable listener(event)")
        session = self._session
        if session is None:
            raise ConfigurationError(
                "subscribe() needs the Session this job control belongs to: put it in a session's execution "
                "context, or subscribe to the session's runtime events (job-started, job-output, job-finished, "
                "...) with session.subscribe(listener)"
            )

        def on_event(event: Any) -> None:
            job_event = self._job_event(event)
            if job_event is not None:
                listener(job_event)

        unsubscribe: Callable[[], None] = session.subscribe(on_event)
        return unsubscribe

    def _job_event(self, event: Any) -> JobEvent | None:
        """The JobEvent a ``job-*`` runtime event stands for (None for any other event)."""
        kind = getattr(event, "runtime_type", "")
        data = getattr(event, "data", {})
        eid = data.get("execution_id")
        if not kind.startswith("job-") or not isinstance(eid, str):
            return None
        if kind == "job-output":
            return JobEvent(type="output", execution_id=eid, seq=int(data.get("seq", 0)),
                            stream=data.get("stream"), chunk=str(data.get("chunk", "")))
        try:
            state = self.get(eid)
        except JobNotFoundError:
            return None
        if kind == "job-started":
            return JobEvent(type="started", execution_id=eid, seq=1,
                            state=replace(state, state="running", pid=data.get("pid")))
        return JobEvent(type="finished", execution_id=eid, seq=0, state=state)


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
