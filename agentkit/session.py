"""Session: a thread-safe, synchronous agent conversation over an append-only event log."""

from __future__ import annotations

import contextvars
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from .cancel import CancelToken
from .errors import (
    ConfigurationError,
    SessionClosedError,
    SessionError,
    SessionFailedError,
    StoreConflictError,
)
from .events import ControlEvent, Event, RuntimeEvent, UserMessageEvent, _storable_problem
from .jobs import bridge_job_events
from .loop import LoopOptions, ToolExecution, run_loop
from .messages import Message, Prompt, ToolCallPart, normalize_prompt
from .models.base import ChatModel, ModelSettings, ToolChoice
from .projection import Projector, RuntimeRenderer
from .results import GenerateResult, RunResult, ToolCallRecord
from .scheduling import GenerationScheduler
from .stores.base import EventStore, StoredSession, validate_session_id
from .subscriptions import Listener, Subscription
from .tools.base import ToolRegistry
from .tools.context import JobControl, JobState

__all__ = ["Session"]

_UNSET: Any = object()
_LISTENER_JOIN_SECONDS = 5.0
"""How long close() waits, in all, for listeners to take what is queued for them."""

# The sessions whose generation the current thread (or a tool thread started by it) is
# serving: generate() on one of them from there would wait for itself forever.
_GENERATING: contextvars.ContextVar[tuple[Session, ...]] = contextvars.ContextVar(
    "agentkit_generating", default=()
)


def _resolve_model(model: ChatModel | str | None) -> ChatModel | None:
    if isinstance(model, str):
        from .models import get_model

        return get_model(model)
    return model


class Session:
    """A conversation whose canonical state is an append-only list of events.

    Any thread may push events at any time; commits are serialised and numbered
    (``seq`` 1, 2, ...). ``generate()`` calls run one at a time in call order; each
    inference sees the events committed before it started, and events pushed meanwhile
    are seen by the next one. With a ``store``, every event is durable before the call
    that committed it returns, and before listeners hear of it.

    With a ``store`` and the ``session_id`` of a session the store holds, the session is
    restored from it, as :meth:`open` does (``events=`` is then refused: it seeds only a
    new session). A store that cannot write the session now is refused at construction
    (:class:`~agentkit.errors.StoreError` naming the path), not at the first push.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        model: ChatModel | str | None = None,
        *,
        tools: Iterable[Any] = (),
        system: str | None = None,
        session_id: str | None = None,
        events: Iterable[Event] | None = None,
        store: EventStore | None = None,
        execution_context: Any = None,
        max_steps: int = 20,
        tool_execution: ToolExecution = "parallel",
        tool_choice: ToolChoice = "auto",
        settings: ModelSettings | None = None,
        provider_options: dict[str, Any] | None = None,
        cache: bool = True,
        render_runtime: RuntimeRenderer | None = None,
        max_tool_workers: int = 8,
        listener_queue_size: int = 10_000,
        listener_timeout: float = 30.0,
        _seed_if_new: bool = False,
    ) -> None:
        if session_id is not None:
            validate_session_id(session_id)
        if not isinstance(max_tool_workers, int) or max_tool_workers < 1:
            raise ConfigurationError(f"max_tool_workers must be an int >= 1, got {max_tool_workers!r}")
        if not isinstance(listener_queue_size, int) or listener_queue_size < 1:
            raise ConfigurationError(f"listener_queue_size must be an int >= 1, got {listener_queue_size!r}")
        if not isinstance(listener_timeout, (int, float)) or not listener_timeout > 0:
            raise ConfigurationError(f"listener_timeout must be a number of seconds > 0, got {listener_timeout!r}")
        self.session_id: str | None = session_id or (uuid.uuid4().hex if store else None)
        self._model = _resolve_model(model)
        self._registry = ToolRegistry(tools)
        self._defaults = LoopOptions(
            model=self._model if self._model is not None else _NoModel(),
            tools=self._registry,
            system=system,
            max_steps=max_steps,
            tool_execution=tool_execution,
            tool_choice=tool_choice,
            settings=settings or ModelSettings(),
            provider_options=dict(provider_options or {}),
            cache=cache,
            execution_context=execution_context,
        )
        self._defaults.check()  # a placeholder stands in for a missing model
        initial = list(events or ())
        for ev in initial:
            if not isinstance(ev, Event):
                raise ConfigurationError(f"events must be Event objects, not {type(ev).__name__}")
        self._store = store
        self._lock = threading.RLock()
        self._events: list[Event] = []
        self._ids: set[str] = set()
        self._seq = 0
        self._revision = 0
        self._projector = Projector(render_runtime)
        self._subs: list[Subscription] = []
        self._listener_queue_size = listener_queue_size
        self._listener_timeout = listener_timeout
        self._closed = False
        self._failed: BaseException | None = None
        self._aborted: str | None = None
        self._root_cancel = CancelToken()
        self._current_cancel: CancelToken | None = None
        self._gate = threading.Condition(threading.RLock())
        self._queue: deque[object] = deque()
        self._pool: ThreadPoolExecutor | None = None
        self._max_workers = max_tool_workers
        self.execution_context = execution_context
        stored = None
        if store is not None:
            _check_writable(store, self.session_id)  # type: ignore[arg-type]
            if session_id is not None:
                stored = _stored_session(store, session_id, initial, seed_if_new=_seed_if_new)
        if stored is not None:  # restored from the store: its events are already durable
            self._revision = stored.revision
            self._load_committed(list(stored.events))
        elif initial:
            self._commit(initial)
        self._scheduler = GenerationScheduler(self.generate)
        self._stop_job_events = bridge_job_events(self, execution_context)

    # -- construction ------------------------------------------------------------------

    @classmethod
    def open(
        cls, session_id: str, *, store: EventStore, events: Iterable[Event] | None = None, **kwargs: Any
    ) -> Session:
        """Restore session ``session_id`` from ``store``, or start it there when it does
        not exist, with ``events`` (if given) as its first events; a stored session is
        restored as it is and ``events`` is not used. Takes the same keyword arguments as
        the constructor (which also restores a stored ``session_id``, but refuses
        ``events`` for one)."""
        validate_session_id(session_id)
        return cls(session_id=session_id, store=store, events=events, _seed_if_new=True, **kwargs)

    def _load_committed(self, events: list[Event]) -> None:
        self._events.extend(events)
        self._ids.update(e.id for e in events)
        self._seq = max((e.seq for e in events), default=0)

    # -- state -------------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        """A snapshot of all committed events, in commit order."""
        with self._lock:
            return tuple(self._events)

    @property
    def revision(self) -> int:
        """The store revision of the last commit (0 without a store)."""
        return self._revision

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def model_messages(self) -> list[Message]:
        """The messages the next inference would see (without the system prompt)."""
        return self._project()[0]

    # -- pushing -----------------------------------------------------------------------

    def push_user_message(self, content: Prompt) -> Event:
        """Commit a user message (text, or text plus image/file parts)."""
        return self._commit([UserMessageEvent(content=normalize_prompt(content))])[0]

    def push_runtime_event(self, type: str, data: dict[str, Any] | None = None) -> Event:
        """Commit a runtime event (``job-finished``, ``timer-fired``...) with JSON data
        (a dict; anything that is not strict JSON is a ConfigurationError)."""
        if data is not None and not isinstance(data, dict):
            raise ConfigurationError(
                f"runtime event {type!r} data must be a dict (a JSON object), not {_type_name(data)}"
            )
        return self._commit([RuntimeEvent(runtime_type=type, data=dict(data or {}))])[0]

    def push_event(self, event: Event) -> Event:
        """Commit any event; returns it with its ``seq``."""
        if not isinstance(event, Event):
            raise ConfigurationError(f"push_event takes an Event, not {type(event).__name__}")
        return self._commit([event])[0]

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise SessionFailedError(
                f"session {self.session_id!r} refuses work: an earlier append to its store "
                f"failed ({self._failed}). Reopen it with Session.open to continue from "
                f"what is durable."
            ) from self._failed
        if self._closed:
            raise SessionClosedError("the session is closed; open a new one to continue")

    def _commit(self, events: Sequence[Event]) -> list[Event]:
        with self._lock:
            self._check_usable()
            seq = self._seq
            committed: list[Event] = []
            batch: set[str] = set()
            for ev in events:
                if ev.id in self._ids or ev.id in batch:
                    raise ConfigurationError(
                        f"event {ev.id!r} is already committed in this session (or given twice); "
                        f"events are immutable records: create a new event to say something new"
                    )
                batch.add(ev.id)
                problem = _storable_problem(ev)
                if problem is not None:  # refused before anything is committed
                    raise ConfigurationError(
                        f"cannot commit {ev.type} event {ev.id!r}: it is not strict JSON ({problem}). "
                        f"Nothing was committed. Use plain JSON: dicts with string keys, lists, "
                        f"strings, finite numbers, true, false and null."
                    )
                seq += 1
                committed.append(ev.with_seq(seq))
            if self._store is not None:
                try:
                    self._revision = self._store.append(
                        self.session_id,  # type: ignore[arg-type]
                        committed,
                        expected_revision=self._revision,
                    )
                except StoreConflictError as exc:
                    self._failed = exc
                    raise
                except ConfigurationError:
                    raise  # refused before any side effect: the session is unchanged
                except BaseException as exc:
                    self._failed = exc
                    raise SessionFailedError(
                        f"could not append to the store of session {self.session_id!r}: "
                        f"{type(exc).__name__}: {exc}. Nothing after revision "
                        f"{self._revision} was committed; this session object refuses further "
                        f"work. Fix the cause, then Session.open it again."
                    ) from exc
            self._events.extend(committed)
            self._ids.update(e.id for e in committed)
            self._seq = seq
            # a copy: offer() may remove a listener that fell behind or stalled, and the
            # ones after it must still hear this commit
            for sub in list(self._subs):
                sub.offer(committed)
            return committed

    def _project(self, *, for_model: bool = True) -> tuple[list[Message], dict[str, str]]:
        """The messages (the model's view, or the plain conversation) and the tool calls
        still waiting for results."""
        with self._lock:
            p = self._projector
            p.catch_up(self._events)
            return p.model_view(job_status=for_model), p.pending_tool_calls

    def _executor(self) -> Executor:
        with self._lock:
            self._check_usable()  # a pool made after close() would never be shut down
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix="agentkit-tool")
            return self._pool

    # -- listeners ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event committed from now on, in commit
        order, on a delivery thread, after the event is durable. Returns a function
        that unsubscribes. A listener that raises or stalls is removed with a warning."""
        if not callable(listener):
            raise ConfigurationError("subscribe() needs a callable listener(event)")

        def remove(sub: Subscription) -> None:
            with self._lock:
                if sub in self._subs:
                    self._subs.remove(sub)

        with self._lock:
            if self._closed:  # its delivery thread would wait forever for events
                raise SessionClosedError("the session is closed; subscribe to an open session")
            sub = Subscription(
                listener,
                max_queue=self._listener_queue_size,
                timeout=self._listener_timeout,
                on_remove=remove,
            )
            self._subs.append(sub)

        def unsubscribe() -> None:
            remove(sub)
            sub.close(drain=False)  # not called again, not even for events already queued
            sub.join(time.monotonic() + _LISTENER_JOIN_SECONDS)  # let a call in flight end

        return unsubscribe

    # -- generation --------------------------------------------------------------------

    def generate(
        self,
        *,
        model: ChatModel | str | None = None,
        system: str | None = _UNSET,
        max_steps: int | None = None,
        tool_execution: ToolExecution | None = None,
        tool_choice: ToolChoice | None = None,
        settings: ModelSettings | None = None,
        provider_options: dict[str, Any] | None = None,
        cache: bool | None = None,
        on_token: Callable[[str], Any] | None = None,
        on_reasoning: Callable[[str], Any] | None = None,
        on_tool_call_start: Callable[[ToolCallPart], Any] | None = None,
        on_tool_call_update: Callable[[str, Any], Any] | None = None,
        on_tool_call_finish: Callable[[ToolCallRecord], Any] | None = None,
        validate_completion: Callable[[RunResult], str | None] | None = None,
        max_validation_retries: int | None = None,
        on_context_overflow: Callable[[list[Message], CancelToken], Sequence[Message]] | None = None,
        max_context_overflow_retries: int | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateResult:
        """Run the model (and its tool calls) until it answers without calling tools.

        Calls from several threads run one at a time in call order; a call still waiting
        for its turn leaves the queue at once when its ``cancel`` token is cancelled.
        Per-call arguments override the session's defaults for this call only. Raises
        :class:`~agentkit.errors.CancelledError` when aborted or cancelled,
        :class:`~agentkit.errors.SessionClosedError` when the session is closed or
        aborted, and :class:`~agentkit.errors.SessionError` when called from inside a
        generation of this same session (a tool or callback), which would deadlock.
        """
        d = self._defaults
        resolved = _resolve_model(model) if model is not None else self._model
        if resolved is None:
            raise ConfigurationError("this session has no model: pass model= to Session or generate()")
        opts = LoopOptions(
            model=resolved,
            tools=self._registry,
            system=d.system if system is _UNSET else system,
            max_steps=max_steps if max_steps is not None else d.max_steps,
            tool_execution=tool_execution or d.tool_execution,
            tool_choice=tool_choice or d.tool_choice,
            settings=settings or d.settings,
            provider_options={**d.provider_options, **(provider_options or {})},
            cache=d.cache if cache is None else cache,
            on_token=on_token,
            on_reasoning=on_reasoning,
            on_tool_call_start=on_tool_call_start,
            on_tool_call_update=on_tool_call_update,
            on_tool_call_finish=on_tool_call_finish,
            validate_completion=validate_completion,
            max_validation_retries=max_validation_retries or 0,
            on_context_overflow=on_context_overflow,
            max_context_overflow_retries=(
                3 if max_context_overflow_retries is None else max_context_overflow_retries
            ),
            execution_context=d.execution_context,
        )
        opts.check()
        if self in _GENERATING.get():
            raise SessionError(
                "generate() was called from inside a generation of this same session (from "
                "a tool, a callback or validate_completion); it would wait for itself "
                "forever. Push an event instead; call generate() after this one returns, or "
                "use schedule_generate()."
            )
        self._check_usable()
        ticket, token = self._enter_gate(cancel)
        generating = _GENERATING.set((*_GENERATING.get(), self))
        try:
            try:
                result = run_loop(self, opts, token)
            except BaseException as exc:
                if token.cancelled and not self._closed and self._failed is None:
                    reason = token.reason or str(exc)
                    try:
                        self._commit([ControlEvent(action="generation-aborted", data={"reason": reason})])
                    except SessionError:
                        pass  # closed or failed meanwhile: the original error says more
                raise
            fields = {f: getattr(result, f) for f in result.__dataclass_fields__}
            return GenerateResult(**fields, events=self.events)
        finally:
            _GENERATING.reset(generating)
            with self._gate:
                self._current_cancel = None
                self._queue.remove(ticket)  # it is first: this generation held the gate
                self._gate.notify_all()

    def _enter_gate(self, cancel: CancelToken | None) -> tuple[object, CancelToken]:
        """Wait in FIFO order for the generation gate; return the ticket and the new
        generation's token. A waiter that is cancelled, interrupted, or finds the session
        closed, failed or aborted leaves the queue at once and never blocks the others."""
        ticket = object()
        with self._gate:
            self._queue.append(ticket)
        forget = cancel._on_cancel(self._wake_gate) if cancel is not None else None
        try:
            with self._gate:
                while True:
                    self._check_usable()
                    if self._aborted:
                        raise SessionClosedError(
                            f"the session was aborted ({self._aborted}); it accepts pushes but "
                            f"no more generations: continue in a new Session"
                        )
                    if cancel is not None:
                        cancel.raise_if_cancelled()
                    if self._queue[0] is ticket:
                        break
                    self._gate.wait()
                # under the gate, so abort_session() either is seen above or sees this token
                token = self._root_cancel.child()
                if cancel is not None:
                    cancel.link(token)
                self._current_cancel = token
        except BaseException:
            with self._gate:
                self._queue.remove(ticket)
                self._gate.notify_all()
            raise
        finally:
            if forget is not None:
                forget()
        return ticket, token

    def _wake_gate(self) -> None:
        with self._gate:
            self._gate.notify_all()

    def abort_current_generation(self, reason: str = "aborted by the host") -> bool:
        """Cancel the running generation's model call and foreground tools. Returns True
        when a generation was running. Queued generations still run."""
        with self._gate:
            token = self._current_cancel
        if token is None:
            return False
        token.cancel(reason)  # outside the gate: cancel callbacks may take it
        return True

    def abort_session(self, reason: str = "session aborted", *, abort_jobs: bool = False) -> None:
        """Cancel the running generation and scheduled ones, and refuse future ones
        (pushes still work). Background jobs keep running unless ``abort_jobs=True``,
        which aborts every running job of the execution context."""
        jobs = self._jobs_capability("abort_session(abort_jobs=True)") if abort_jobs else None
        with self._gate:
            self._aborted = reason
            self._gate.notify_all()
        self._scheduler.cancel_all(reason)
        self.abort_current_generation(reason)
        if jobs is not None:
            for state in jobs.list():
                if state.running:
                    jobs.abort(state.execution_id, reason)

    def abort_job(self, execution_id: str, reason: str = "aborted by the host") -> JobState:
        """Abort one background job of the execution context; returns its final state."""
        return self._jobs_capability("abort_job").abort(execution_id, reason)

    def _jobs_capability(self, what: str) -> JobControl:
        jobs = getattr(self.execution_context, "jobs", None)
        if jobs is None:
            raise ConfigurationError(
                f"{what} needs an execution context with jobs: pass "
                f"Session(execution_context=LocalExecutionContext(root))"
            )
        return jobs

    def schedule_generate(
        self, key: str, debounce: float = 0.05, **generate_kwargs: Any
    ) -> Future[GenerateResult]:
        """Run ``generate(**generate_kwargs)`` once ``debounce`` seconds pass without
        another call with the same ``key``; returns a ``concurrent.futures.Future`` of its
        result, shared by same-key calls until it starts. See :mod:`agentkit.scheduling`."""
        self._check_usable()
        if self._aborted:
            raise SessionClosedError(f"the session was aborted: {self._aborted}")
        return self._scheduler.schedule(key, debounce, **generate_kwargs)

    def cancel_scheduled_generation(self, key: str) -> bool:
        """Cancel the scheduled generation ``key`` (aborting it if it already runs);
        True when there was one."""
        return self._scheduler.cancel(key)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Cancel any running generation, refuse further work, deliver what listeners
        have queued and release worker threads. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subs, self._subs = list(self._subs), []
            pool, self._pool = self._pool, None
        self._stop_job_events()  # stop listening; jobs keep running
        self._scheduler.close()
        self._root_cancel.cancel("session closed")
        with self._gate:
            self._gate.notify_all()
        for sub in subs:
            sub.close()
        # one shared bound, so stalled listeners cannot make close() take long
        deadline = time.monotonic() + _LISTENER_JOIN_SECONDS
        for sub in subs:
            sub.join(deadline)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Session {self.session_id or '(memory)'} {state}, {len(self._events)} events>"


def _check_writable(store: EventStore, session_id: str) -> None:
    """Let a store that can tell (``FileEventStore.check_writable``) refuse a session it
    cannot write now, naming the path, rather than fail the session's first push."""
    check = getattr(store, "check_writable", None)
    if callable(check):
        check(session_id)


def _stored_session(
    store: EventStore, session_id: str, seed: list[Event], *, seed_if_new: bool
) -> StoredSession | None:
    """Session ``session_id`` as ``store`` holds it, or None when it is new (or empty)."""
    stored = store.load(session_id)
    if stored is None or (stored.revision == 0 and not stored.events):
        return None
    if seed and not seed_if_new:
        raise ConfigurationError(
            f"session {session_id!r} already exists in the store (revision {stored.revision}, "
            f"{len(stored.events)} events), so events= cannot seed it: events= starts a new "
            f"session. Leave events= out to continue the stored session, use "
            f"Session.open({session_id!r}, store=store, events=...) to seed it only when it is "
            f"new, or pick a new session_id."
        )
    return stored


def _type_name(value: object) -> str:
    return type(value).__name__


class _NoModel:
    """Placeholder for a session created without a model (generate() requires one)."""

    def stream(self, request: Any) -> Any:  # pragma: no cover - never called
        raise ConfigurationError("this session has no model")
