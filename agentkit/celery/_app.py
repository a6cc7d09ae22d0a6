"""AgentTasks: agentkit's tasks on a Celery app (private module; import it from
:mod:`agentkit.celery`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, MissingDependencyError
from ..session._pool import SessionPool
from ..stores.base import EventStore

try:
    import celery
    from kombu.utils.url import maybe_sanitize_url
except ImportError as _exc:  # a missing extra is named
    raise MissingDependencyError(
        _exc.name or "celery", "celery", "agentkit.celery (jobs and turns on Celery)"
    ) from _exc

from . import _jobs, _turns, _worker
from ._turns import TurnMethods

if TYPE_CHECKING:
    from ..stores.postgres import PostgresJobStore

__all__ = ["AgentTasks"]

SessionFactory = Callable[[str], "dict[str, Any]"]

_VISIBILITY_TIMEOUT = 300.0
"""Seconds Redis keeps a task a worker took but did not finish before handing it to
another worker (what settles the jobs of a worker that died), unless the app sets its own
``broker_transport_options["visibility_timeout"]``."""


class AgentTasks(TurnMethods):
    """agentkit's tasks registered on the Celery ``app``, over the shared stores.

    ``store`` is the sessions' event store (a
    :class:`~agentkit.stores.postgres.PostgresEventStore`: every web process and worker
    reaches the same database), ``job_store`` the
    :class:`~agentkit.stores.postgres.PostgresJobStore` that is the one record of every
    job, and ``sessions(session_id)`` returns the keyword arguments of that session's
    :class:`~agentkit.Session` (as a :class:`~agentkit.SessionPool` factory does) for the
    sessions a worker opens. Build it at import time of the module your workers load
    (``celery -A module worker``) and your web processes import: the stores may be opened
    there, a prefork worker's children each get connections of their own.

    It sets the Celery settings the tasks rely on (late acknowledgement, requeue of a task
    whose worker process was lost, one task prefetched per process, JSON messages, a Redis
    ``visibility_timeout`` of 300 s unless you set one), so do not override them.

    ``heartbeat`` (seconds) is how often a worker running a job says so in the job
    record; a running job whose record went 5 heartbeats without one is taken to have lost
    its worker. ``store_retry_for`` (seconds) is how long a worker keeps retrying an
    unreachable PostgreSQL before it gives up on a job (recorded, with its runtime event,
    once the store is back).
    """

    def __init__(
        self,
        app: celery.Celery,
        *,
        store: EventStore,
        job_store: PostgresJobStore,
        sessions: SessionFactory,
        heartbeat: float = 2.0,
        store_retry_for: float = 60.0,
    ) -> None:
        if not isinstance(app, celery.Celery):
            raise ConfigurationError(f"AgentTasks takes a celery.Celery app, not {type(app).__name__}")
        if not isinstance(store, EventStore):
            raise ConfigurationError(
                f"store must be an event store (a PostgresEventStore every process reaches), "
                f"not {type(store).__name__}"
            )
        if not all(callable(getattr(job_store, m, None)) for m in ("_get_record", "_put_record", "_records")):
            raise ConfigurationError(
                f"job_store must be a PostgresJobStore (the one record of every job, shared by web "
                f"processes and workers), not {type(job_store).__name__}"
            )
        if not callable(sessions):
            raise ConfigurationError("sessions must be a callable sessions(session_id) -> dict of Session kwargs")
        for name, value in (("heartbeat", heartbeat), ("store_retry_for", store_retry_for)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < float("inf"):
                raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
        self.app = app
        self.store = store
        self.job_store = job_store
        self.sessions = sessions
        self.heartbeat = float(heartbeat)
        self.store_retry_for = float(store_retry_for)
        self._pool: SessionPool | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self._configure()
        self._register_tasks()

    def __repr__(self) -> str:
        return f"AgentTasks(app={self.app.main!r}, broker={self.broker!r})"

    def _configure(self) -> None:
        """The settings agentkit's tasks rely on (the tasks also carry their own)."""
        conf = self.app.conf
        conf.task_acks_late = True
        conf.task_reject_on_worker_lost = True
        conf.worker_prefetch_multiplier = 1
        conf.task_serializer = "json"
        conf.result_serializer = "json"
        conf.accept_content = sorted({*(conf.accept_content or ()), "json"})
        options = dict(conf.broker_transport_options or {})
        options.setdefault("visibility_timeout", _VISIBILITY_TIMEOUT)
        # how soon a task of a worker that died is handed on: a sweep every few seconds
        # (kombu's default sweeps every 100 s), whatever the visibility timeout
        options.setdefault("unacked_restore_interval", max(1, min(10, round(float(options["visibility_timeout"]) / 5))))
        options.setdefault("unacked_restore_throttle", 1)
        options.setdefault("socket_connect_timeout", 5)
        conf.broker_transport_options = options

    def _register_tasks(self) -> None:
        """Register agentkit's tasks on the app (one block per kind of task)."""
        self._job_task = _worker.register(self)
        self._turn_task = _turns.register(self)

    @property
    def broker(self) -> str:
        """The broker's URL, its password masked (what errors name)."""
        return str(maybe_sanitize_url(self.app.conf.broker_url or "amqp://localhost"))

    def job_control(self, *, session_id: str | None = None) -> _jobs.CeleryJobControl:
        """A :class:`~agentkit.execution.JobControl` whose jobs run on the workers.

        Put it in a session's execution context (``LocalExecutionContext(...,
        jobs=tasks.job_control())``): the session binds it, and the jobs it starts
        belong to that session (their runtime events are committed to it by the
        workers). ``session_id`` binds it to that session directly (a host starting a
        job without a Session object). Any instance, bound or not, can ``get()`` and
        ``abort()`` any job."""
        return _jobs.CeleryJobControl(self, session_id=session_id)

    def _sessions(self) -> SessionPool:
        """This process's pool of the sessions tasks write to (made on first use, again
        in a forked child: a prefork worker's pool is its own)."""
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = SessionPool(self.store, factory=self.sessions)
                self._pool_pid = os.getpid()
            return self._pool
