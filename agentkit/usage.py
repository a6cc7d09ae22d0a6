"""Token usage, summed over steps and runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts of one model call, or summed over many (``a + b``)."""

    input_tokens: int = 0
    """Prompt tokens, including cached ones."""
    output_tokens: int = 0
    """Completion tokens, including reasoning tokens."""
    total_tokens: int = 0
    """Input plus output tokens."""
    cache_read_tokens: int = 0
    """Input tokens served from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache."""
    reasoning_tokens: int = 0
    """Output tokens the model spent reasoning (part of ``output_tokens``), where the
    provider reports them: OpenAI's ``completion_tokens_details.reasoning_tokens``,
    Anthropic's ``output_tokens_details.thinking_tokens``; 0 when not reported."""

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready dict (``reasoning_tokens`` only when reported)."""
        out = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: int(data.get(k, 0)) for k in cls.__dataclass_fields__})
