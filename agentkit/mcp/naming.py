"""Exposed tool names for MCP tools: safe for every provider, unique, deterministic.

Providers accept tool names made of ``[A-Za-z0-9_-]`` up to 64 characters. MCP tool and
server names may contain anything, so names are sanitised; with several servers they are
prefixed ``<server>__<tool>``; and a collision gets a ``_2``, ``_3``... suffix in listing
order instead of being dropped. The original names are kept for calling the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_TOOL_NAME_LENGTH = 64
"""The longest tool name every supported provider accepts."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sanitize_name(name: str, *, fallback: str = "tool") -> str:
    """Replace every run of characters outside ``[A-Za-z0-9_-]`` with ``_`` and cut the
    result to the length limit. An empty result becomes ``fallback``."""
    cleaned = _UNSAFE.sub("_", name)
    if not cleaned.strip("_"):
        cleaned = fallback
    return cleaned[:MAX_TOOL_NAME_LENGTH]


_MIN_SERVER_PART = 16
"""A long server name is cut to leave room for the tool name, but never below this."""


def _prefixed(server: str, tool: str) -> str:
    """``<server>__<tool>`` within the limit. A long server name is shortened first, so
    the tools of a server with a 70-character name do not all become the same
    64-character prefix (and then only ``_2``, ``_3``... apart)."""
    s, t = sanitize_name(server, fallback="server"), sanitize_name(tool)
    room = MAX_TOOL_NAME_LENGTH - 2
    if len(s) + len(t) > room:
        s = s[: max(room - len(t), _MIN_SERVER_PART)]
    return sanitize_name(f"{s}__{t}")


def _with_suffix(base: str, n: int) -> str:
    suffix = f"_{n}"
    return base[: MAX_TOOL_NAME_LENGTH - len(suffix)] + suffix


def exposed_names(entries: Iterable[tuple[str, str]], *, prefix: bool,
                  reserved: Iterable[str] = ()) -> list[str]:
    """Exposed names for ``(server, tool)`` pairs, in order.

    With ``prefix`` the name is ``<server>__<tool>``. Names in ``reserved`` and names
    already given are never reused: a clash gets the first free ``_2``, ``_3``...
    suffix. The same input always gives the same output.
    """
    used = set(reserved)
    out: list[str] = []
    for server, tool in entries:
        base = _prefixed(server, tool) if prefix else sanitize_name(tool)
        name = base
        n = 2
        while name in used:
            name = _with_suffix(base, n)
            n += 1
        used.add(name)
        out.append(name)
    return out
