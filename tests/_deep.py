"""Helpers for tests of deeply nested JSON and of calls made from a deep stack."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def nested(levels: int) -> list:
    """A list nested ``levels`` deep (``[]`` is one level)."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def depth_of(value: Any) -> int:
    """How deep a value built by :func:`nested` is (measured without recursion)."""
    n = 0
    while isinstance(value, list):
        value, n = (value[0] if value else None), n + 1
    return n


def near_the_recursion_limit(fn: Callable[[], Any], headroom: int = 60) -> Any:
    """Call ``fn`` with only about ``headroom`` frames left before RecursionError."""
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1

    def down(n: int) -> Any:
        return fn() if n <= 0 else down(n - 1)

    return down(sys.getrecursionlimit() - depth - headroom)
