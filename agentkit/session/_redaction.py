"""Redaction: secrets replaced by ``[redacted]`` before they are committed (pure logic).

``redact=`` takes a regex (a ``str`` or a compiled pattern), a callable
``(text) -> text``, or a list of them. A :class:`Redactor` applies every pattern (each
match becomes ``[redacted]``), then every callable, to each string of a tool input, a tool
output or a runtime event's data; dict keys, numbers and binary content are left as they
are. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Union

from ..errors import ConfigurationError, HookError
from ..messages import TextPart, ToolCallPart, ToolOutput

__all__ = ["REDACTED", "Redaction", "Redactor", "redactor_of"]

REDACTED = "[redacted]"

_One = Union[str, "re.Pattern[str]", Callable[[str], str]]
Redaction = Union[_One, Sequence[_One]]
"""What ``redact=`` accepts."""


class Redactor:
    """Applies patterns, then callables, to every string of a JSON value."""

    __slots__ = ("_patterns", "_functions")

    def __init__(self, patterns: Sequence[re.Pattern[str]], functions: Sequence[Callable[[str], str]]) -> None:
        self._patterns = tuple(patterns)
        self._functions = tuple(functions)

    def text(self, text: str) -> str:
        """``text`` with every match replaced."""
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        for fn in self._functions:
            try:
                out = fn(text)
            except Exception as exc:  # noqa: BLE001 - host code: named in the error
                raise HookError(f"the redact callable {_name(fn)} raised {type(exc).__name__}: {exc}",
                                hook="redact") from exc
            if not isinstance(out, str):
                raise HookError(f"the redact callable {_name(fn)} returned {type(out).__name__}; return the "
                                f"text with secrets replaced (a str)", hook="redact")
            text = out
        return text

    def value(self, value: Any) -> Any:
        """A copy of the JSON value ``value`` with every string redacted (no recursion:
        any nesting depth is fine)."""
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, (dict, list)):
            return value
        root: list[Any] = [value]
        stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]  # (parent copy, key, original)
        while stack:
            parent, key, item = stack.pop()
            if isinstance(item, str):
                parent[key] = self.text(item)
            elif isinstance(item, dict):
                copy: dict[Any, Any] = dict(item)
                parent[key] = copy
                stack.extend((copy, k, v) for k, v in item.items())
            elif isinstance(item, list):
                items = list(item)
                parent[key] = items
                stack.extend((items, i, v) for i, v in enumerate(item))
        return root[0]

    def call(self, call: ToolCallPart) -> ToolCallPart:
        """``call`` with its input redacted."""
        redacted = self.value(call.input)
        return call if redacted == call.input else replace(call, input=redacted)

    def output(self, output: ToolOutput) -> ToolOutput:
        """``output`` with its text, JSON values, text parts and metadata redacted."""
        value = output.value
        if output.kind == "content":
            value = tuple(replace(p, text=self.text(p.text)) if isinstance(p, TextPart) else p for p in value)
        else:
            value = self.value(value)
        metadata = None if output.metadata is None else self.value(output.metadata)
        if value == output.value and metadata == output.metadata:
            return output
        return replace(output, value=value, metadata=metadata)


def _name(fn: Callable[..., Any]) -> str:
    return repr(getattr(fn, "__qualname__", None) or type(fn).__name__)


def redactor_of(spec: Redaction | None) -> Redactor | None:
    """The :class:`Redactor` for ``redact=`` (None for none); a ConfigurationError names
    what is wrong with ``spec``."""
    if spec is None:
        return None
    items = [spec] if isinstance(spec, (str, re.Pattern)) or callable(spec) else spec
    if not isinstance(items, Sequence):
        raise ConfigurationError(
            f"redact must be a regex (str or compiled), a callable (text) -> text, or a list of them, "
            f"not {type(spec).__name__}"
        )
    patterns: list[re.Pattern[str]] = []
    functions: list[Callable[[str], str]] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                raise ConfigurationError("redact: an empty pattern would match everywhere; give a regex for the secret")
            try:
                patterns.append(re.compile(item))
            except re.error as exc:
                raise ConfigurationError(f"redact: {item!r} is not a valid regex: {exc}") from None
        elif isinstance(item, re.Pattern):
            if not isinstance(item.pattern, str):
                raise ConfigurationError("redact: patterns must be str patterns, not bytes patterns")
            patterns.append(item)
        elif callable(item):
            functions.append(item)
        else:
            raise ConfigurationError(
                f"redact items must be regexes (str or compiled) or callables (text) -> text, "
                f"not {type(item).__name__}"
            )
    return Redactor(patterns, functions) if patterns or functions else None
