"""Approvals: which tool calls wait for a human, and the approval state folded from a
session's log.

:class:`~agentkit.ApprovalPolicy`, :class:`~agentkit.ApprovalRequest` and
:class:`~agentkit.ApprovalDecision` are imported from ``agentkit``; this package lists the
rest of the policy's vocabulary. The gate one generation asks through is private.
"""

from __future__ import annotations

from ._policy import APPROVAL_DECIDED, APPROVAL_REMEMBERED, APPROVAL_REQUESTED, ApprovalMode, ApprovalState, Verdict

__all__ = ["APPROVAL_DECIDED", "APPROVAL_REMEMBERED", "APPROVAL_REQUESTED", "ApprovalMode", "ApprovalState", "Verdict"]
