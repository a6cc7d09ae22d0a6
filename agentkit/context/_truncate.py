"""Bounding what a model sees: line and byte limits for tool output.

Pure logic, no I/O. Every built-in tool passes its model-visible text through
:func:`truncate_output`, so a huge file or a chatty command costs a bounded number of
tokens and the model is told that (and how much) was cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigurationError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_LINES", "TruncatedOutput", "truncate_output"]

DEFAULT_MAX_LINES = 2000
"""Default line limit of model-visible tool output."""
DEFAULT_MAX_BYTES = 51_200
"""Default byte limit (UTF-8) of model-visible tool output (50 KiB)."""


@dataclass(frozen=True, kw_only=True)
class TruncatedOutput:
    """The result of :func:`truncate_output`."""

    content: str
    """The kept text (at most ``max_lines`` lines and ``max_bytes`` UTF-8 bytes)."""
    truncated: bool
    """True when anything was cut."""
    notice: str
    """A one-line explanation for the model ("" when nothing was cut)."""
    total_lines: int
    """Lines in the original text."""
    total_bytes: int
    """UTF-8 bytes in the original text."""

    def text(self) -> str:
        """The content followed by the notice (on its own line) when truncated."""
        if not self.truncated:
            return self.content
        sep = "" if not self.content or self.content.endswith("\n") else "\n"
        return f"{self.content}{sep}{self.notice}"


def _cut_bytes(text: str, max_bytes: int, keep: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    if keep == "head":
        # errors="ignore" drops a code point split by the cut instead of mangling it
        return data[:max_bytes].decode("utf-8", errors="ignore")
    return data[len(data) - max_bytes :].decode("utf-8", errors="ignore")


def truncate_output(
    text: str,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    keep: Literal["head", "tail"] = "head",
) -> TruncatedOutput:
    """Keep at most ``max_lines`` lines and ``max_bytes`` UTF-8 bytes of ``text``.

    ``keep="head"`` keeps the beginning (files, listings); ``keep="tail"`` keeps the end
    (command output, where errors usually are). A cut never splits a UTF-8 code point.
    """
    if not isinstance(text, str):
        raise ConfigurationError(f"truncate_output takes a str, not {type(text).__name__}")
    if not isinstance(max_lines, int) or max_lines < 1:
        raise ConfigurationError(f"max_lines must be a positive int, got {max_lines!r}")
    if not isinstance(max_bytes, int) or max_bytes < 1:
        raise ConfigurationError(f"max_bytes must be a positive int, got {max_bytes!r}")
    if keep not in ("head", "tail"):
        raise ConfigurationError(f"keep must be 'head' or 'tail', got {keep!r}")
    lines = text.splitlines(keepends=True)
    total_lines = len(lines)
    total_bytes = len(text.encode("utf-8"))
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return TruncatedOutput(
            content=text, truncated=False, notice="", total_lines=total_lines, total_bytes=total_bytes
        )
    kept_lines = lines[:max_lines] if keep == "head" else lines[-max_lines:]
    content = _cut_bytes("".join(kept_lines), max_bytes, keep)
    shown_lines = len(content.splitlines())
    shown_bytes = len(content.encode("utf-8"))
    where = "first" if keep == "head" else "last"
    notice = (
        f"[output truncated: showing the {where} {shown_lines} of {total_lines} lines "
        f"({shown_bytes} of {total_bytes} bytes)]"
    )
    return TruncatedOutput(
        content=content, truncated=True, notice=notice, total_lines=total_lines, total_bytes=total_bytes
    )
