"""The local job runner: background processes on worker threads (private).

A :class:`JobRunner` is the ``jobs`` capability of
:class:`~agentkit.execution.LocalExecutionContext`. ``start`` spawns the process and
returns at once with a ``running`` :class:`~agentkit.jobs.JobState`; a worker
thread then reads the output and records the outcome. Subscribers receive ordered
``started``, ``output`` and ``finished`` :class:`~agentkit.jobs.JobEvent` s,
each in order from a bounded queue on the shared delivery threads: a slow subscriber slows the job
down (backpressure: the worker waits, so the process blocks on a full pipe), and one that
raises or stalls past ``listener_timeout`` is removed with a warning, receives nothing
more, and the job it was handling is terminated.

With a ``store`` (:mod:`agentkit.jobs`) every start and terminal state is persisted
before it is reported. A runner created over a store that records jobs as running (the
previous host died) restores them as ``failed`` -- their process is not ours any more --
unless ``settle_orphaned_job(job)`` returns their real terminal state.

This module sits in the adapter layer, next to the context that owns it; the Session
side (turning job events into runtime events) is :mod:`agentkit.jobs._bridge`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .. import _process
from .._threads import ListenerQueue
from ..cancel import CancelToken
from ..errors import ConfigurationError, JobNotFoundError, StoreConflictError
from ..observability._tracing import job_parent, job_span
from ._base import JobEvent, JobListener, JobState, JobStatus, JobStore, _display

__all__ = ["JobRunner"]

logger = logging.getLogger("agentkit.jobs")

Launcher = Callable[..., "tuple[Any, list[str], str]"]
_TERMINAL: tuple[JobStatus, ...] = ("finished", "failed", "aborted")


def _orphan_verdict(state: JobState, settle: Callable[[JobState], JobState | None] | None) -> JobState:
    """The terminal state of an orphaned job: ``settle(state)``'s, or failed."""
    settled = settle(state) if settle is not None else None
    now = time.time()
    if settled is None:
        return replace(
            state, state="failed", updated_at=now, finished_at=now,
            error="the host restarted while this job was running; its process is no "
                  "longer owned by this runner (it was not necessarily terminated)",
        )
    if not isinstance(settled, JobState) or settled.execution_id != state.execution_id:
        raise ConfigurationError(
            f"settle_orphaned_job must return a JobState for job "
            f"{state.execution_id!r} (same execution_id) or None, got {settled!r}"
        )
    if settled.state not in _TERMINAL:
        raise ConfigurationError(
            f"settle_orphaned_job returned state {settled.state!r} for job "
            f"{state.execution_id!r}; return finished, failed or aborted"
        )
    return replace(settled, updated_at=now, finished_at=settled.finished_at or now)


class _Job:
    __slots__ = ("state", "revision", "cancel", "seq", "termination", "done", "thread", "lock")

    def __init__(self, state: JobState, revision: int) -> None:
        self.state = state
        self.revision = revision
        self.cancel = CancelToken()
        self.seq = 0
        self.termination: tuple[JobStatus, str] | None = None
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()


class _Subscriber:
    """One job listener: the one listener queue (:class:`agentkit._threads.ListenerQueue`)
    in its backpressure mode, delivered on the shared delivery threads."""

    def __init__(self, runner: JobRunner, listener: JobListener, size: int, timeout: float) -> None:
        self.listener = listener
        self.runner = runner
        self._about = threading.local()  # the event a removal is reported for, per thread
        self._queue: ListenerQueue[JobEvent] = ListenerQueue(
            self._call, max_queue=size, timeout=timeout, on_drop=self._fail, overflow="wait")

    @property
    def active(self) -> bool:
        return self._queue.active

    def in_listener(self) -> bool:
        """True when called from inside this listener."""
        return self._queue.in_listener()

    def offer(self, event: JobEvent) -> None:
        """Queue ``event``, waiting while the queue is full (backpressure)."""
        self._about.event = event
        self._queue.offer([event])

    def _call(self, event: JobEvent) -> None:
        self._about.event = event
        self.listener(event)

    def _fail(self, why: str) -> None:
        """Remove this subscriber (it receives nothing more) and terminate the job of the
        event it failed on, with a warning."""
        event: JobEvent = self._about.event
        msg = (f"agentkit: removed job listener {self.listener!r}: {why}; "
               f"terminating job {event.execution_id}")
        warnings.warn(msg, RuntimeWarning, stacklevel=5)
        logger.warning(msg)
        self.runner._remove(self)
        self.runner._terminate(event.execution_id, f"a job listener failed: {why}")

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, then stop (waiting up to ``timeout`` seconds, unless
        called from inside the listener)."""
        self._queue.close(drain=True)
        self._queue.join(time.monotonic() + timeout)


class JobRunner:
    """Owns background jobs and their worker threads (the ``jobs`` capability).

    ``launch(executable, args, raw, cwd, tool_call_id)`` validates and guards a request
    and returns ``(spawn, argv, cwd)`` where ``spawn()`` starts the process; the local
    execution context supplies it. Use it through ``context.jobs``.
    """

    def __init__(
        self,
        launch: Launcher,
        *,
        store: JobStore | None = None,
        settle_orphaned_job: Callable[[JobState], JobState | None] | None = None,
        listener_timeout: float = 30.0,
        listener_queue_size: int = 256,
        max_retained_jobs: int = 100,
        max_output_bytes: int = 1_048_576,
        tail_chars: int = 4000,
        kill_grace: float = 1.0,
    ) -> None:
        if listener_timeout <= 0:
            raise ConfigurationError("job_listener_timeout must be positive")
        if listener_queue_size < 1:
            raise ConfigurationError("job_listener_queue_size must be at least 1")
        if max_retained_jobs < 0:
            raise ConfigurationError("max_retained_jobs must be >= 0")
        if store is not None and not isinstance(store, JobStore):
            raise ConfigurationError(
                f"job_store must implement the JobStore port (load(), put() and delete()), "
                f"not {type(store).__name__}; use InMemoryJobStore or FileJobStore"
            )
        self._launch = launch
        self._store = store
        self._listener_timeout = listener_timeout
        self._listener_queue_size = listener_queue_size
        self._max_retained = max_retained_jobs
        self._max_output = max_output_bytes
        self._tail_chars = tail_chars
        self._grace = kill_grace
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._subs: list[_Subscriber] = []
        self._closed = False
        if store is not None:
            self._restore(store, settle_orphaned_job)

    # -- restore -------------------------------------------------------------------------

    def _restore(self, store: JobStore, settle: Callable[[JobState], JobState | None] | None) -> None:
        for stored in store.load():
            state, revision = stored.state, stored.revision
            if state.state == "running":
                state, revision = self._settle_orphan(store, state, revision, settle)
            job = _Job(state, revision)
            job.done.set()
            self._jobs[state.execution_id] = job
        self._prune()

    def _settle_orphan(self, store: JobStore, state: JobState, revision: int,
                       settle: Callable[[JobState], JobState | None] | None) -> tuple[JobState, int]:
        """Record the terminal state of a job a previous host left running."""
        new = _orphan_verdict(state, settle)
        try:
            return new, store.put(new, expected_revision=revision)
        except StoreConflictError:
            # another runner restoring the same store settled it first: keep its verdict
            current = next((s for s in store.load()
                            if s.state.execution_id == state.execution_id), None)
            if current is None or current.state.state == "running":
                raise
            return current.state, current.revision

    # -- queries -------------------------------------------------------------------------

    def get(self, execution_id: str) -> JobState:
        """The current snapshot of a job."""
        return self._job(execution_id).state

    def list(self) -> list[JobState]:  # noqa: A003 - the port's name
        """Every known job (running and retained), oldest first."""
        with self._lock:
            states = [j.state for j in self._jobs.values()]
        return sorted(states, key=lambda s: s.started_at)

    def _job(self, execution_id: str) -> _Job:
        with self._lock:
            job = self._jobs.get(execution_id)
        if job is None:
            raise JobNotFoundError(
                f"no job with execution id {execution_id!r}; list() shows the known jobs"
            )
        return job

    # -- start ---------------------------------------------------------------------------

    def start(self, executable: str, args: Sequence[str] = (), *, raw: bool = False,
              cwd: str | None = None, timeout: float | None = None,
              tool_call_id: str | None = None) -> JobState:
        """Start a job and return at once with its ``running`` state.

        ``raw=True`` runs ``executable`` as shell text (``bash -lc``); otherwise
        ``executable`` runs with ``args`` as literal arguments. ``timeout`` (seconds)
        ends the job as failed. Bad input and guard vetoes raise before anything runs.
        """
        if timeout is not None and timeout <= 0:
            raise ConfigurationError("timeout must be positive (or None)")
        if isinstance(args, str):
            raise ConfigurationError("args must be a list of strings, not one string")
        with self._lock:
            if self._closed:
                raise ConfigurationError("this job runner is closed; create a new execution context")
        spawn, argv, workdir = self._launch(executable, list(args), raw, cwd, tool_call_id)
        now = time.time()
        state = JobState(
            execution_id=f"job_{uuid.uuid4().hex[:12]}",
            command=_display(argv, raw),
            argv=tuple(argv),
            state="running",
            tool_call_id=tool_call_id,
            cwd=workdir,
            started_at=now,
            updated_at=now,
        )
        job = _Job(state, 0)
        self._persist(job, state)  # the running intent is durable before the spawn
        with self._lock:
            closed = self._closed
            if not closed:
                self._jobs[state.execution_id] = job  # from here on, close() aborts it
        if closed:
            self._settle_unstarted(job, "the job runner was closed before the job started")
            raise ConfigurationError(
                "this job runner was closed while the job was starting; nothing was run. "
                "Create a new execution context to run more jobs"
            )
        try:
            proc = spawn()
        except OSError as exc:
            self._settle_unstarted(job, f"could not start: {exc}")  # stays queryable, as stored
            raise
        try:
            self._persist(job, replace(job.state, pid=proc.pid, updated_at=time.time()))
        except BaseException as exc:
            _process.kill_group(proc, self._grace)
            proc.wait()
            self._settle_unstarted(job, f"could not record the job's pid, so it was stopped: {exc}")
            raise
        job.seq = 1
        self._emit(JobEvent(type="started", execution_id=state.execution_id, seq=1, state=job.state))
        job.thread = threading.Thread(
            # the job's span (when tracing) is a child of the span this start ran under
            target=self._traced_work, args=(job, proc, timeout, job_parent()),
            name=f"agentkit-job-{state.execution_id}", daemon=True,
        )
        job.thread.start()
        return job.state

    def _settle_unstarted(self, job: _Job, error: str) -> None:
        """Record a job that never ran (or was stopped at once) as failed."""
        now = time.time()
        final = replace(job.state, state="failed", error=error, finished_at=now, updated_at=now)
        try:
            self._persist(job, final)
        except Exception as exc:  # noqa: BLE001 - the in-memory state still becomes terminal
            logger.error("agentkit: could not persist the failure of job %s: %s",
                         job.state.execution_id, exc)
            job.state = final
        job.done.set()

    def _persist(self, job: _Job, state: JobState) -> None:
        if self._store is not None:
            job.revision = self._store.put(state, expected_revision=job.revision)
        job.state = state

    def _traced_work(self, job: _Job, proc: Any, timeout: float | None, parent: Any) -> None:
        with job_span(parent, job.state.execution_id) as finish:
            self._work(job, proc, timeout)
            final = job.state
            finish(final.state, final.exit_code, final.error)

    def _work(self, job: _Job, proc: Any, timeout: float | None) -> None:
        tail: list[str] = []
        tail_len = 0
        out_bytes = 0
        eid = job.state.execution_id

        def on_output(stream: str, chunk: str) -> None:
            nonlocal tail_len, out_bytes
            job.seq += 1
            out_bytes += len(chunk.encode("utf-8"))
            tail.append(chunk)
            tail_len += len(chunk)
            while tail_len - len(tail[0]) >= self._tail_chars:
                tail_len -= len(tail.pop(0))
            self._emit(JobEvent(type="output", execution_id=eid, seq=job.seq,
                                stream=stream, chunk=chunk))  # type: ignore[arg-type]

        try:
            outcome = _process.supervise(
                proc, command=job.state.command, timeout=timeout, cancel=job.cancel, max_output_bytes=self._max_output,
                on_output=on_output, capture=False, grace=self._grace,
            )
            status, error = self._verdict(job, outcome, timeout)
            exit_code = outcome.exit_code
        except BaseException as exc:  # noqa: BLE001 - recorded as the job's failure
            _process.kill_group(proc, self._grace)
            status, error, exit_code = "failed", f"{type(exc).__name__}: {exc}", proc.wait()
        now = time.time()
        final = replace(
            job.state, state=status, exit_code=exit_code, error=error, updated_at=now,
            finished_at=now, output_tail="".join(tail)[-self._tail_chars:], output_bytes=out_bytes,
        )
        try:
            self._persist(job, final)
        except Exception as exc:  # noqa: BLE001 - the in-memory state still becomes terminal
            logger.error("agentkit: could not persist the final state of job %s: %s", eid, exc)
            job.state = final
        job.seq += 1
        self._emit(JobEvent(type="finished", execution_id=eid, seq=job.seq, state=final))
        job.done.set()
        self._prune()

    @staticmethod
    def _verdict(job: _Job, outcome: Any, timeout: float | None) -> tuple[JobStatus, str | None]:
        if job.termination is not None:
            return job.termination
        if outcome.timed_out:
            return "failed", f"timed out after {timeout:g}s; the process group was terminated"
        if outcome.output_limited:
            return "failed", "output exceeded the output cap; the process group was terminated"
        if outcome.cancelled:
            return "aborted", job.cancel.reason or "aborted"
        return "finished", None

    def _prune(self) -> None:
        with self._lock:
            terminal = [j for j in self._jobs.values() if j.done.is_set()]
            excess = len(terminal) - self._max_retained
            if excess <= 0:
                return
            terminal.sort(key=lambda j: j.state.finished_at or 0.0)
            victims = terminal[:excess]
            for j in victims:
                del self._jobs[j.state.execution_id]
        if self._store is not None:
            for j in victims:
                try:
                    self._store.delete(j.state.execution_id)
                except Exception as exc:  # noqa: BLE001 - retention is best effort
                    logger.warning("agentkit: could not prune job %s: %s", j.state.execution_id, exc)

    # -- abort ---------------------------------------------------------------------------

    def abort(self, execution_id: str, reason: str = "aborted") -> JobState:
        """Terminate a running job's process group and wait for its final state.
        Aborting a job that already ended returns its state unchanged.

        Called from a job listener, it does not wait (the job's last events queue up
        for that very listener): the state returned may still be ``running``, and the
        ``finished`` event follows."""
        job = self._job(execution_id)
        self._terminate(execution_id, reason, status="aborted")
        with self._lock:
            delivering = any(sub.in_listener() for sub in self._subs)
        if not delivering:
            job.done.wait(self._grace + 10.0)
        return job.state

    def _terminate(self, execution_id: str, reason: str, status: JobStatus = "failed") -> None:
        with self._lock:
            job = self._jobs.get(execution_id)
        if job is None or job.done.is_set():
            return
        with job.lock:
            if job.termination is None:
                job.termination = (status, reason)
        job.cancel.cancel(reason)

    # -- events --------------------------------------------------------------------------

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Receive every job event from now on (restored jobs are not replayed).
        Returns a function that unsubscribes."""
        if not callable(listener):
            raise ConfigurationError("subscribe() needs a callable listener(event)")
        sub = _Subscriber(self, listener, self._listener_queue_size, self._listener_timeout)
        with self._lock:
            self._subs.append(sub)

        def unsubscribe() -> None:
            self._remove(sub)
            sub.close()

        return unsubscribe

    def _remove(self, sub: _Subscriber) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def _emit(self, event: JobEvent) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.offer(event)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self, *, abort_jobs: bool = True) -> None:
        """Stop accepting jobs; abort running ones (unless ``abort_jobs=False``); deliver
        queued events and stop the delivery threads."""
        with self._lock:
            self._closed = True
            jobs = [j for j in self._jobs.values() if not j.done.is_set()]
        if abort_jobs:
            for j in jobs:
                self._terminate(j.state.execution_id, "the execution context was closed", "aborted")
            for j in jobs:
                j.done.wait(self._grace + 10.0)
                if j.thread is not None and j.thread is not threading.current_thread():
                    j.thread.join(5.0)  # it only prunes after done
        with self._lock:
            subs, self._subs = list(self._subs), []
        for sub in subs:
            sub.close()
