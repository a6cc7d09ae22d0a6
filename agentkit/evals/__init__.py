"""Replays and evaluations from stored sessions.

:func:`agentkit.replay` (also importable from here) runs a stored conversation's user
turns again against a model, with tool results served from the record, and returns a
:class:`ReplayResult`: one :class:`ReplayTurn` per user message, each with the
:class:`ReplaySide` of the original and of the replay. See docs/sessions.md, "Replay".
"""

from __future__ import annotations

from ._replay import ReplayResult, ReplaySide, ReplayTurn, ToolMode
from ._replay import replay as replay  # listed in agentkit's __all__ (a name has one public home)

__all__ = ["ReplayResult", "ReplaySide", "ReplayTurn", "ToolMode"]
