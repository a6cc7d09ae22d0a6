"""Agent turns as Celery tasks (private): the turn task, and the calls of the web process
that enqueue, cancel and stream turns (the ``AgentTasks`` methods of :class:`TurnMethods`).

- :meth:`TurnMethods.enqueue_ask` sends the ``agentkit.turn`` task (its task id is the
  turn id) and returns at once. Nothing is written to the session then: a broker that
  does not take the message raises :class:`~agentkit.celery.BrokerUnavailableError` and
  the session is as it was.
- A worker runs the task on a pooled :class:`~agentkit.Session` of its own process
  (``sessions(session_id)`` gives its keyword arguments): it takes the session's turn
  lock, decides to start (``turn-started``, see :mod:`._turnlog`), runs ``ask`` (or
  ``generate``) with the overrides and writes ``turn-finished``, still under the lock. It
  listens to the session meanwhile: a ``turn-cancel-requested`` committed by any process
  cancels the generation's token. A store it cannot reach before the turn started is
  tried again with backoff for ``AgentTasks.store_retry_for`` seconds; then the turn
  fails, and its ``turn-finished`` is written once the store answers.
- :meth:`TurnMethods.turn_events` (and :meth:`TurnMethods.sse_turn`, the same as
  Server-Sent Events) follow the session in the web process (a listener on a pooled
  session: the process's follower hears the workers' commits) from ``turn-started`` to
  ``turn-finished``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import uuid
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .. import CancelToken, Session, SessionPool
from ..errors import (
    BrokerUnavailableError,
    CancelledError,
    ConfigurationError,
    SessionError,
    StoreError,
    StoreUnavailableError,
)
from ..events import ControlEvent, Event
from ..messages import Prompt, content_from_dict, content_to_dict, normalize_prompt
from ..options import GenerationOptions
from ..stores.base import validate_session_id
from ..web import KEEP_ALIVE
from . import _turnlog
from ._record import persist

if TYPE_CHECKING:
    from ._app import AgentTasks

__all__ = ["TURN_TASK", "TurnMethods", "register"]

TURN_TASK = "agentkit.turn"

_NOT_OVERRIDES = ("cancel", "transaction", "deps", "_emit", "_prompt")

log = logging.getLogger("agentkit.celery")

_Following = Generator["Event | None", None, None]


class Turns:
    """The turn task of one :class:`~agentkit.celery.AgentTasks`, and what its methods do."""

    def __init__(self, tasks: AgentTasks) -> None:
        self.tasks = tasks

        def run_turn(task: Any, session_id: str, turn_id: str, kind: str, content: list[Any] | None,
                     overrides: dict[str, Any]) -> str:
            return self._run_task(session_id, turn_id, kind, content, overrides)

        # acks_late with reject_on_worker_lost: a turn whose worker died comes back (and is settled as lost)
        self.task: Any = tasks.app.task(name=TURN_TASK, bind=True, ignore_result=True, acks_late=True,
                                        reject_on_worker_lost=True)(run_turn)

    @property
    def pool(self) -> SessionPool:
        return self.tasks._sessions()

    # -- enqueueing (any process) --------------------------------------------------------

    def enqueue(self, session_id: str, kind: str, prompt: Prompt | None, overrides: Mapping[str, Any]) -> str:
        validate_session_id(session_id)
        content = None if prompt is None else content_to_dict(normalize_prompt(prompt))
        options = _checked_overrides(dict(overrides))
        turn_id = uuid.uuid4().hex
        try:
            self.task.apply_async((session_id, turn_id, kind, content, options), task_id=turn_id, retry=True,
                                  retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                                                "interval_max": 0.2})
        except Exception as exc:  # noqa: BLE001 - any publish failure: nothing was sent, say which broker
            broker = self.tasks.broker
            raise BrokerUnavailableError(
                f"could not enqueue the turn of session {session_id!r}: the Celery broker {broker} did not take "
                f"its task ({type(exc).__name__}: {exc}). Nothing was recorded in the session; start the broker "
                f"(or fix broker_url) and enqueue again", broker=broker) from exc
        return turn_id

    def cancel(self, session_id: str, turn_id: str, reason: str) -> bool:
        validate_session_id(session_id)
        _check_turn_id(turn_id)
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigurationError("cancel_turn() needs a non-empty reason")
        with self.pool.session(session_id) as session:
            log_ = session._log
            if log_.decide(lambda: _turnlog.cancel(log_.events, turn_id, reason)):
                return True
            return _turnlog.state_of(log_.events, turn_id).finished is None  # (asked to stop already)

    # -- following a turn (the web process) -------------------------------------------------

    def follow(self, session_id: str, turn_id: str, *, after: int, wait: float | None) -> _Following:
        """The events of turn ``turn_id`` (from its ``turn-started``, or a ``turn-finished``
        that came first, after seq ``after``) as they are committed, ending with its
        ``turn-finished``; None after each ``wait`` quiet seconds."""
        validate_session_id(session_id)  # now, not at the first next()
        _check_turn_id(turn_id)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ConfigurationError(f"after must be an event seq (an int >= 0, e.g. a Last-Event-ID), got {after!r}")
        return self._follow(session_id, turn_id, after, wait)

    def _follow(self, session_id: str, turn_id: str, after: int, wait: float | None) -> _Following:
        with self.pool.session(session_id) as session:
            arrived: queue.SimpleQueue[Event] = queue.SimpleQueue()
            unsubscribe = session.subscribe(arrived.put)
            try:
                inside, last = False, after
                for event in session.events:  # what came before this listener (it may hear some again)
                    inside, done = _take(event, turn_id, inside)
                    if event.seq > last and inside:
                        last = event.seq
                        yield event
                    if done:
                        return
                while True:
                    try:
                        event = arrived.get(timeout=wait)
                    except queue.Empty:
                        yield None
                        continue
                    if event.seq <= last:
                        continue
                    inside, done = _take(event, turn_id, inside)
                    if inside:
                        last = event.seq
                        yield event
                    if done:
                        return
            finally:
                unsubscribe()

    # -- the tasks (workers) ----------------------------------------------------------------

    def _run_task(self, session_id: str, turn_id: str, kind: str, content: list[Any] | None,
                  overrides: dict[str, Any]) -> str:
        token = CancelToken()
        try:
            stack, session, decided = persist(
                f"start turn {turn_id} of session {session_id!r}",
                lambda: self._enter(session_id, turn_id, kind, token), give_up=self.tasks.store_retry_for)
        except StoreUnavailableError as exc:  # before the turn started: nothing of it is in the log
            error = (f"the worker could not reach the session's store for {self.tasks.store_retry_for:g} s "
                     f"({exc}); the turn was not run")
            log.error("turn %s of session %r failed: %s; recording it once the store answers", turn_id,
                      session_id, error)
            return self._record_end(session_id, turn_id, "failed", {"error": error})
        except CancelledError:  # a cancel (or its finish) came while it waited for the turn lock
            return self._record_end(session_id, turn_id, "cancelled", {"reason": token.reason or "cancelled",
                                                                       "started": False})
        with stack:  # the session's lease, the cancel listener and the turn lock
            if decided is None:
                return "skipped"  # finished already: cancelled while queued, or delivered again
            if decided.action != _turnlog.STARTED:
                return str(decided.data.get("status"))  # settled instead of run: cancelled, or lost
            status, data = self._ask(session, turn_id, content, overrides, token)
            log_ = session._log
            try:
                log_.decide(lambda: _turnlog.finish(log_.events, turn_id, status, data))
                return status
            except (StoreError, SessionError) as exc:
                log.warning("turn %s of session %r: could not record its end (%s); trying again",
                            turn_id, session_id, exc)
                if log_.failed is not None:
                    session.close()  # the pool opens it afresh from what is durable
        return self._record_end(session_id, turn_id, status, data)  # (without the turn lock: it may be lost)

    def _enter(self, session_id: str, turn_id: str, kind: str,
               token: CancelToken) -> tuple[contextlib.ExitStack, Session, ControlEvent | None]:
        """Open the session, hear cancels, take its turn lock and decide to start; an
        attempt that fails leaves nothing held."""
        stack = contextlib.ExitStack()
        try:
            session = stack.enter_context(self.pool.session(session_id))

            def hear(event: Event) -> None:  # a cancel from any process, or its finish while queued
                if _turnlog.turn_of(event) == turn_id and isinstance(event, ControlEvent) \
                        and event.action != _turnlog.STARTED:
                    token.cancel(str(event.data.get("reason") or "cancelled"))

            stack.callback(session.subscribe(hear))
            stack.enter_context(session._turn(token))
            log_ = session._log
            decided = log_.decide(lambda: _turnlog.start(log_.events, turn_id, kind))
        except BaseException:
            stack.close()
            raise
        first = decided[0] if decided else None
        assert first is None or isinstance(first, ControlEvent)
        return stack, session, first

    def _ask(self, session: Session, turn_id: str, content: list[Any] | None, overrides: dict[str, Any],
             token: CancelToken) -> tuple[str, dict[str, Any]]:
        """Run the started turn: (its status, the data of its turn-finished)."""
        try:
            if content is not None:
                result = session.ask(content_from_dict(content), cancel=token, **overrides)
            else:
                result = session.generate(cancel=token, **overrides)
        except CancelledError as exc:
            return "cancelled", {"reason": token.reason or str(exc), "started": True}
        except Exception as exc:  # noqa: BLE001 - the turn failed: recorded (never run again: it started)
            log.exception("turn %s of session %r failed", turn_id, session.session_id)
            return "failed", {"error": f"{type(exc).__name__}: {exc}"}
        return "completed", {"finish_reason": result.finish_reason}

    def _record_end(self, session_id: str, turn_id: str, status: str, data: dict[str, Any]) -> str:
        """Write the turn's ``turn-finished`` (unless it has one), waiting for the store
        as long as it takes: a stream waiting for the turn then ends."""

        def write() -> None:
            with self.pool.session(session_id) as session:
                log_ = session._log
                log_.decide(lambda: _turnlog.finish(log_.events, turn_id, status, data))

        persist(f"record the end of turn {turn_id} of session {session_id!r}", write)
        return status


class TurnMethods:
    """The agent-turn methods of :class:`~agentkit.celery.AgentTasks` (its base class)."""

    _turns: Turns

    @property
    def pool(self) -> SessionPool:
        """This process's :class:`~agentkit.SessionPool` over ``store`` with ``sessions``
        as its factory: the sessions the turn tasks run on (on a worker) and follow (in
        the web process). Use it for the web process's own reads and decisions:
        ``with tasks.pool.session(sid) as s: s.approve(request_id)``."""
        return self._turns.pool

    def enqueue_ask(self, session_id: str, prompt: Prompt, **overrides: Any) -> str:
        """Send ``session.ask(prompt, **overrides)`` of session ``session_id`` to a worker
        and return the turn id at once. ``overrides`` are :meth:`Session.generate
        <agentkit.Session.generate>` options (and ``model=``, a spec string) as JSON
        values; a bad one is a :class:`~agentkit.errors.ConfigurationError` before
        anything is sent. A broker that does not take the task raises
        :class:`~agentkit.celery.BrokerUnavailableError`, naming it; nothing is recorded in the session.
        Follow the turn with :meth:`turn_events` or :meth:`sse_turn`."""
        return self._turns.enqueue(session_id, "ask", prompt, overrides)

    def enqueue_generate(self, session_id: str, **overrides: Any) -> str:
        """The resume call: send ``session.generate(**overrides)`` (no new message) to a
        worker and return its turn id at once, as :meth:`enqueue_ask` does. After
        ``approve``/``deny`` (or ``answer_input``) in the web process, it finishes the
        paused turn's work on a worker."""
        return self._turns.enqueue(session_id, "generate", None, overrides)

    def cancel_turn(self, session_id: str, turn_id: str, *, reason: str = "cancelled by the host") -> bool:
        """Stop turn ``turn_id`` of session ``session_id``: a turn still queued is
        recorded as cancelled and never runs; a running one is asked to stop and its
        worker cancels the generation (the model call and the tools see their cancel
        token; a ``generation-aborted`` control event follows). Its ``turn-finished``
        says ``status: cancelled``. Returns False when the turn had already finished.
        (The session's log cannot tell a queued turn from an id it never saw: such an id
        is recorded as cancelled too, and no turn ever runs with it.)"""
        return self._turns.cancel(session_id, turn_id, reason)

    def turn_events(self, session_id: str, turn_id: str, *, after: int = 0,
                    timeout: float | None = None) -> Iterator[Event]:
        """The events of turn ``turn_id`` as the store receives them, whoever commits
        them (the worker running it, this process), in store order: from its
        ``turn-started`` control event to its ``turn-finished`` (the last one: ``data``
        has ``status`` and, for a completed turn, ``finish_reason``). ``after`` skips
        events up to that seq (a reconnecting client's last one). ``timeout`` (seconds
        between two events, None: no bound) ends a silent wait with ``TimeoutError``."""
        return _until_quiet(self._turns.follow(session_id, turn_id, after=after, wait=timeout),
                            f"turn {turn_id} of session {session_id!r} committed nothing for {timeout}s")

    def sse_turn(self, session_id: str, turn_id: str, *, after: int = 0,
                 heartbeat: float | None = 15.0) -> Iterator[str]:
        """:meth:`turn_events` as Server-Sent Events text: per event ``id: <seq>`` and
        ``data: <event.to_dict() as JSON>``, the last one the ``turn-finished`` record;
        a :data:`~agentkit.web.KEEP_ALIVE` comment after every ``heartbeat / 2`` quiet
        seconds. Closing it (the client went away) stops following; the turn goes on
        on its worker, and a client that comes back streams it again (``after``: the
        ``Last-Event-ID`` it sends)::

            return flask.Response(tasks.sse_turn(sid, turn_id), mimetype="text/event-stream")
        """
        if heartbeat is not None and (isinstance(heartbeat, bool) or not isinstance(heartbeat, (int, float))
                                      or not heartbeat > 0):
            raise ConfigurationError(f"heartbeat must be a number of seconds > 0 (or None), got {heartbeat!r}")
        wait = None if heartbeat is None else heartbeat / 2
        return _sse_text(self._turns.follow(session_id, turn_id, after=after, wait=wait))


def register(tasks: AgentTasks) -> Any:
    """Register the turn task on ``tasks.app`` (its ``_turns``); returns it."""
    tasks._turns = Turns(tasks)
    return tasks._turns.task


def _until_quiet(events: _Following, quiet: str) -> Iterator[Event]:
    with contextlib.closing(events):
        for event in events:
            if event is None:
                raise TimeoutError(quiet)
            yield event


def _sse_text(events: _Following) -> Iterator[str]:
    with contextlib.closing(events):  # closing this (the client left) ends the following at once
        for event in events:
            if event is None:
                yield KEEP_ALIVE
            else:
                yield f"id: {event.seq}\ndata: {json.dumps(event.to_dict(), separators=(',', ':'))}\n\n"


def _take(event: Event, turn_id: str, inside: bool) -> tuple[bool, bool]:
    """(inside the turn now, the turn ended with this event)."""
    if _turnlog.turn_of(event) == turn_id:
        return True, _turnlog.is_finish(event, turn_id)
    return inside, False


def _checked_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` if a worker can take them: option names ``generate`` knows, with
    values JSON carries (they travel in the task's message)."""
    for name in _NOT_OVERRIDES:
        if name in overrides:
            raise ConfigurationError(
                f"{name}= cannot travel to a worker: enqueue_ask/enqueue_generate take generation options as "
                f"JSON values (cancel with cancel_turn(); deps and callables belong in sessions(session_id))")
    model = overrides.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigurationError(f"model= of an enqueued turn must be a spec string (e.g. 'openai:gpt-4.1-mini'), "
                                 f"not {type(model).__name__}")
    GenerationOptions.build({k: v for k, v in overrides.items() if k != "model"})  # names and values
    try:
        json.dumps(overrides, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"the overrides of an enqueued turn travel to a worker as JSON: {exc}. Pass JSON values, and put "
            f"objects (hooks, policies, callables) in the session settings sessions(session_id) returns") from None
    return overrides


def _check_turn_id(turn_id: str) -> None:
    if not isinstance(turn_id, str) or len(turn_id) != 32 or any(c not in "0123456789abcdef" for c in turn_id):
        raise ConfigurationError(f"invalid turn id {turn_id!r}: use the id enqueue_ask or enqueue_generate returned")
