"""Tools: the tool-author helpers beside ``Tool``, ``ToolContext`` and ``@tool`` (imported
from ``agentkit``, with the built-in families ``filesystem_tools``, ``shell_tools``,
``json_tools`` and ``http_tools``), tool search, agentskills.io skills, subagents and
handoffs (:class:`Handoff`, made by ``agentkit.handoff``).
Browser tools live in :mod:`agentkit.browser`, the execution-context port in
:mod:`agentkit.execution`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._handoffs import Handoff
from ._search import SearchableTool, search_tools
from ._skills import MAX_SKILL_FILE_BYTES, SKILL_FILE, Skill, Skills
from .base import FunctionTool, ToolRegistry, to_tool_output
from .json_tools import json_path
from .shell import format_shell_result

if TYPE_CHECKING:
    from ._subagents import SubagentEndEvent, SubagentEvent, SubagentStartEvent, child_session_id

# a subagent runs a Session, whose modules import this package: loaded on first use
_SUBAGENT_NAMES = frozenset({"SubagentEndEvent", "SubagentEvent", "SubagentStartEvent", "child_session_id"})


def __getattr__(name: str) -> object:
    if name in _SUBAGENT_NAMES:
        from . import _subagents

        return getattr(_subagents, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MAX_SKILL_FILE_BYTES",
    "SKILL_FILE",
    "FunctionTool",
    "SearchableTool",
    "Skill",
    "Skills",
    "SubagentEndEvent",
    "SubagentEvent",
    "SubagentStartEvent",
    "ToolRegistry",
    "child_session_id",
    "format_shell_result",
    "json_path",
    "search_tools",
    "to_tool_output",
    "Handoff",
]
