"""What a model sees: events -> model messages (projection), the providers' structural
rules, compaction and retention, view-only shaping, output truncation, budgets and the
summarizer.

:class:`~agentkit.Limits`, :class:`~agentkit.Retention`, :class:`~agentkit.Threshold`,
:class:`~agentkit.ToolResultClearing` and :func:`~agentkit.summarizing_compactor` are
imported from ``agentkit``; this package lists the rest.
"""

from __future__ import annotations

from ._budget import Budget, BudgetBreach
from ._compaction import (
    CONVERSATION_EVENTS,
    DEFAULT_KEEP_LAST,
    Compactor,
    compaction_boundary,
    conversation_events_since_reset,
    estimate_tokens,
    summary_messages,
)
from ._invariants import check_events, check_messages
from ._projection import (
    INTERRUPTED_RESULT,
    Projector,
    RuntimeRenderer,
    build_model_messages,
    events_from_messages,
    render_runtime_event,
)
from ._summarize import DEFAULT_INSTRUCTIONS
from ._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncatedOutput, truncate_output
from ._view import cap_output, cap_tool_outputs, clear_tool_results

__all__ = [
    "CONVERSATION_EVENTS",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_KEEP_LAST",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "INTERRUPTED_RESULT",
    "Budget",
    "BudgetBreach",
    "Compactor",
    "Projector",
    "RuntimeRenderer",
    "TruncatedOutput",
    "build_model_messages",
    "cap_output",
    "cap_tool_outputs",
    "check_events",
    "check_messages",
    "clear_tool_results",
    "compaction_boundary",
    "conversation_events_since_reset",
    "estimate_tokens",
    "events_from_messages",
    "render_runtime_event",
    "summary_messages",
    "truncate_output",
]
