"""Per-generation budgets, pure logic: :class:`Limits` and the running tally.

The loop asks :meth:`Budget.before_model_call` before every model call and
:meth:`Budget.take_tool_call` before every tool call it would run; a
:class:`BudgetBreach` names the limit that stopped it and the figures.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigurationError
from ..usage import Usage

__all__ = ["Budget", "BudgetBreach", "Limits"]

_TOKEN_LIMITS = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """``limits=Limits(...)``: what one generation (or one ``run_agent``) may spend.
    ``None`` means no limit.

    Token limits are checked before each model call against the usage the model
    reported so far: once one is reached, no further model call is made. ``model_calls``
    caps model calls. ``tool_calls`` caps tool calls run: a call past it is not run and
    gets an error result saying the budget is spent, and the generation then ends. Either
    way the generation ends with ``finish_reason == "budget-exceeded"`` and a
    ``budget-exceeded`` control event naming the limit and the figures.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    tool_calls: int | None = None
    model_calls: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ConfigurationError(f"Limits {f.name} must be an int >= 0 or None, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class BudgetBreach:
    """Which limit was reached, its value and what was used."""

    limit: str
    maximum: int
    used: int

    def data(self) -> dict[str, Any]:
        """The ``budget-exceeded`` control event's data."""
        return {"limit": self.limit, "maximum": self.maximum, "used": self.used}


class Budget:
    """The tally of one generation against its :class:`Limits`."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.usage = Usage()
        self.model_calls = 0
        self.tool_calls = 0
        self.refused: BudgetBreach | None = None
        """Set when a tool call was refused."""

    def add_model_call(self, usage: Usage) -> None:
        """Count one model call and the usage it reported."""
        self.model_calls += 1
        self.usage = self.usage + usage

    def add_usage(self, usage: Usage) -> None:
        """Add tokens spent outside the generation's own model calls (a tool's child
        agent, ``ToolContext.report_usage``): they count against the token limits."""
        self.usage = self.usage + usage

    def tokens_exceeded(self) -> BudgetBreach | None:
        """The token limit the usage so far has reached, or None."""
        for name in _TOKEN_LIMITS:
            maximum = getattr(self.limits, name)
            used = getattr(self.usage, name)
            if maximum is not None and used >= maximum:
                return BudgetBreach(limit=name, maximum=maximum, used=used)
        return None

    def before_model_call(self) -> BudgetBreach | None:
        """The limit that forbids another model call, or None."""
        if self.refused is not None:
            return self.refused
        breach = self.tokens_exceeded()
        if breach is not None:
            return breach
        maximum = self.limits.model_calls
        if maximum is not None and self.model_calls >= maximum:
            return BudgetBreach(limit="model_calls", maximum=maximum, used=self.model_calls)
        return None

    def take_tool_call(self) -> bool:
        """Count a tool call about to run; False (and :attr:`refused` set) when the
        ``tool_calls`` budget is spent."""
        maximum = self.limits.tool_calls
        if maximum is not None and self.tool_calls >= maximum:
            self.refused = BudgetBreach(limit="tool_calls", maximum=maximum, used=self.tool_calls)
            return False
        self.tool_calls += 1
        return True

    def refusal_message(self) -> str:
        """The error result of a tool call past the budget."""
        return (
            f"the tool-call budget of this generation is spent ({self.limits.tool_calls} "
            f"call(s)); this call was not run"
        )
