"""A Session's construction checks, opening from a store, and closing (private).

What :class:`~agentkit.Session`'s constructor, :meth:`~agentkit.Session.open` and
:meth:`~agentkit.Session.close` do besides building the parts: refuse bad arguments before
any side effect, refuse a store that cannot write the session now, restore a stored
session (or seed a new one), tell tools their session, and on close interrupt the
transactions begun here, stop the parts and release the worker threads.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..context._compact import finish_interrupted_retention
from ..context._compaction import Retention
from ..context._invariants import check_events
from ..context._projection import RuntimeRenderer
from ..errors import ConfigurationError, SessionError, StoreError
from ..events import Event
from ..jobs._bridge import abort_running, bridge_job_events, jobs_of
from ..models.base import ChatModel
from ..options import GenerationOptions, check_deps, check_deps_type
from ..stores.base import EventStore, StoredSession, validate_session_id
from ..tools.base import ToolRegistry
from ._config import setup as setup_configuration
from ._config import tell_tools
from ._eventlog import EventLog
from ._foreign import model_from, tools_from
from ._gate import GenerationGate
from ._generation import interrupt_unfinished, loop_options
from ._redaction import redactor_of
from ._runs import drain, session_limiter
from ._scheduling import GenerationScheduler

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["abort", "check_arguments", "close", "event_list", "setup", "stored_session"]

_LISTENER_JOIN_SECONDS = 5.0
"""How long close() waits, in all, for listeners to take what is queued for them."""


def setup(
    session: Session[Any, Any],
    model: ChatModel | str | None = None,
    *,
    tools: Iterable[Any] = (),
    session_id: str | None = None,
    events: Iterable[Event] | None = None,
    store: EventStore | None = None,
    execution_context: Any = None,
    render_runtime: RuntimeRenderer | None = None,
    max_tool_workers: int = 8,
    listener_queue_size: int = 10_000,
    listener_timeout: float = 30.0,
    retention: Retention | None = None,
    deps: Any = None,
    deps_type: Any = None,
    max_concurrent_runs: int | None = None,
    queue_timeout: float | None = None,
    _seed_if_new: bool = False,
    _options: GenerationOptions | None = None,
    **options: Any,
) -> None:
    """Build ``session``'s parts: what ``Session.__init__`` documents, plus ``_seed_if_new``
    (``open``) and ``_options`` (an Agent's options, built and checked; see ``Session._create``);
    underscored, so a caller of the constructor cannot pass them (a TypeError)."""
    check_arguments(session_id=session_id, store=store, max_tool_workers=max_tool_workers,
                    listener_queue_size=listener_queue_size, listener_timeout=listener_timeout, retention=retention)
    session._retention = retention
    session._runs = session_limiter(max_concurrent_runs, queue_timeout)
    check_deps_type(deps_type)
    session._deps_type = deps_type
    session._deps = deps
    if deps is not None:
        check_deps(deps, deps_type)
    session.session_id = session_id or (uuid.uuid4().hex if store else None)
    session._model = model_from(model)
    session._registry = ToolRegistry(tools_from(tools))
    # an Agent hands over its options already built and checked
    session._options = _options.merged(options) if _options is not None else GenerationOptions.build(options)
    session._redactor = redactor_of(session._options.redact)
    session.execution_context = execution_context
    # a placeholder stands in for a missing model: check the rest now
    loop_options(session, session._model if session._model is not None else NoModel(), session._options).check()
    initial = event_list(events)
    check_events(initial)  # a history that breaks the providers' rules, before any side effect
    session._log = EventLog(
        session_id=session.session_id,
        store=store,
        revision=0,
        render_runtime=render_runtime,
        listener_queue_size=listener_queue_size,
        listener_timeout=listener_timeout,
        listener_join_seconds=_LISTENER_JOIN_SECONDS,
    )
    session._gate = GenerationGate(session._log.check_usable)
    session._own_transactions = set()  # begun or claimed here: close() interrupts these only
    session._pool = None
    session._max_workers = max_tool_workers
    stored = None
    if store is not None:
        stored = stored_session(store, session.session_id, session_id, initial, seed_if_new=_seed_if_new)
    if stored is not None:  # restored from the store: its events are already durable
        session._log.load_committed(list(stored.events), revision=stored.revision)
    elif initial:
        session._log.commit(initial)
    setup_configuration(session)  # what configure() recorded: a reopened session is as it was left
    # nobody holds the claim token of a transaction left open (by a crash, or in the
    # events= given): interrupt it for good, never resume its work
    interrupt_unfinished(session, "the session was reopened while this generation was unfinished")
    if retention is not None:
        finish_interrupted_retention(session._log)
    session._scheduler = GenerationScheduler(session.generate)
    session._stop_job_events = bridge_job_events(session, execution_context)
    tell_tools(session, session._config.tools.values())  # every tool it was given, offered now or not



def check_arguments(*, session_id: str | None, store: EventStore | None, max_tool_workers: object,
                    listener_queue_size: object, listener_timeout: object, retention: object) -> None:
    """Refuse the constructor's bad arguments, saying what to pass instead."""
    if session_id is not None:
        validate_session_id(session_id)
    if not isinstance(max_tool_workers, int) or max_tool_workers < 1:
        raise ConfigurationError(f"max_tool_workers must be an int >= 1, got {max_tool_workers!r}")
    if not isinstance(listener_queue_size, int) or listener_queue_size < 1:
        raise ConfigurationError(f"listener_queue_size must be an int >= 1, got {listener_queue_size!r}")
    if not isinstance(listener_timeout, (int, float)) or not listener_timeout > 0:
        raise ConfigurationError(f"listener_timeout must be a number of seconds > 0, got {listener_timeout!r}")
    if retention is not None and not isinstance(retention, Retention):
        raise ConfigurationError(f"retention must be a Retention(max_events=..., keep_last=...), not {retention!r}")
    if retention is not None and store is None:
        raise ConfigurationError(
            "retention archives events in the session's store: pass store= (e.g. "
            "FileEventStore(path)) with retention="
        )


def event_list(events: Iterable[Event] | None) -> list[Event]:
    """The ``events=`` given, as a list of events (anything else is refused)."""
    initial = list(events or ())
    for ev in initial:
        if not isinstance(ev, Event):
            raise ConfigurationError(f"events must be Event objects, not {type(ev).__name__}")
    return initial


def stored_session(
    store: EventStore, session_id: str | None, requested: str | None, seed: list[Event], *, seed_if_new: bool
) -> StoredSession | None:
    """Session ``session_id`` as ``store`` holds it when one was ``requested`` by id, or
    None when it is new (or empty). A store that can tell (``FileEventStore.check_writable``)
    refuses first a session it cannot write now, naming the path, rather than fail the
    session's first push."""
    check = getattr(store, "check_writable", None)
    if callable(check):
        check(session_id)
    if requested is None:
        return None
    stored = store.load(requested)
    if stored is None or (stored.revision == 0 and not stored.events):
        return None
    if seed and not seed_if_new:
        raise ConfigurationError(
            f"session {requested!r} already exists in the store (revision {stored.revision}, "
            f"{len(stored.events)} events), so events= cannot seed it: events= starts a new "
            f"session. Leave events= out to continue the stored session, use "
            f"Session.open({requested!r}, store=store, events=...) to seed it only when it is "
            f"new, or pick a new session_id."
        )
    return stored


class NoModel:
    """Placeholder for a session created without a model (generate() requires one)."""

    def stream(self, request: Any) -> Any:  # pragma: no cover - never called
        raise ConfigurationError("this session has no model")


def close(session: Session[Any, Any], timeout: float = 0.0) -> None:
    """:meth:`Session.close`: drain (within ``timeout``), interrupt what was begun here,
    then stop the parts."""
    drain(session, timeout)
    log = session._log
    with log.lock:
        if not log.closed and log.failed is None:
            try:  # one begun or run here can never be finished by anyone now (another
                # worker's, waiting for its client's decision, is not this object's)
                interrupt_unfinished(session, "the session was closed", session._own_transactions)
            except (SessionError, StoreError):
                pass  # the session could not commit: reopening interrupts it
        if not log.close():
            return
        pool, session._pool = session._pool, None
    session._stop_job_events()  # stop listening; jobs keep running
    session._scheduler.close()
    session._gate.close("session closed")
    log.drain_listeners()
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def abort(session: Session[Any, Any], reason: str, *, abort_jobs: bool) -> None:
    """:meth:`Session.abort_session`: refuse and cancel generations (and with
    ``abort_jobs``, abort the running jobs)."""
    jobs = jobs_of(session.execution_context, "abort_session(abort_jobs=True)") if abort_jobs else None
    session._gate.refuse(reason)
    session._scheduler.cancel_all(reason)
    session.abort_current_generation(reason)
    if jobs is not None:
        abort_running(jobs, reason)
