"""The Session's answers from people (private): approval decisions on tool calls and
answers to the questions tools ask (``ctx.ask_human``). A mixin of
:class:`~agentkit.Session`, over its event log; the logic of each command is with its
concept (``approvals/_decisions``, ``transactions/_inputs``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..approvals import _decisions as _approvals
from ..approvals._policy import ApprovalDecision, ApprovalRequest
from ..errors import ConfigurationError
from ..events import Event
from ..transactions import _inputs
from ..transactions._journal import InputRequest

if TYPE_CHECKING:
    from ._eventlog import EventLog

__all__ = ["HumanDecisions", "warn_waiting"]


class HumanDecisions:
    """Approvals and human input: what a host answers for a session, from any process."""

    _log: EventLog

    def pending_approvals(self) -> list[ApprovalRequest]:
        """The tool calls waiting for a person's answer, in the order they were asked
        (rebuilt from the log: a session opened in another process sees the same list)."""
        return _approvals.pending(self._log)

    def approve(self, request_id: str, *, remember: bool = False, note: str | None = None) -> Event:
        """Approve a pending request: the next :meth:`generate` runs the call once.
        ``remember=True`` also allows later calls of the same tool in this session
        without asking; ``note`` is a free-form audit note (who approved). Raises
        :class:`~agentkit.errors.ApprovalError` for an unknown id or a request already
        decided. Returns the committed decision event."""
        return _approvals.decide(self._log, request_id, ApprovalDecision.approve(remember=remember, note=note))

    def deny(self, request_id: str, *, reason: str = "denied by the reviewer", remember: bool = False,
             note: str | None = None) -> Event:
        """Deny a pending request: the next :meth:`generate` gives the call the error
        result ``denied: <reason>`` (it never runs) and continues. ``remember=True``
        also denies later calls of the tool in this session without asking."""
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigurationError("deny() needs a non-empty reason: the model reads it")
        return _approvals.decide(self._log, request_id, ApprovalDecision.deny(reason, remember=remember, note=note))

    # -- listeners ---------------------------------------------------------------------

    # -- human input -------------------------------------------------------------------

    def pending_inputs(self) -> list[InputRequest]:
        """The questions tools asked with ``ctx.ask_human`` that wait for an answer, in
        the order asked (rebuilt from the log: a session opened in another process, a web
        request or the CLI sees the same list). Expired requests are not listed."""
        return _inputs.pending(self._log)

    def answer_input(self, request_id: str, value: Any) -> Event:
        """Answer a pending question: the next :meth:`generate` runs its tool call again
        from its start, and ``ctx.ask_human`` returns ``value`` as given. ``value`` must be
        plain JSON matching the request's schema. Raises
        :class:`~agentkit.errors.InputError` for an unknown, answered, cancelled or
        expired request, or an answer that breaks the schema (the request then stays
        pending). Two processes answering at once: one wins, the other gets InputError.
        Returns the committed answer event."""
        return _inputs.answer(self._log, request_id, value)

    def cancel_input(self, request_id: str, *, reason: str = "cancelled by the host") -> None:
        """Close a pending question unanswered: its tool call gets an error result the
        model reads (``reason`` is part of it) and the next :meth:`generate` goes on
        without it. Raises :class:`~agentkit.errors.InputError` as :meth:`answer_input`."""
        _inputs.cancel(self._log, request_id, reason)


def warn_waiting(caller: str, session: HumanDecisions, reason: str) -> None:
    """Say why a one-shot run ended with no answer: its tool calls wait for approval, or
    for a person's answer to a tool's question."""
    if reason == "input-required":
        asked = ", ".join(f"{r.tool_name!r} ({r.question!r})" for r in session.pending_inputs())
        logging.getLogger("agentkit.session").warning(
            "%s() stopped with finish_reason 'input-required': tool call(s) %s asked a person "
            "(ctx.ask_human) and a one-shot run cannot be resumed, so there is no answer. Run the "
            "conversation in a Session (with a store to resume in another process), answer "
            "session.pending_inputs() with answer_input(), then generate() again.", caller, asked or "(none)",
        )
        return
    calls = ", ".join(repr(r.tool_name) for r in session.pending_approvals())
    logging.getLogger("agentkit.session").warning(
        "%s() stopped with finish_reason 'approval-required': tool call(s) %s wait for a "
        "person's decision and no approver= answered them, so there is no answer. Pass "
        "approver= to decide in-process, or run the conversation in a Session and answer "
        "session.pending_approvals() with approve()/deny(), then generate() again.",
        caller, calls or "(none)",
    )
