"""Session: a thread-safe, synchronous agent conversation over an append-only event log.

The Session is a facade: its state is an :class:`~agentkit._eventlog.EventLog` (numbered,
durable commits, the projection and listeners) and a
:class:`~agentkit._gate.GenerationGate` (one inference at a time, FIFO); the step loop
(:mod:`agentkit._loop`) works on the event log.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import uuid
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future
from dataclasses import replace
from typing import Any, Generic, overload

from typing_extensions import TypeVar, Unpack

from .._threads import SessionExecutor, run_sync_cancellable
from ..approvals._policy import ApprovalDecision, ApprovalRequest, decision_events
from ..cancel import CancelToken
from ..context._compact import ContextShaper, apply_retention, compact_log, finish_prune, iter_history
from ..context._compaction import DEFAULT_KEEP_LAST, Compactor, Retention
from ..context._invariants import check_events
from ..context._projection import Projector, RuntimeRenderer
from ..errors import (
    CancelledError,
    ConfigurationError,
    SessionClosedError,
    SessionError,
    StoreError,
    StoreUnavailableError,
)
from ..events import CompactionEvent, ControlEvent, Event, RuntimeEvent, UserMessageEvent
from ..execution.base import JobControl, JobState
from ..jobs._bridge import bridge_job_events
from ..loop._loop import run_loop
from ..messages import Message, Prompt, normalize_prompt
from ..models.base import ChatModel
from ..options import (
    NOT_GIVEN,
    GenerationKwargs,
    GenerationOptions,
    LoopOptions,
    check_deps,
    check_deps_type,
    with_output_type,
)
from ..results import GenerateResult
from ..stores.base import EventStore, StoredSession, validate_session_id
from ..streaming._events import Emit, GenerationEndEvent, GenerationStartEvent
from ..streaming._stream import AgentStream
from ..tools.base import Tool, ToolRegistry
from ..transactions import _session as _transact
from ..transactions._ledger import GenerationTransaction, UncertainExecution, reserved_problem
from ._eventlog import EventLog
from ._foreign import model_from, tools_from
from ._gate import GenerationGate
from ._redaction import redactor_of
from ._scheduling import GenerationScheduler
from ._subscriptions import Listener, Subscription, Unsubscribe

__all__ = ["Session"]

DepsT = TypeVar("DepsT", default=Any)
"""A session's ``deps_type`` (``Any`` without one)."""
OutputT = TypeVar("OutputT", default=None, covariant=True)
"""A session's ``output_type`` (None without one)."""
T = TypeVar("T")

_TURN_LOCK_SECONDS = 600.0
"""How long ask() waits for another process's turn of the same session."""

_LISTENER_JOIN_SECONDS = 5.0
"""How long close() waits, in all, for listeners to take what is queued for them."""

# The sessions whose generation the current thread (or a tool thread started by it) is
# serving: generate() on one of them from there would wait for itself forever.
_GENERATING: contextvars.ContextVar[tuple[Session[Any, Any], ...]] = contextvars.ContextVar(
    "agentkit_generating", default=()
)


class Session(Generic[DepsT, OutputT]):
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

    Use it as a context manager, or call :meth:`close`. For a type checker it is a
    ``Session[deps_type, output_type]``: ``ask``/``generate`` return a
    ``GenerateResult[output_type]`` and take ``deps`` of ``deps_type``.
    """

    def __init__(
        self,
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
        deps: DepsT | None = None,
        deps_type: type[DepsT] | None = None,
        output_type: type[OutputT] | None = None,
        **options: Unpack[GenerationKwargs],
    ) -> None:
        """``options`` are the per-generation options (:class:`~agentkit.options.GenerationOptions`:
        ``system``, ``max_steps``, ``hooks``, ``tool_choice``, ``output_type``, callbacks...), the
        defaults of every :meth:`generate` of this session.

        ``retention`` (:class:`~agentkit.Retention`, needs a ``store``) bounds the active
        log: after a generation that leaves more than ``max_events`` events in it, the
        session compacts, archives the covered events under the compaction event's id and
        removes them from the active log (see docs/context.md).

        ``deps`` are the default dependencies of every generation (tools and hooks read
        them as ``ToolContext.deps``; ``generate(deps=...)`` gives others for one call).
        They are never written to the log. With ``deps_type`` (a class), deps of another
        type, or none, are a :class:`ConfigurationError` before the generation starts."""
        self._setup(model, tools=tools, session_id=session_id, events=events, store=store,
                    execution_context=execution_context, render_runtime=render_runtime,
                    max_tool_workers=max_tool_workers, listener_queue_size=listener_queue_size,
                    listener_timeout=listener_timeout, retention=retention, deps=deps, deps_type=deps_type,
                    output_type=output_type, _seed_if_new=False, _options=None, **options)

    @classmethod
    def _create(cls, model: ChatModel | str | None = None, *, seed_if_new: bool = False,
                base_options: GenerationOptions | None = None, **kwargs: Any) -> Session[Any, Any]:
        """A Session made as ``Session(model, **kwargs)`` is, with what only agentkit passes:
        ``seed_if_new`` (``open``) and ``base_options`` (an Agent's options, built and checked)."""
        session: Session[Any, Any] = cls.__new__(cls)
        session._setup(model, _seed_if_new=seed_if_new, _options=base_options, **kwargs)
        return session

    def _setup(
        self,
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
        _seed_if_new: bool = False,
        _options: GenerationOptions | None = None,
        **options: Any,
    ) -> None:
        """What ``__init__`` documents, plus ``_seed_if_new`` and ``_options`` (see :meth:`_create`)."""
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
        self._retention = retention
        check_deps_type(deps_type)
        self._deps_type = deps_type
        self._deps = deps
        if deps is not None:
            check_deps(deps, deps_type)
        self.session_id: str | None = session_id or (uuid.uuid4().hex if store else None)
        self._model = model_from(model)
        self._registry = ToolRegistry(tools_from(tools))
        # an Agent hands over its options already built and checked
        self._options = _options.merged(options) if _options is not None else GenerationOptions.build(options)
        self._redactor = redactor_of(self._options.redact)
        self.execution_context = execution_context
        # a placeholder stands in for a missing model: check the rest now
        self._loop_options(self._model if self._model is not None else _NoModel(), self._options).check()
        initial = list(events or ())
        for ev in initial:
            if not isinstance(ev, Event):
                raise ConfigurationError(f"events must be Event objects, not {type(ev).__name__}")
        check_events(initial)  # a history that breaks the providers' rules, before any side effect
        self._log = EventLog(
            session_id=self.session_id,
            store=store,
            revision=0,
            render_runtime=render_runtime,
            listener_queue_size=listener_queue_size,
            listener_timeout=listener_timeout,
            listener_join_seconds=_LISTENER_JOIN_SECONDS,
        )
        self._gate = GenerationGate(self._log.check_usable)
        self._own_transactions: set[str] = set()  # begun or claimed here: close() interrupts these only
        self._pool: SessionExecutor | None = None
        self._max_workers = max_tool_workers
        stored = None
        if store is not None:
            _check_writable(store, self.session_id)  # type: ignore[arg-type]
            if session_id is not None:
                stored = _stored_session(store, session_id, initial, seed_if_new=_seed_if_new)
        if stored is not None:  # restored from the store: its events are already durable
            self._log.load_committed(list(stored.events), revision=stored.revision)
        elif initial:
            self._log.commit(initial)
        # nobody holds the claim token of a transaction left open (by a crash, or in the
        # events= given): interrupt it for good, never resume its work
        self._interrupt_unfinished("the session was reopened while this generation was unfinished")
        if retention is not None:
            self._finish_interrupted_retention()
        self._scheduler = GenerationScheduler(self.generate)
        self._stop_job_events = bridge_job_events(self, execution_context)
        _tell_tools(self, self._registry.values())

    # -- construction ------------------------------------------------------------------

    @classmethod
    def open(
        cls, session_id: str, *, store: EventStore, events: Iterable[Event] | None = None, **kwargs: Any
    ) -> Session[Any, Any]:
        """Restore session ``session_id`` from ``store``, or start it there when it does
        not exist, with ``events`` (if given) as its first events; a stored session is
        restored as it is and ``events`` is not used. Takes the same keyword arguments as
        the constructor (which also restores a stored ``session_id``, but refuses
        ``events`` for one)."""
        validate_session_id(session_id)
        return cls._create(session_id=session_id, store=store, events=events, seed_if_new=True, **kwargs)

    # -- state -------------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        """A snapshot of all committed events, in commit order (with a store: every
        event any process committed before the call; see :meth:`refresh`)."""
        self._log.sync()
        return self._log.events

    @property
    def revision(self) -> int:
        """The store revision of what this object holds (0 without a store): the last
        commit, or the last catch-up (a read or :meth:`refresh`)."""
        return self._log.revision

    @property
    def store(self) -> EventStore | None:
        """The store the session is durable in, or None for an in-memory session."""
        return self._log.store

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._log.closed

    def model_messages(self) -> list[Message]:
        """The messages the next inference would see (without the system prompt)."""
        self._log.sync()
        return self._log.project()[0]

    def history(self) -> Iterator[Event]:
        """Every event of the session in commit order: those retention archived (read
        from the store's archives, oldest first), then the active log (:attr:`events`)."""
        return iter_history(self._log.store, self.session_id, self.events)

    # the internal objects' state some tests look at
    @property
    def _queue(self) -> deque[object]:
        return self._gate.queue

    @property
    def _subs(self) -> list[Subscription]:
        return self._log.subs

    @property
    def _projector(self) -> Projector:
        return self._log.projector

    # -- pushing -----------------------------------------------------------------------

    def refresh(self) -> list[Event]:
        """Load what other writers (another process, another host) committed to this
        session's store since this object's revision, and return those events. Their
        listeners hear them too. Reads (:attr:`events`, :meth:`pending_approvals`...)
        and commands catch up by themselves (a cheap check of the store's head first),
        so this is needed only to hear other processes' events without reading. A no-op
        without a store."""
        return self._log.refresh()

    def push_user_message(self, content: Prompt) -> Event:
        """Commit a user message (text, or text plus image/file parts)."""
        return self._log.commit([UserMessageEvent(content=normalize_prompt(content))])[0]

    def steer(self, content: Prompt) -> Event:
        """Commit a user message that the running generation reads at its next model step
        (after the tool calls in flight finish); with no generation running, the next one
        reads it. Works from any thread."""
        return self.push_user_message(content)

    def follow_up(self, content: Prompt) -> Event:
        """Commit a user message that the running generation answers before it ends: when
        the model would stop, the loop runs another step for it. With no generation
        running, the next one answers it. Works from any thread."""
        return self._log.commit([UserMessageEvent(content=normalize_prompt(content), follow_up=True)])[0]

    def push_runtime_event(self, type: str, data: dict[str, Any] | None = None) -> Event:
        """Commit a runtime event (``job-finished``, ``timer-fired``...) with JSON data
        (a dict; anything that is not strict JSON is a ConfigurationError)."""
        if data is not None and not isinstance(data, dict):
            raise ConfigurationError(
                f"runtime event {type!r} data must be a dict (a JSON object), not {_type_name(data)}"
            )
        return self.push_event(RuntimeEvent(runtime_type=type, data=dict(data or {})))

    def push_event(self, event: Event) -> Event:
        """Commit any event; returns it with its ``seq``. The records of transactions and
        execution intents are written only by the Session's own methods (they carry
        authority): an event with a ``generation_id`` or such a control action is refused."""
        if not isinstance(event, Event):
            raise ConfigurationError(f"push_event takes an Event, not {type(event).__name__}")
        problem = reserved_problem(event)
        if problem is not None:
            raise ConfigurationError(problem)
        if isinstance(event, RuntimeEvent) and self._redactor is not None:  # secrets never reach the store
            event = replace(event, data=self._redactor.value(event.data))
        return self._log.commit([event])[0]

    # -- approvals ---------------------------------------------------------------------

    def pending_approvals(self) -> list[ApprovalRequest]:
        """The tool calls waiting for a person's answer, in the order they were asked
        (rebuilt from the log: a session opened in another process sees the same list)."""
        self._log.sync()
        with self._log.lock:
            return self._log.approval_state().pending()

    def approve(self, request_id: str, *, remember: bool = False, note: str | None = None) -> Event:
        """Approve a pending request: the next :meth:`generate` runs the call once.
        ``remember=True`` also allows later calls of the same tool in this session
        without asking; ``note`` is a free-form audit note (who approved). Raises
        :class:`~agentkit.errors.ApprovalError` for an unknown id or a request already
        decided. Returns the committed decision event."""
        return self._decide(request_id, ApprovalDecision.approve(remember=remember, note=note))

    def deny(self, request_id: str, *, reason: str = "denied by the reviewer", remember: bool = False,
             note: str | None = None) -> Event:
        """Deny a pending request: the next :meth:`generate` gives the call the error
        result ``denied: <reason>`` (it never runs) and continues. ``remember=True``
        also denies later calls of the tool in this session without asking."""
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigurationError("deny() needs a non-empty reason: the model reads it")
        return self._decide(request_id, ApprovalDecision.deny(reason, remember=remember, note=note))

    def _decide(self, request_id: str, decision: ApprovalDecision) -> Event:
        if decision.note is not None and not isinstance(decision.note, str):
            raise ConfigurationError(f"note must be a str or None, not {type(decision.note).__name__}")

        def decide() -> list[Event]:  # again on the caught-up state if another process wrote first
            request = self._log.approval_state().check_decidable(request_id, approving=decision.approved)
            return decision_events(request, decision, source="host")

        return self._log.decide(decide)[0]

    def _executor(self) -> Executor:
        with self._log.lock:
            self._log.check_usable()  # a pool made after close() would never be shut down
            if self._pool is None:
                # a door to the process's shared tool threads (agentkit._threads)
                self._pool = SessionExecutor(self._max_workers)
            return self._pool

    # -- listeners ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Unsubscribe:
        """Call ``listener(event)`` for every event committed from now on, in commit
        order, on a delivery thread, after the event is durable. With a store, that
        includes what other processes and hosts commit to this session: each event
        once, in store order, within a second of its commit. Returns a function that
        unsubscribes, ``unsubscribe(*, drain=False, timeout=5.0)``: ``drain=True``
        returns once every event already queued for the listener is delivered (or the
        timeout passed). A listener that raises or stalls is removed with a warning."""
        return self._log.subscribe(listener)

    # -- generation --------------------------------------------------------------------

    @overload
    def generate(
        self, *, output_type: type[T], model: ChatModel | str | None = None, cancel: CancelToken | None = None,
        transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
        **options: Unpack[GenerationKwargs],
    ) -> GenerateResult[T]: ...
    @overload
    def generate(
        self, *, model: ChatModel | str | None = None, cancel: CancelToken | None = None,
        transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
        **options: Unpack[GenerationKwargs],
    ) -> GenerateResult[OutputT]: ...
    def generate(
        self,
        *,
        output_type: Any = NOT_GIVEN,
        model: ChatModel | str | None = None,
        cancel: CancelToken | None = None,
        transaction: GenerationTransaction | None = None,
        deps: DepsT | None = None,
        **options: Unpack[GenerationKwargs],
    ) -> GenerateResult[Any]:
        """Run the model (and its tool calls) until it answers without calling tools.
        With nothing new to answer (the conversation is empty or ends in the model's
        answer, no tool call is open, no runtime event came since) no model is called and
        the result's ``finish_reason`` is ``"nothing-to-answer"``.

        ``options`` override the session's defaults for this call only (``system``,
        ``max_steps``, callbacks...; ``hooks`` are added after the session's). Calls from
        several threads run one at a time in call order; a call still waiting for its
        turn leaves the queue at once when its ``cancel`` token is cancelled. Raises
        :class:`~agentkit.errors.CancelledError` when aborted or cancelled,
        :class:`~agentkit.errors.SessionClosedError` when the session is closed or
        aborted, and :class:`~agentkit.errors.SessionError` when called from inside a
        generation of this same session (a tool or callback), which would deadlock.

        With ``transaction`` (from :meth:`begin_generation`) the generation claims that
        transaction before any model or tool work, and its events stay hidden from later
        model requests until :meth:`finalize_generation` accepts them; a wrong or stale
        token or a second claim raises :class:`~agentkit.errors.TransactionError` without
        any model call, and a generation that fails or is cancelled interrupts it.

        ``deps`` (for this call; the session's ``deps`` otherwise) reach tools and hooks
        as ``ToolContext.deps``.
        """
        return self._generate(model=model, cancel=cancel, transaction=transaction, deps=deps,
                              options=with_output_type(options, output_type))

    def _generate(
        self,
        *,
        model: ChatModel | str | None = None,
        cancel: CancelToken | None = None,
        transaction: GenerationTransaction | None = None,
        deps: Any = None,
        emit: Emit | None = None,
        prompt: UserMessageEvent | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> GenerateResult[Any]:
        """:meth:`generate` (``options``: its generation options), with where its agent
        events go (a stream's ``emit``) and the user message it commits once it holds the
        turn (``ask``'s ``prompt``)."""
        resolved = model_from(model) if model is not None else self._model
        if resolved is None:
            raise ConfigurationError("this session has no model: pass model= to Session or generate()")
        if deps is None:
            deps = self._deps
        if self._deps_type is not None:
            check_deps(deps, self._deps_type)
        opts = self._loop_options(resolved, self._options.merged(options or {}), emit=emit, deps=deps)
        opts.check()
        if self in _GENERATING.get():
            raise SessionError(
                "generate() was called from inside a generation of this same session (from "
                "a tool, a callback or validate_completion); it would wait for itself "
                "forever. Push an event instead; call generate() after this one returns, or "
                "use schedule_generate()."
            )
        self._log.check_usable()
        if transaction is not None:
            _transact.check_claim(self._log, transaction)  # before waiting in the queue
        try:
            ticket, token = self._gate.enter(cancel)
        except BaseException as exc:
            if transaction is not None:  # cancelled or refused before it could run
                _transact.interrupt(self._log, transaction.generation_id, _transact.closed_reason(exc))
            raise
        generating = _GENERATING.set((*_GENERATING.get(), self))
        sink = opts.event_sink()
        turn = contextlib.ExitStack()
        try:
            if prompt is not None or self._log.durable:  # ask(), or a store-backed session
                try:
                    self._begin_turn(turn, prompt, token)
                except BaseException as exc:
                    if transaction is not None:
                        _transact.interrupt(self._log, transaction.generation_id, _transact.closed_reason(exc))
                    raise
            result: GenerateResult | None = None
            error: BaseException | None = None
            try:
                if sink is not None:
                    sink(GenerationStartEvent(session_id=self.session_id))
                run = self._run(opts, token, transaction)
                fields = {f: getattr(run, f) for f in run.__dataclass_fields__}
                result = GenerateResult(**fields, events=self.events)
                self._retain(opts, token)
            except BaseException as exc:  # noqa: BLE001 - re-raised after the end hooks
                error = exc
                if token.cancelled and not self._log.closed and self._log.failed is None:
                    reason = token.reason or str(exc)
                    try:
                        self._log.commit([ControlEvent(action="generation-aborted", data={"reason": reason})])
                    except SessionError:
                        pass  # closed or failed meanwhile: the original error says more
            error = _end_generation(opts, sink, result, error)
            if error is not None:
                raise error
            assert result is not None
            return result
        finally:
            turn.close()
            _GENERATING.reset(generating)
            self._gate.leave(ticket)

    def _run(self, opts: LoopOptions, token: CancelToken, transaction: GenerationTransaction | None) -> Any:
        if transaction is None:
            return run_loop(self._log, opts, token, self._executor)
        host = _transact.claim(self._log, transaction)
        self._own_transactions.add(transaction.generation_id)
        try:
            run = run_loop(host, opts, token, self._executor)
            token.raise_if_cancelled()  # a cancelled generation never completes its candidate
            _transact.complete(self._log, transaction.generation_id)
            return run
        except BaseException as exc:
            _transact.interrupt(self._log, transaction.generation_id, _transact.closed_reason(exc))
            raise

    # -- transactional generations -----------------------------------------------------

    def begin_generation(self, prompt: Prompt) -> GenerationTransaction:
        """Start a transactional generation: commit a ``generation-begun`` record and the
        user message ``prompt`` in one append, and return the handle whose
        ``claim_token`` authorizes running it (``generate(transaction=txn)``) and deciding
        its outcome (:meth:`finalize_generation`). Only the token's SHA-256 digest is
        stored: keep the handle. Its events are not shown to the model until the
        generation runs, and after it ran, not until it is accepted."""
        txn = _transact.begin(self._log, prompt)
        self._own_transactions.add(txn.generation_id)
        return txn

    def finalize_generation(self, transaction: GenerationTransaction, outcome: str) -> None:
        """Decide a completed transactional generation: ``"accepted"`` makes its events
        part of what the model sees, ``"rejected"`` keeps them hidden for good.
        ``"interrupted"`` abandons a transaction in any unfinished state. Finalizing again
        with the same outcome does nothing; a different one raises
        :class:`~agentkit.errors.TransactionError`, as do a wrong token and accepting
        while one of its tool execution intents is unresolved."""
        _transact.finalize(self._log, transaction, outcome)

    def transactions(self) -> dict[str, str]:
        """Every transactional generation of this session and its state (``begun``,
        ``execution-started``, ``execution-completed``, ``accepted``, ``rejected``,
        ``interrupted``), by generation id in the order they began; rebuilt from the log
        in one pass when the session is opened, then kept current."""
        self._log.sync()
        with self._log.lock:
            return self._log.ledger.states()

    def uncertain_tool_executions(self) -> list[UncertainExecution]:
        """Tool calls whose execution intent is committed but that have no result and no
        reconciliation: after a crash, the calls that were running, whose effect may or
        may not have happened. Calls this session object is running now are not listed.
        Without a store no intent is written, so this is always empty."""
        self._log.sync()
        with self._log.lock:
            return self._log.ledger.uncertain()

    def reconcile_tool_execution(
        self, intent_id: str, resolution: str, *, output: Any = None, error: str | None = None
    ) -> None:
        """Record what became of an uncertain tool call, found out by the host:
        ``"executed"`` with ``output`` (anything a tool may return), ``"not-executed"``, or
        ``"abandoned-unknown"`` (``error`` optionally tells the model more). Commits the
        reconciliation and the result the model reads: the call's result if the call is
        still open, otherwise a ``tool-execution-reconciled`` runtime event. The same
        reconciliation again does nothing; a different one raises
        :class:`~agentkit.errors.TransactionError`. No tool is run.

        Decided between turns: while a turn of this session runs (in another process, or
        another thread), its calls may still be running, so this raises the turn lock's
        :class:`~agentkit.errors.StoreUnavailableError` at once; retry once it ends."""
        _transact.reconcile(self._log, intent_id, resolution, output, error, turn=lambda: self._turn(timeout=0))

    def _begin_turn(self, turn: contextlib.ExitStack, prompt: UserMessageEvent | None, cancel: CancelToken) -> None:
        """Start a turn (an ask(), or any generation of a store-backed session): hold the
        store's turn lock (other processes' turns of this session wait), load what they
        committed, then commit the prompt: an ask cancelled while it waits for its turn
        leaves nothing in the log."""
        turn.enter_context(self._turn(cancel))
        if prompt is not None:
            self._log.commit([prompt])

    def _interrupt_unfinished(self, reason: str, only: set[str] | None = None) -> None:
        """Interrupt the transactions left open (``only`` those of these generation ids),
        but only while no turn of this session runs anywhere: a generation another
        process (or thread) is running holds the turn lock, and its transaction is not
        abandoned."""
        if not [g for g in self._log.ledger.open_generations() if only is None or g in only]:
            return
        try:
            with self._turn(timeout=0):
                _transact.interrupt_open(self._log, reason, only)
        except StoreUnavailableError:
            return  # a turn is running: it finishes or interrupts its own transaction

    @contextlib.contextmanager
    def _turn(self, cancel: CancelToken | None = None, *, timeout: float = _TURN_LOCK_SECONDS) -> Iterator[None]:
        """Hold this session's turn lock for the block (``store.turn_lock``), caught up
        with what other processes committed; this thread's commits carry its lease.
        Re-entrant on the thread that holds it; a no-op without a store."""
        store, sid = self._log.store, self.session_id
        lock = getattr(store, "turn_lock", None)
        if lock is None or sid is None or self._log.turn_held_here:
            yield
            return
        with lock(sid, timeout=timeout, cancel=cancel) as lease, self._log.holding(lease):
            self._log.sync()
            yield

    @overload
    def ask(self, prompt: Prompt, *, output_type: type[T], model: ChatModel | str | None = None,
            cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
            deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[T]: ...
    @overload
    def ask(self, prompt: Prompt, *, model: ChatModel | str | None = None, cancel: CancelToken | None = None,
            transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
            **options: Unpack[GenerationKwargs]) -> GenerateResult[OutputT]: ...
    def ask(self, prompt: Prompt, *, output_type: Any = NOT_GIVEN, model: ChatModel | str | None = None,
            cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
            deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[Any]:
        """Wait for this session's turn, then commit ``prompt`` as a user message and
        :meth:`generate` its answer; returns the result. Concurrent callers each get the
        answer to their own message, in call order (``push_user_message`` followed by
        ``generate`` does not: five of those at once commit five messages, then answer
        them in turns). With a store, processes sharing the session take turns too (the
        store's turn lock); a call cancelled while it waits commits nothing. Takes
        :meth:`generate`'s keyword arguments."""
        return self._generate(model=model, cancel=cancel, transaction=transaction, deps=deps,
                              prompt=_prompt_event(prompt), options=with_output_type(options, output_type))

    @overload
    def ask_stream(self, prompt: Prompt, *, output_type: type[T], max_buffer: int = 1000,
                   cancel: CancelToken | None = None, model: ChatModel | str | None = None,
                   transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
                   **options: Unpack[GenerationKwargs]) -> AgentStream[T]: ...
    @overload
    def ask_stream(self, prompt: Prompt, *, max_buffer: int = 1000, cancel: CancelToken | None = None,
                   model: ChatModel | str | None = None, transaction: GenerationTransaction | None = None,
                   deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> AgentStream[OutputT]: ...
    def ask_stream(self, prompt: Prompt, *, output_type: Any = NOT_GIVEN, max_buffer: int = 1000,
                   cancel: CancelToken | None = None, model: ChatModel | str | None = None,
                   transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
                   **options: Unpack[GenerationKwargs]) -> AgentStream[Any]:
        """:meth:`ask` on a worker thread, as an :class:`AgentStream` of its events (see
        :meth:`stream`): the prompt is committed when its turn comes."""
        return self._stream(max_buffer, cancel, dict(model=model, transaction=transaction, deps=deps,
                                                     prompt=_prompt_event(prompt),
                                                     options=with_output_type(options, output_type)))

    @overload
    async def ask_async(self, prompt: Prompt, *, output_type: type[T], model: ChatModel | str | None = None,
                        cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
                        deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[T]: ...
    @overload
    async def ask_async(self, prompt: Prompt, *, model: ChatModel | str | None = None,
                        cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
                        deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[OutputT]: ...
    async def ask_async(self, prompt: Prompt, *, output_type: Any = NOT_GIVEN, model: ChatModel | str | None = None,
                        cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
                        deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[Any]:
        """``await``-able :meth:`ask` for async code (ASGI views): it runs on a worker
        thread (``anyio.to_thread``), the event loop stays free. Cancelling the awaiting
        task cancels the generation."""
        content = _prompt_event(prompt)  # bad input fails here, not on the worker thread
        given = with_output_type(options, output_type)
        return await run_sync_cancellable(
            lambda token: self._generate(cancel=token, model=model, transaction=transaction, deps=deps,
                                         prompt=content, options=given), cancel
        )

    @overload
    def stream(self, *, output_type: type[T], max_buffer: int = 1000, cancel: CancelToken | None = None,
               model: ChatModel | str | None = None, transaction: GenerationTransaction | None = None,
               deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> AgentStream[T]: ...
    @overload
    def stream(self, *, max_buffer: int = 1000, cancel: CancelToken | None = None,
               model: ChatModel | str | None = None, transaction: GenerationTransaction | None = None,
               deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> AgentStream[OutputT]: ...
    def stream(self, *, output_type: Any = NOT_GIVEN, max_buffer: int = 1000, cancel: CancelToken | None = None,
               model: ChatModel | str | None = None, transaction: GenerationTransaction | None = None,
               deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> AgentStream[Any]:
        """Run :meth:`generate` on a worker thread and return an :class:`AgentStream`
        of its events (iterate it; ``.result`` for the result; closing it early cancels
        the generation). Takes the same keyword arguments as :meth:`generate`."""
        return self._stream(max_buffer, cancel, dict(model=model, transaction=transaction, deps=deps,
                                                     options=with_output_type(options, output_type)))

    def _stream(self, max_buffer: int, cancel: CancelToken | None, generate_kwargs: dict[str, Any]) -> AgentStream[Any]:
        """``_generate(**generate_kwargs)`` on a worker thread, as an AgentStream."""
        self._log.check_usable()

        def run(emit: Emit, token: CancelToken) -> GenerateResult[Any]:
            return self._generate(cancel=token, emit=emit, **generate_kwargs)

        return AgentStream(run, max_buffer=max_buffer, cancel=cancel)

    def compact(
        self,
        *,
        keep_last: int = DEFAULT_KEEP_LAST,
        compactor: Compactor | None = None,
        reason: str = "manual",
        cancel: CancelToken | None = None,
    ) -> CompactionEvent | None:
        """Summarise the events before the last ``keep_last`` conversation events into one
        compaction event; the model then sees the summary followed by the kept events.

        A tool call and its results are never split and an open tool call is never
        covered (the kept tail grows to include them). ``compactor`` defaults to the
        session's ``compactor`` option, else :func:`~agentkit.summarizing_compactor` on
        the session's model. Waits for a running generation like :meth:`generate`.
        Returns the committed event, or None when there was nothing to summarise. With
        ``retention``, the covered events are then archived and pruned."""
        if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
            raise ConfigurationError(f"keep_last must be an int >= 0, got {keep_last!r}")
        if not isinstance(reason, str) or not reason:
            raise ConfigurationError(f"reason must be a non-empty str, got {reason!r}")
        chosen = compactor or self._options.compactor
        if chosen is None:
            if self._model is None:
                raise ConfigurationError("compact() needs a compactor= or a session model to summarise with")
            chosen = ContextShaper(self._loop_options(self._model, self._options)).compactor()
        if self in _GENERATING.get():
            raise SessionError("compact() was called from inside a generation of this same session; it "
                               "would wait for itself forever")
        self._log.check_usable()
        ticket, token = self._gate.enter(cancel)
        try:
            event = compact_log(self._log, keep_last=keep_last, compactor=chosen, reason=reason, cancel=token)
            if self._retention is not None:
                finish_prune(self._log)
            return event
        finally:
            self._gate.leave(ticket)

    def _finish_interrupted_retention(self) -> None:
        """Archive and prune what a crash left covered in the active log. A store that
        cannot do it now does not stop the session from opening (a warning says why)."""
        try:
            finish_prune(self._log)
        except StoreError as exc:
            warnings.warn(
                f"session {self.session_id!r}: could not finish an interrupted retention step "
                f"({exc}); the events stay in the active log and it is tried again after the "
                f"next generation",
                RuntimeWarning,
                stacklevel=4,
            )

    def _retain(self, opts: LoopOptions, token: CancelToken) -> None:
        """Retention after a generation; a failure is a warning and a cancellation stops it
        quietly (the answer is committed either way); it runs again after the next
        generation."""
        if self._retention is None:
            return
        try:
            apply_retention(self._log, self._retention, ContextShaper(opts).compactor(), token)
        except CancelledError:
            return  # the answer is committed; retention runs again after the next generation
        except Exception as exc:  # noqa: BLE001 - reported; the generation itself succeeded
            warnings.warn(
                f"retention of session {self.session_id!r} failed ({type(exc).__name__}: {exc}); "
                f"the active log keeps its events and retention runs again after the next generation",
                RuntimeWarning,
                stacklevel=3,
            )

    def _loop_options(self, model: Any, options: GenerationOptions, *, emit: Emit | None = None,
                      deps: Any = None) -> LoopOptions:
        return LoopOptions.of(options, model=model, tools=self._registry,
                              execution_context=self.execution_context, emit=emit, deps=deps)

    def abort_current_generation(self, reason: str = "aborted by the host") -> bool:
        """Cancel the running generation's model call and foreground tools. Returns True
        when a generation was running. Queued generations still run."""
        return self._gate.abort_current(reason)

    def abort_session(self, reason: str = "session aborted", *, abort_jobs: bool = False) -> None:
        """Cancel the running generation and scheduled ones, and refuse future ones
        (pushes still work). Background jobs keep running unless ``abort_jobs=True``,
        which aborts every running job of the execution context."""
        jobs = self._jobs_capability("abort_session(abort_jobs=True)") if abort_jobs else None
        self._gate.refuse(reason)
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
        jobs: JobControl | None = getattr(self.execution_context, "jobs", None)
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
        result, shared by same-key calls until it starts. See :mod:`agentkit._scheduling`."""
        self._log.check_usable()
        if self._gate.aborted:
            raise SessionClosedError(f"the session was aborted: {self._gate.aborted}")
        return self._scheduler.schedule(key, debounce, **generate_kwargs)

    def cancel_scheduled_generation(self, key: str) -> bool:
        """Cancel the scheduled generation ``key`` (aborting it if it already runs);
        True when there was one."""
        return self._scheduler.cancel(key)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Cancel any running generation, refuse further work, deliver what listeners
        have queued and release worker threads. Idempotent."""
        with self._log.lock:
            if not self._log.closed and self._log.failed is None:
                try:  # one begun or run here can never be finished by anyone now (another
                    # worker's, waiting for its client's decision, is not this object's)
                    self._interrupt_unfinished("the session was closed", self._own_transactions)
                except (SessionError, StoreError):
                    pass  # the session could not commit: reopening interrupts it
            if not self._log.close():
                return
            pool, self._pool = self._pool, None
        self._stop_job_events()  # stop listening; jobs keep running
        self._scheduler.close()
        self._gate.close("session closed")
        self._log.drain_listeners()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Session[DepsT, OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._log.closed else "open"
        return f"<Session {self.session_id or '(memory)'} {state}, {len(self._log)} events>"


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


def _prompt_event(prompt: Prompt) -> UserMessageEvent:
    """The user message ask() commits (checked now, before the caller waits)."""
    return UserMessageEvent(content=normalize_prompt(prompt))


def _type_name(value: object) -> str:
    return type(value).__name__


class _NoModel:
    """Placeholder for a session created without a model (generate() requires one)."""

    def stream(self, request: Any) -> Any:  # pragma: no cover - never called
        raise ConfigurationError("this session has no model")


def _end_generation(
    opts: LoopOptions, emit: Emit | None, result: GenerateResult | None, error: BaseException | None
) -> BaseException | None:
    """Call ``on_generation_end`` hooks once and emit ``generation-end``; returns the
    generation's error (a failing hook's error when it succeeded)."""
    if opts.hooks.on_generation_end:
        try:
            opts.hooks.generation_end(result, error)
        except BaseException as exc:  # noqa: BLE001 - the generation's outcome
            if error is None:
                error, result = exc, None
    if emit is not None:
        try:
            emit(GenerationEndEvent(result=result, error=error))
        except BaseException as exc:  # noqa: BLE001 - a raising callback
            if error is None:
                error = exc
    return error


def _tell_tools(session: Session[Any, Any], tools: Iterable[Tool]) -> None:
    """Give each distinct ``Tool._on_session`` the session (a failure is logged: the tools
    stay usable, only what they would have learned from the session is missing)."""
    seen: set[int] = set()
    for tool in tools:
        hook = tool._on_session
        if hook is None or id(hook) in seen:
            continue
        seen.add(id(hook))
        try:
            hook(session)
        except Exception:  # noqa: BLE001 - reported, not fatal
            logging.getLogger("agentkit").warning("tool %r could not bind to the session", tool.name,
                                                  exc_info=True)
