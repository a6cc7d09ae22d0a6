"""``ToolRegistry`` (tools by unique name) and ``coerce_tool`` (a Tool as it is, a plain
function wrapped with ``@tool``): above both the Tool port and the decorator, so
neither imports the other (private: import these from :mod:`agentkit.tools.base`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import ToolDefinitionError
from ..models.base import ToolSpec
from ._tool import Tool
from .decorator import tool

__all__ = ["ToolRegistry", "coerce_tool"]


class ToolRegistry(Mapping[str, Tool]):
    """Tools by unique name. A duplicate name is a :class:`ToolDefinitionError`."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()
        for t in tools:
            self.add(t)

    def add(self, tool: Any) -> Tool:
        """Register a tool (an agentkit Tool, or a plain function to wrap with ``@tool``)."""
        t = coerce_tool(tool)
        with self._lock:
            if t.name in self._tools:
                raise ToolDefinitionError(
                    f"two tools are named {t.name!r}; tool names must be unique"
                )
            self._tools[t.name] = t
        return t

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def get(self, name: str, default: Any = None) -> Any:  # the loop asks per tool call
        """The tool named ``name``, or ``default``."""
        return self._tools.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tool specs, in registration order."""
        return tuple(t.spec for t in self._tools.values())


def coerce_tool(obj: Any) -> Tool:
    """Return ``obj`` as a Tool: a Tool as it is, a plain function wrapped with ``@tool``.

    Foreign tools (LangChain tools and toolkits) are converted before they get here, by
    ``Session`` and ``run_agent`` (or by :func:`agentkit.adapters.langchain.from_langchain_tool`).
    """
    if isinstance(obj, Tool):
        return obj
    if callable(obj) and hasattr(obj, "__name__"):
        return tool(obj)
    raise ToolDefinitionError(
        f"cannot use {obj!r} as a tool: pass an agentkit Tool, a function decorated "
        f"with @tool, or a LangChain tool or toolkit (Session and run_agent convert those "
        f"with agentkit.adapters.langchain.from_langchain_tool(s))"
    )
