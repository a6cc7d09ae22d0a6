"""Background jobs in a Session (private).

The job runner itself -- worker threads, ordered events, backpressure, job stores and
restart settlement -- belongs to the execution context that owns it (the private
``JobRunner``, the ``jobs`` capability of
:class:`~agentkit.execution.local.LocalExecutionContext`). This runtime module holds the
Session side: :func:`bridge_job_events` turns
a context's job events into Session runtime events (``job-started``, ``job-output``,
``job-finished``, ``job-failed``, ``job-aborted``; ``job-lost`` for a job whose
worker died, from :mod:`agentkit.celery`), and :func:`jobs_of` and
:func:`abort_running` are the Session's job commands (``abort_job``, ``abort_session``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..context._truncate import truncate_output
from ..errors import ConfigurationError, SessionClosedError, SessionError, StoreError
from ._base import JobControl, JobEvent

__all__ = ["abort_running", "bridge_job_events", "jobs_of"]

logger = logging.getLogger("agentkit.jobs")


# -- session bridge ------------------------------------------------------------------------

_TAIL_LINES = 40
_TAIL_BYTES = 4000


def _job_runtime_event(event: JobEvent, jobs: Any) -> tuple[str, dict[str, Any]]:
    eid = event.execution_id
    if event.type == "output":
        return "job-output", {"execution_id": eid, "seq": event.seq, "stream": event.stream,
                              "chunk": event.chunk}
    state = event.state
    assert state is not None
    base: dict[str, Any] = {"execution_id": eid, "command": state.command,
                            "tool_call_id": state.tool_call_id}
    if event.type == "started":
        return "job-started", {**base, "pid": state.pid}
    tail = truncate_output(state.output_tail, _TAIL_LINES, _TAIL_BYTES, keep="tail")
    try:
        running = [s.execution_id for s in jobs.list() if s.running and s.execution_id != eid]
    except Exception:  # noqa: BLE001 - a summary without the list is still right
        running = []
    base.update(output_tail=tail.text(), output_bytes=state.output_bytes, still_running=running)
    if state.state == "finished":
        return "job-finished", {**base, "exit_code": state.exit_code}
    if state.state == "aborted":
        return "job-aborted", {**base, "reason": state.error, "exit_code": state.exit_code}
    if state.state == "lost":
        return "job-lost", {**base, "error": state.error}
    return "job-failed", {**base, "error": state.error, "exit_code": state.exit_code}


def bridge_job_events(session: Any, context: Any) -> Callable[[], None]:
    """Push ``context.jobs`` events into ``session`` as runtime events; returns a
    function that stops it. A context without job events gives a no-op. A job control
    that records its jobs' events itself (``bind_session``: jobs on Celery workers) is
    told which session it serves instead."""
    jobs = getattr(context, "jobs", None)
    bind = getattr(jobs, "bind_session", None)
    if callable(bind):
        unbind: Callable[[], None] = bind(session)
        return unbind
    if jobs is None or not callable(getattr(jobs, "subscribe", None)):
        return lambda: None
    stopped = threading.Event()

    def listener(event: JobEvent) -> None:
        if stopped.is_set():
            return
        runtime_type, data = _job_runtime_event(event, jobs)
        try:
            session.push_runtime_event(runtime_type, data)
        except SessionClosedError:
            stopped.set()  # the session went away; the job keeps running
        except (SessionError, StoreError) as exc:
            # the session failed (e.g. another writer won a store conflict) and refuses
            # further events: stop recording; the job keeps running
            stopped.set()
            logger.warning("agentkit: stopped recording job events in the session: could not "
                           "record %s for job %s: %s", runtime_type, event.execution_id, exc)

    unsubscribe = jobs.subscribe(listener)

    def stop() -> None:
        stopped.set()
        unsubscribe()

    return stop


# -- a Session's job commands --------------------------------------------------------------


def jobs_of(execution_context: Any, what: str) -> JobControl:
    """The ``jobs`` capability of ``execution_context``, which ``what`` needs."""
    jobs: JobControl | None = getattr(execution_context, "jobs", None)
    if jobs is None:
        raise ConfigurationError(
            f"{what} needs an execution context with jobs: pass "
            f"Session(execution_context=LocalExecutionContext(root))"
        )
    return jobs


def abort_running(jobs: JobControl, reason: str) -> None:
    """Abort every running job of ``jobs``."""
    for state in jobs.list():
        if state.running:
            jobs.abort(state.execution_id, reason)
