"""The record of a Celery job and the session events it becomes (private; see
:mod:`agentkit.celery._jobs`).

A job's record in the :class:`~agentkit.stores.postgres.PostgresJobStore` is a
:class:`~agentkit.execution.JobState` plus agentkit.celery's own fields (``celery``: the
session, the phase ``queued``/``started``/``done``, the worker holding it and its last
heartbeat, an abort request, whether the terminal runtime event was committed). Every
change is a compare-and-swap on the record's revision, decided again on the current
record after a conflict.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import (
    ConfigurationError,
    JobNotFoundError,
    SessionFailedError,
    StoreConflictError,
    StoreUnavailableError,
)
from ..events import RuntimeEvent
from ..jobs._base import JobEvent, JobState, JobStatus
from ..jobs._bridge import _job_runtime_event

if TYPE_CHECKING:
    from ._app import AgentTasks

__all__ = ["Record", "Records", "commit", "ended", "event_id", "persist", "report_end", "runtime_event"]

log = logging.getLogger("agentkit.jobs")

_COMMIT_ATTEMPTS = 5


def event_id(execution_id: str, what: str) -> str:
    """A deterministic event id (32 hex digits) for one of a job's runtime events."""
    return hashlib.sha256(f"agentkit-celery-job/{execution_id}/{what}".encode()).hexdigest()[:32]


class Record:
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


def ended(rec: Record, status: JobStatus, error: str | None, **fields: Any) -> dict[str, Any]:
    """A terminal body for ``rec``: ``status``, ``error``, the JobState ``fields`` given."""
    now = time.time()
    state = JobState.from_dict({**rec.body, "state": status, "error": error, "updated_at": now,
                                "finished_at": now, **fields})
    return rec.changed(state, phase="done", reported=False)


class Records:
    """The job records of one AgentTasks (its PostgresJobStore)."""

    def __init__(self, tasks: AgentTasks) -> None:
        self.tasks = tasks
        self.store: Any = tasks.job_store

    def load(self, execution_id: str) -> Record | None:
        found = self.store._get_record(execution_id)
        return None if found is None else Record(*found)

    def get(self, execution_id: str) -> Record:
        rec = self.load(execution_id)
        if rec is None or "celery" not in rec.body:
            raise JobNotFoundError(
                f"no Celery job with execution id {execution_id!r} in {self.store!r}; list() shows the known jobs"
            )
        return rec

    def create(self, body: dict[str, Any]) -> Record:
        return Record(body, self.store._put_record(body["execution_id"], body["started_at"], body, 0))

    def update(self, execution_id: str, decide: Callable[[Record], dict[str, Any] | None]) -> tuple[Record, bool]:
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
            return Record(body, revision), True

    def session_jobs(self, session_id: str | None, *, running_only: bool = False) -> list[JobState]:
        """The jobs of ``session_id`` (None: every Celery job), oldest first."""
        found = self.store._records(running_only=running_only,
                                    **({} if session_id is None else {"session_id": session_id}))
        return [JobState.from_dict(body) for body, _rev in found if "celery" in body]


class _SessionJobs:
    """What the bridge's event builder asks of a job control: the session's jobs."""

    def __init__(self, records: Records, session_id: str) -> None:
        self._records, self._sid = records, session_id

    def list(self) -> list[JobState]:  # noqa: A003 - the port's name
        return self._records.session_jobs(self._sid, running_only=True)  # only running ones are asked for


def runtime_event(records: Records, rec: Record, event: JobEvent, event_id: str | None = None) -> RuntimeEvent:
    """The session runtime event a local job would produce for ``event``."""
    runtime_type, data = _job_runtime_event(event, _SessionJobs(records, rec.meta["session_id"]))
    if event.type == "started":
        data.update(attempt=rec.meta.get("attempt", 1), worker=rec.meta.get("worker"))
    kwargs: dict[str, Any] = {"id": event_id} if event_id else {}
    return RuntimeEvent(runtime_type=runtime_type, data=data, **kwargs)


def commit(tasks: AgentTasks, session_id: str, events: Sequence[RuntimeEvent]) -> None:
    """Commit ``events`` to the session (through this process's session pool). An event
    already committed (the same id: a report repeated after a crash) is skipped. A pooled
    session that failed is closed (the pool opens it afresh) and the commit tried again,
    as is one that kept meeting other writers' commits."""
    for attempt in range(1, _COMMIT_ATTEMPTS + 1):
        with tasks._sessions().session(session_id) as session:
            try:
                for event in events:
                    _push_once(session, event)
                return
            except SessionFailedError:
                session.close()
                if attempt == _COMMIT_ATTEMPTS:
                    raise
            except StoreConflictError:
                if attempt == _COMMIT_ATTEMPTS:
                    raise


def _push_once(session: Any, event: RuntimeEvent) -> None:
    try:
        session.push_event(event)
    except ConfigurationError:
        if any(e.id == event.id for e in session.events):
            return  # committed before (by an earlier attempt): not twice
        raise


def persist(what: str, fn: Callable[[], Any], *, give_up: float | None = None) -> Any:
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


def report_end(tasks: AgentTasks, records: Records, rec: Record) -> None:
    """Commit the terminal runtime event of ``rec`` (once) and mark it reported."""
    if not rec.terminal or rec.meta.get("reported"):
        return
    eid = rec.body["execution_id"]
    event = runtime_event(records, rec, JobEvent(type="finished", execution_id=eid, seq=0, state=rec.state),
                           event_id(eid, "end"))
    persist(f"report the end of job {eid}", lambda: commit(tasks, rec.meta["session_id"], [event]))
    persist(f"mark job {eid} reported",
             lambda: records.update(eid, lambda r: None if r.meta.get("reported") else r.changed(reported=True)))
