"""Small tools the tests share: the ``add`` tool a scripted model calls, and the like."""

from __future__ import annotations

from agentkit import tool
from agentkit.models import ToolSpec


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD_SPEC = ToolSpec(
    name="add",
    description="Add two integers.",
    input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
"""A model adapter's view of an ``add`` tool, written out as the wire tests expect it."""
