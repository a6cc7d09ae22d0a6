"""A Session's generations (private): one turn each, run by the step loop.

What :meth:`Session.generate <agentkit.Session.generate>`, ``ask``, ``stream`` and their
variants do once their arguments are checked: resolve the options, wait in the generation
gate, hold the turn (the store's turn lock), claim a transaction, run
:func:`~agentkit.loop._loop.run_loop`, apply retention, and call the end hooks once.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any

from .._threads import SessionExecutor
from ..cancel import CancelToken
from ..context._compact import retain
from ..errors import ConfigurationError, SessionClosedError, SessionError, StoreUnavailableError
from ..events import ControlEvent, UserMessageEvent
from ..loop._loop import run_loop
from ..messages import Prompt, normalize_prompt
from ..models.base import ChatModel
from ..options import GenerationOptions, LoopOptions, check_deps
from ..results import GenerateResult
from ..streaming._control import AnnouncingHost
from ..streaming._events import Emit, GenerationEndEvent, GenerationStartEvent
from ..streaming._stream import AgentStream
from ..transactions import _session as _transact
from ..transactions._ledger import GenerationTransaction
from ._config import apply_recorded
from ._foreign import model_from

if TYPE_CHECKING:
    from ._session import Session

__all__ = [
    "GENERATING",
    "generate",
    "interrupt_unfinished",
    "loop_options",
    "prompt_event",
    "schedule",
    "stream",
    "turn",
]

_TURN_LOCK_SECONDS = 600.0
"""How long ask() waits for another process's turn of the same session."""

# The sessions whose generation the current thread (or a tool thread started by it) is
# serving: generate() on one of them from there would wait for itself forever.
GENERATING: contextvars.ContextVar[tuple[Session[Any, Any], ...]] = contextvars.ContextVar(
    "agentkit_generating", default=()
)


def loop_options(session: Session[Any, Any], model: Any, options: GenerationOptions, *,
                 emit: Emit | None = None, deps: Any = None) -> LoopOptions:
    """The loop's options for one generation of ``session``."""
    return LoopOptions.of(options, model=model, tools=session._registry,
                          execution_context=session.execution_context, emit=emit, deps=deps)


def _options_for(session: Session[Any, Any], model: ChatModel | str | None, deps: Any, emit: Emit | None,
                 options: Mapping[str, Any] | None) -> LoopOptions:
    """The checked loop options of one generation: its model, deps and options over the session's."""
    resolved = model_from(model) if model is not None else session._model
    if resolved is None:
        raise ConfigurationError("this session has no model: pass model= to Session or generate()")
    if deps is None:
        deps = session._deps
    if session._deps_type is not None:
        check_deps(deps, session._deps_type)
    opts = loop_options(session, resolved, session._options.merged(options or {}), emit=emit, deps=deps)
    opts.check()
    return opts


def generate(
    session: Session[Any, Any],
    *,
    model: ChatModel | str | None = None,
    cancel: CancelToken | None = None,
    transaction: GenerationTransaction | None = None,
    deps: Any = None,
    emit: Emit | None = None,
    prompt: UserMessageEvent | None = None,
    options: Mapping[str, Any] | None = None,
) -> GenerateResult[Any]:
    """:meth:`Session.generate` (``options``: its generation options), with where its agent
    events go (a stream's ``emit``) and the user message it commits once it holds the
    turn (``ask``'s ``prompt``)."""
    configured = session._config.version
    opts = _options_for(session, model, deps, emit, options)
    if session in GENERATING.get():
        raise SessionError(
            "generate() was called from inside a generation of this same session (from "
            "a tool, a callback or validate_completion); it would wait for itself "
            "forever. Push an event instead; call generate() after this one returns, or "
            "use schedule_generate()."
        )
    log = session._log
    log.check_usable()
    if transaction is not None:
        _transact.check_claim(log, transaction)  # before waiting in the queue
    slot = contextlib.ExitStack()  # a slot of the session's max_concurrent_runs, then the gate
    try:
        ticket, token = session._gate.enter(slot.enter_context(session._runs.slot(cancel)))
    except BaseException as exc:
        slot.close()
        if transaction is not None:  # cancelled or refused before it could run
            _transact.interrupt(log, transaction.generation_id, _transact.closed_reason(exc))
        raise
    generating = GENERATING.set((*GENERATING.get(), session))
    sink = opts.event_sink()
    held = contextlib.ExitStack()
    try:
        if prompt is not None or log.durable:  # ask(), or a store-backed session
            try:
                _begin_turn(session, held, prompt, token)
            except BaseException as exc:
                if transaction is not None:
                    _transact.interrupt(log, transaction.generation_id, _transact.closed_reason(exc))
                raise
        if session._config.version != configured:  # configure() since: this turn is the next one
            opts = _options_for(session, model, deps, emit, options)
        result: GenerateResult | None = None
        error: BaseException | None = None
        try:
            if sink is not None:
                sink(GenerationStartEvent(session_id=session.session_id))
            run = _run(session, opts, token, transaction)
            fields = {f: getattr(run, f) for f in run.__dataclass_fields__}
            result = GenerateResult(**fields, events=session.events)
            if session._retention is not None:  # its compaction announced to a stream
                retain(log if sink is None else AnnouncingHost(log, sink), session._retention, opts, token)
        except BaseException as exc:  # noqa: BLE001 - re-raised after the end hooks
            error = exc
            if token.cancelled and not log.closed and log.failed is None:
                reason = token.reason or str(exc)
                try:
                    log.commit([ControlEvent(action="generation-aborted", data={"reason": reason})])
                except SessionError:
                    pass  # closed or failed meanwhile: the original error says more
        error = _end_generation(opts, sink, result, error)
        if error is not None:
            raise error
        assert result is not None
        return result
    finally:
        held.close()
        GENERATING.reset(generating)
        session._gate.leave(ticket)
        slot.close()


def _run(session: Session[Any, Any], opts: LoopOptions, token: CancelToken,
         transaction: GenerationTransaction | None) -> Any:
    log = session._log
    if transaction is None:
        return run_loop(log, opts, token, lambda: _executor(session))
    host = _transact.claim(log, transaction)
    session._own_transactions.add(transaction.generation_id)
    try:
        run = run_loop(host, opts, token, lambda: _executor(session))
        token.raise_if_cancelled()  # a cancelled generation never completes its candidate
        _transact.complete(log, transaction.generation_id)
        return run
    except BaseException as exc:
        _transact.interrupt(log, transaction.generation_id, _transact.closed_reason(exc))
        raise


def _executor(session: Session[Any, Any]) -> Executor:
    with session._log.lock:
        session._log.check_usable()  # a pool made after close() would never be shut down
        if session._pool is None:
            # a door to the process's shared tool threads (agentkit._threads)
            session._pool = SessionExecutor(session._max_workers)
        return session._pool


def prompt_event(prompt: Prompt) -> UserMessageEvent:
    """The user message ask() commits (checked now, before the caller waits)."""
    return UserMessageEvent(content=normalize_prompt(prompt))


def schedule(session: Session[Any, Any], key: str, debounce: float,
             generate_kwargs: dict[str, Any]) -> Future[GenerateResult]:
    """:meth:`Session.schedule_generate`, refused on a closed or aborted session."""
    session._log.check_usable()
    if session._gate.aborted:
        raise SessionClosedError(f"the session was aborted: {session._gate.aborted}")
    return session._scheduler.schedule(key, debounce, **generate_kwargs)


def stream(session: Session[Any, Any], max_buffer: int, cancel: CancelToken | None,
           generate_kwargs: dict[str, Any]) -> AgentStream[Any]:
    """``generate(session, **generate_kwargs)`` on a worker thread, as an AgentStream."""
    session._log.check_usable()

    def run(emit: Emit, token: CancelToken) -> GenerateResult[Any]:
        return generate(session, cancel=token, emit=emit, **generate_kwargs)

    return AgentStream(run, max_buffer=max_buffer, cancel=cancel)


def _begin_turn(session: Session[Any, Any], held: contextlib.ExitStack, prompt: UserMessageEvent | None,
                cancel: CancelToken) -> None:
    """Start a turn (an ask(), or any generation of a store-backed session): hold the
    store's turn lock (other processes' turns of this session wait), load what they
    committed, then commit the prompt: an ask cancelled while it waits for its turn
    leaves nothing in the log."""
    held.enter_context(turn(session, cancel))
    apply_recorded(session)  # what other processes configured, before the prompt is committed
    if prompt is not None:
        session._log.commit([prompt])


def interrupt_unfinished(session: Session[Any, Any], reason: str, only: set[str] | None = None) -> None:
    """Interrupt the transactions left open (``only`` those of these generation ids),
    but only while no turn of this session runs anywhere: a generation another
    process (or thread) is running holds the turn lock, and its transaction is not
    abandoned."""
    log = session._log
    if not [g for g in log.ledger.open_generations() if only is None or g in only]:
        return
    try:
        with turn(session, timeout=0):
            _transact.interrupt_open(log, reason, only)
    except StoreUnavailableError:
        return  # a turn is running: it finishes or interrupts its own transaction


@contextlib.contextmanager
def turn(session: Session[Any, Any], cancel: CancelToken | None = None, *,
         timeout: float = _TURN_LOCK_SECONDS) -> Iterator[None]:
    """Hold ``session``'s turn lock for the block (``store.turn_lock``), caught up
    with what other processes committed; this thread's commits carry its lease.
    Re-entrant on the thread that holds it; a no-op without a store."""
    log, sid = session._log, session.session_id
    lock = getattr(log.store, "turn_lock", None)
    if lock is None or sid is None or log.turn_held_here:
        yield
        return
    with lock(sid, timeout=timeout, cancel=cancel) as lease, log.holding(lease):
        log.sync()
        yield


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
