"""The generation gate: one inference at a time per session, in call order (private).

A caller of ``generate()`` takes a ticket and waits until it is first in the FIFO queue;
the holder gets a fresh child of the gate's root :class:`~agentkit.CancelToken`, which
``abort_current`` cancels. A waiter whose own token is cancelled, or that finds the gate
refusing (the session closed, failed or aborted), leaves the queue at once and never
blocks the ones behind it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ..cancel import CancelToken
from ..errors import SessionClosedError

__all__ = ["GenerationGate"]


class GenerationGate:
    """A FIFO gate with a current-generation cancel token (see the module docstring).

    ``check()`` runs under the gate each time a waiter wakes; it raises to make the
    waiter leave (the Session passes its usable-or-raise check).
    """

    def __init__(self, check: Callable[[], None]) -> None:
        self._check = check
        self._cond = threading.Condition(threading.RLock())
        self.queue: deque[object] = deque()
        self._root = CancelToken()
        self._current: CancelToken | None = None
        self.aborted: str | None = None

    def enter(self, cancel: CancelToken | None) -> tuple[object, CancelToken]:
        """Wait in FIFO order for the gate; return the ticket and the new generation's
        token. Pass the ticket to :meth:`leave` when the generation ends."""
        ticket = object()
        with self._cond:
            self.queue.append(ticket)
        forget = cancel._on_cancel(self.wake) if cancel is not None else None
        try:
            with self._cond:
                while True:
                    self._check()
                    if self.aborted:
                        raise SessionClosedError(
                            f"the session was aborted ({self.aborted}); it accepts pushes but "
                            f"no more generations: continue in a new Session"
                        )
                    if cancel is not None:
                        cancel.raise_if_cancelled()
                    if self.queue[0] is ticket:
                        break
                    self._cond.wait()
                # under the gate, so abort() either is seen above or sees this token
                token = self._root.child()
                if cancel is not None:
                    cancel.link(token)
                self._current = token
        except BaseException:
            with self._cond:
                self.queue.remove(ticket)
                self._cond.notify_all()
            raise
        finally:
            if forget is not None:
                forget()
        return ticket, token

    def leave(self, ticket: object) -> None:
        """End the generation that holds the gate; the next waiter goes."""
        with self._cond:
            self._current = None
            self.queue.remove(ticket)  # it is first: this generation held the gate
            self._cond.notify_all()

    def wake(self) -> None:
        """Let every waiter re-check (after close, failure or a cancelled waiter)."""
        with self._cond:
            self._cond.notify_all()

    def abort_current(self, reason: str) -> bool:
        """Cancel the running generation; True when one was running."""
        with self._cond:
            token = self._current
        if token is None:
            return False
        token.cancel(reason)  # outside the gate: cancel callbacks may take it
        return True

    def refuse(self, reason: str) -> None:
        """Refuse every later generation (waiters leave with SessionClosedError)."""
        with self._cond:
            self.aborted = reason
            self._cond.notify_all()

    def close(self, reason: str) -> None:
        """Cancel the running generation and wake waiters so they see the session closed."""
        self._root.cancel(reason)
        self.wake()
