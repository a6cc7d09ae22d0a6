"""Session: a thread-safe, synchronous agent conversation over an append-only event log.

The Session is a facade over its parts: an ``EventLog`` (``_eventlog.py``: durable commits,
projection, listeners), a ``GenerationGate`` (``_gate.py``: one inference at a time, FIFO),
its generations (``_generation.py``), construction and closing (``_lifecycle.py``), and
each command's logic with its concept (``approvals/_decisions``, ``transactions/_session``,
``context/_session``, ``jobs/_bridge``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Generic, overload

from typing_extensions import TypeVar, Unpack

from .._threads import SessionExecutor, run_sync_cancellable
from ..cancel import CancelToken
from ..context import _session as _context
from ..context._compact import iter_history
from ..context._compaction import DEFAULT_KEEP_LAST, Compactor, Retention
from ..context._projection import Projector, RuntimeRenderer
from ..errors import ConfigurationError
from ..events import CompactionEvent, Event, RuntimeEvent, UserMessageEvent
from ..execution.base import JobState
from ..jobs._bridge import jobs_of
from ..messages import Message, Prompt, normalize_prompt
from ..models.base import ChatModel
from ..options import NOT_GIVEN, GenerationKwargs, GenerationOptions, with_output_type
from ..results import GenerateResult
from ..stores.base import EventStore, validate_session_id
from ..streaming._stream import AgentStream
from ..tools.base import ToolRegistry
from ..transactions import _session as _transact
from ..transactions._ledger import GenerationTransaction, UncertainExecution, reserved_problem
from . import _fork, _generation, _lifecycle
from ._eventlog import EventLog
from ._gate import GenerationGate
from ._generation import prompt_event
from ._human import HumanDecisions
from ._redaction import Redactor
from ._runs import SessionRuns
from ._scheduling import GenerationScheduler
from ._subscriptions import Listener, Subscription, Unsubscribe

__all__ = ["Session"]

DepsT = TypeVar("DepsT", default=Any)
"""A session's ``deps_type`` (``Any`` without one)."""
OutputT = TypeVar("OutputT", default=None, covariant=True)
"""A session's ``output_type`` (None without one)."""
T = TypeVar("T")

class Session(HumanDecisions, SessionRuns, Generic[DepsT, OutputT]):
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

    # its parts (built by agentkit.session._lifecycle.setup)
    session_id: str | None
    execution_context: Any
    _log: EventLog  # numbered durable commits, the projection, listeners
    _gate: GenerationGate  # one generation at a time, FIFO
    _scheduler: GenerationScheduler  # keyed, debounced generations
    _stop_job_events: Callable[[], None]  # the job bridge's off switch
    _model: ChatModel | None
    _registry: ToolRegistry
    _options: GenerationOptions  # the defaults of every generation
    _redactor: Redactor | None
    _deps: Any
    _deps_type: Any
    _retention: Retention | None
    _own_transactions: set[str]  # begun or claimed here: close() interrupts these only
    _pool: SessionExecutor | None  # a door to the process's shared tool threads
    _max_workers: int

    def __init__(
        self, model: ChatModel | str | None = None, *, tools: Iterable[Any] = (), session_id: str | None = None,
        events: Iterable[Event] | None = None, store: EventStore | None = None, execution_context: Any = None,
        render_runtime: RuntimeRenderer | None = None, max_tool_workers: int = 8,
        listener_queue_size: int = 10_000, listener_timeout: float = 30.0, retention: Retention | None = None,
        deps: DepsT | None = None, deps_type: type[DepsT] | None = None, output_type: type[OutputT] | None = None,
        max_concurrent_runs: int | None = None, queue_timeout: float | None = None,
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
        type, or none, are a :class:`ConfigurationError` before the generation starts.
        ``max_concurrent_runs`` and ``queue_timeout``: see :class:`~agentkit.session._runs.SessionRuns`."""
        _lifecycle.setup(self, model, tools=tools, session_id=session_id, events=events, store=store,
                         execution_context=execution_context, render_runtime=render_runtime,
                         max_tool_workers=max_tool_workers, listener_queue_size=listener_queue_size,
                         listener_timeout=listener_timeout, retention=retention, deps=deps, deps_type=deps_type,
                         output_type=output_type, max_concurrent_runs=max_concurrent_runs,
                         queue_timeout=queue_timeout, _seed_if_new=False, _options=None, **options)

    @classmethod
    def _create(cls, model: ChatModel | str | None = None, *, seed_if_new: bool = False,
                base_options: GenerationOptions | None = None, **kwargs: Any) -> Session[Any, Any]:
        """A Session made as ``Session(model, **kwargs)`` is, with what only agentkit passes:
        ``seed_if_new`` (``open``) and ``base_options`` (an Agent's options, built and checked)."""
        session: Session[Any, Any] = cls.__new__(cls)
        _lifecycle.setup(session, model, _seed_if_new=seed_if_new, _options=base_options, **kwargs)
        return session

    # -- construction ------------------------------------------------------------------

    @classmethod
    def open(cls, session_id: str, *, store: EventStore, events: Iterable[Event] | None = None,
             **kwargs: Any) -> Session[Any, Any]:
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

    def fork(self, *, at: str, session_id: str | None = None) -> Session[DepsT, OutputT]:
        """A new session whose log is this one's up to and including event ``at``, stored
        in this session's store (an in-memory session gives an in-memory fork), with this
        session's model, tools and options; this session is unchanged. ``session_id``
        names it (a new id when None). Work open at ``at`` is not carried over: an open
        tool call gets an error result saying so (which settles its approval or input
        request and its execution intent), and an unfinished transactional generation is
        interrupted. An unknown event, a used session id or a closed session raise before
        anything is written. See docs/sessions.md ("Fork")."""
        return _fork.fork(self, at, session_id)

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
                f"runtime event {type!r} data must be a dict (a JSON object), not {data.__class__.__name__}"
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
    def generate(self, *, output_type: type[T], model: ChatModel | str | None = None, cancel: CancelToken | None = None,
                 transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
                 **options: Unpack[GenerationKwargs]) -> GenerateResult[T]: ...
    @overload
    def generate(self, *, model: ChatModel | str | None = None, cancel: CancelToken | None = None,
                 transaction: GenerationTransaction | None = None, deps: DepsT | None = None,
                 **options: Unpack[GenerationKwargs]) -> GenerateResult[OutputT]: ...
    def generate(self, *, output_type: Any = NOT_GIVEN, model: ChatModel | str | None = None,
                 cancel: CancelToken | None = None, transaction: GenerationTransaction | None = None,
                 deps: DepsT | None = None, **options: Unpack[GenerationKwargs]) -> GenerateResult[Any]:
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
        return _generation.generate(self, model=model, cancel=cancel, transaction=transaction, deps=deps,
                                    options=with_output_type(options, output_type))

    _generate = _generation.generate  # an Agent's run, with its emit
    _turn = _generation.turn  # hold this session's turn lock for a block

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
        return _transact.states(self._log)

    def uncertain_tool_executions(self) -> list[UncertainExecution]:
        """Tool calls whose execution intent is committed but that have no result and no
        reconciliation: after a crash, the calls that were running, whose effect may or
        may not have happened. Calls this session object is running now are not listed.
        Without a store no intent is written, so this is always empty."""
        return _transact.uncertain(self._log)

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
        _transact.reconcile(self._log, intent_id, resolution, output, error,
                            turn=lambda: self._turn(timeout=0))

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
        return _generation.generate(self, model=model, cancel=cancel, transaction=transaction, deps=deps,
                                    prompt=prompt_event(prompt), options=with_output_type(options, output_type))

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
        return _generation.stream(self, max_buffer, cancel, dict(model=model, transaction=transaction, deps=deps,
                                  prompt=prompt_event(prompt), options=with_output_type(options, output_type)))

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
        given: dict[str, Any] = dict(model=model, transaction=transaction, deps=deps, prompt=prompt_event(prompt),
                                     options=with_output_type(options, output_type))  # bad input fails here
        return await run_sync_cancellable(lambda token: _generation.generate(self, cancel=token, **given), cancel)

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
        return _generation.stream(self, max_buffer, cancel, dict(model=model, transaction=transaction, deps=deps,
                                  options=with_output_type(options, output_type)))

    def compact(self, *, keep_last: int = DEFAULT_KEEP_LAST, compactor: Compactor | None = None,
                reason: str = "manual", cancel: CancelToken | None = None) -> CompactionEvent | None:
        """Summarise the events before the last ``keep_last`` conversation events into one
        compaction event; the model then sees the summary followed by the kept events.

        A tool call and its results are never split and an open tool call is never
        covered (the kept tail grows to include them). ``compactor`` defaults to the
        session's ``compactor`` option, else :func:`~agentkit.summarizing_compactor` on
        the session's model. Waits for a running generation like :meth:`generate`.
        Returns the committed event, or None when there was nothing to summarise. With
        ``retention``, the covered events are then archived and pruned."""
        return _context.compact(self, keep_last=keep_last, compactor=compactor, reason=reason, cancel=cancel)

    def abort_current_generation(self, reason: str = "aborted by the host") -> bool:
        """Cancel the running generation's model call and foreground tools. Returns True
        when a generation was running. Queued generations still run."""
        return self._gate.abort_current(reason)

    def abort_session(self, reason: str = "session aborted", *, abort_jobs: bool = False) -> None:
        """Cancel the running generation and scheduled ones, and refuse future ones
        (pushes still work). Background jobs keep running unless ``abort_jobs=True``,
        which aborts every running job of the execution context."""
        _lifecycle.abort(self, reason, abort_jobs=abort_jobs)

    def abort_job(self, execution_id: str, reason: str = "aborted by the host") -> JobState:
        """Abort one background job of the execution context; returns its final state."""
        return jobs_of(self.execution_context, "abort_job").abort(execution_id, reason)

    def schedule_generate(self, key: str, debounce: float = 0.05, **generate_kwargs: Any) -> Future[GenerateResult]:
        """Run ``generate(**generate_kwargs)`` once ``debounce`` seconds pass without
        another call with the same ``key``; returns a ``concurrent.futures.Future`` of its
        result, shared by same-key calls until it starts. See :mod:`agentkit._scheduling`."""
        return _generation.schedule(self, key, debounce, generate_kwargs)

    def cancel_scheduled_generation(self, key: str) -> bool:
        """Cancel the scheduled generation ``key`` (aborting it if it already runs);
        True when there was one."""
        return self._scheduler.cancel(key)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self, timeout: float = 0.0) -> None:
        """Cancel any running generation, refuse further work, deliver what listeners
        have queued and release worker threads. Idempotent. With ``timeout`` (seconds), drain
        first: refuse new and queued generations, and let the running one end within it."""
        _lifecycle.close(self, timeout)

    def __enter__(self) -> Session[DepsT, OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._log.closed else "open"
        return f"<Session {self.session_id or '(memory)'} {state}, {len(self._log)} events>"
