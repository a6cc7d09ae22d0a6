"""A Session's manual compaction (private): :meth:`Session.compact <agentkit.Session.compact>`
once its arguments are checked.

It waits in the session's generation gate like a generation, summarises the head of the
event log (:func:`~agentkit.context._compact.compact_log`), and with ``retention`` archives
and prunes what the summary covers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import ConfigurationError, SessionError
from ..events import CompactionEvent
from ..session._generation import GENERATING, loop_options
from ._compact import ContextShaper, compact_log, finish_prune
from ._compaction import Compactor

if TYPE_CHECKING:
    from ..session._session import Session

__all__ = ["compact"]


def compact(session: Session[Any, Any], *, keep_last: int, compactor: Compactor | None, reason: str,
            cancel: CancelToken | None) -> CompactionEvent | None:
    """:meth:`Session.compact`: checked, then run in the generation gate."""
    if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
        raise ConfigurationError(f"keep_last must be an int >= 0, got {keep_last!r}")
    if not isinstance(reason, str) or not reason:
        raise ConfigurationError(f"reason must be a non-empty str, got {reason!r}")
    chosen = compactor or session._options.compactor
    if chosen is None:
        if session._model is None:
            raise ConfigurationError("compact() needs a compactor= or a session model to summarise with")
        chosen = ContextShaper(loop_options(session, session._model, session._options)).compactor()
    if session in GENERATING.get():
        raise SessionError("compact() was called from inside a generation of this same session; it "
                           "would wait for itself forever")
    log = session._log
    log.check_usable()
    ticket, token = session._gate.enter(cancel)
    try:
        event = compact_log(log, keep_last=keep_last, compactor=chosen, reason=reason, cancel=token)
        if session._retention is not None:
            finish_prune(log)
        return event
    finally:
        session._gate.leave(ticket)
