"""Strict JSON: the one check that a value is plain JSON that comes back unchanged from
a store, and reading and writing JSON that never depends on the caller's stack depth.

``json_problem`` walks a value without recursion and says what is not strict JSON: a
non-string key (it would come back as a string), a tuple (a list), NaN or an infinity
(not JSON at all), an object of another type, or nesting deeper than :data:`MAX_DEPTH`
levels. Events, pushes, tool inputs and the stores all use it.

``loads`` and ``dumps`` are ``json.loads``/``json.dumps``, except that the standard
library's recursion limit cannot make them fail because the caller is deep in its own
stack: they fall back to an iterative parser and encoder. Pure: no I/O, no threads.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
import math
import re
from collections.abc import Callable, Iterator
from json.scanner import NUMBER_RE
from typing import Any

_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

MAX_DEPTH = 500
"""How deeply event data and tool input may nest (arrays and objects)."""


_SHOWN = 8  # path elements named in a message


def _where(path: tuple[Any, ...] | None) -> str:
    keys: list[Any] = []
    while path is not None:
        path, key = path
        keys.append(key)
    keys.reverse()
    out = "$"
    for key in keys[:_SHOWN]:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key.isidentifier():
            out += f".{key}"
        else:
            out += f"[{json.dumps(key)}]"
    return out + ("..." if len(keys) > _SHOWN else "")


def _plain(value: object, limit: int) -> bool:
    """The fast check: True when ``value`` is plain JSON of the exact built-in types,
    nested at most ``limit`` levels (False may also mean "a subclass": look closer)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        t = type(v)
        if t is str or t is int or t is bool or v is None:
            continue
        if t is float:
            if v - v != 0.0:  # type: ignore[operator]  # NaN and infinities
                return False
            continue
        if t is dict:
            if depth >= limit:
                return False
            for key, item in v.items():  # type: ignore[attr-defined]
                if type(key) is not str:
                    return False
                push((item, depth + 1))
            continue
        if t is list:
            if depth >= limit:
                return False
            for item in v:  # type: ignore[attr-defined]
                push((item, depth + 1))
            continue
        return False
    return True


def json_problem(value: object, *, max_depth: int = MAX_DEPTH, envelope: int = 0) -> str | None:
    """None when ``value`` is strict JSON nested at most ``max_depth`` levels, else what
    is wrong and where (``$`` is the value itself). ``envelope``: levels of wrapping
    around the data the limit is meant for (an event's own dict), allowed on top."""
    if _plain(value, max_depth + envelope):
        return None
    stack: list[tuple[object, tuple[Any, ...] | None, int]] = [(value, None, 0)]
    while stack:
        v, path, depth = stack.pop()
        if v is None or isinstance(v, (str, bool, int)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return f"{_where(path)} is {v!r}, which is not a JSON number (NaN and infinities are not JSON)"
            continue
        if isinstance(v, (dict, list)):
            if depth >= max_depth + envelope:
                return f"{_where(path)} is nested deeper than {max_depth} levels (or contains itself)"
            if isinstance(v, dict):
                for key, item in v.items():
                    if not isinstance(key, str):
                        return (
                            f"{_where(path)} has the key {key!r} ({type(key).__name__}): JSON object "
                            f"keys are strings (it would come back as {str(key)!r})"
                        )
                    stack.append((item, (path, key), depth + 1))
            else:
                stack.extend((item, (path, i), depth + 1) for i, item in enumerate(v))
            continue
        if isinstance(v, tuple):
            return f"{_where(path)} is a tuple: use a list (a tuple would come back as a list)"
        return f"{_where(path)} is of type {type(v).__name__}, not a JSON value"
    return None


# -- reading -----------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_CONSTANTS = (("null", None), ("true", True), ("false", False))
_NON_FINITE = (("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf))


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: str | bytes, *, strict: bool = False) -> Any:
    """``json.loads(data)`` whatever the caller's stack depth. ``strict=True`` refuses
    the non-standard ``NaN`` and ``Infinity`` tokens (ValueError)."""
    try:
        if strict:
            return json.loads(data, parse_constant=_not_json)
        return json.loads(data)
    except RecursionError:
        pass  # too deep for the C parser from here: the iterative one below reads it
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    return _parse(text, strict)


def _ws(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return i if m is None else m.end()


def _key(s: str, i: int) -> tuple[str, int]:
    if s[i : i + 1] != '"':
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", s, i)
    key, i = _scanstring(s, i + 1)
    i = _ws(s, i)
    if s[i : i + 1] != ":":
        raise json.JSONDecodeError("Expecting ':' delimiter", s, i)
    return key, _ws(s, i + 1)


def _scalar(s: str, i: int, strict: bool) -> tuple[Any, int]:
    if s[i : i + 1] == '"':
        return _scanstring(s, i + 1)
    for word, value in _CONSTANTS if strict else (*_CONSTANTS, *_NON_FINITE):
        if s.startswith(word, i):
            return value, i + len(word)
    m = NUMBER_RE.match(s, i)
    if m is None:
        for word, _ in _NON_FINITE if strict else ():
            if s.startswith(word, i):
                _not_json(word)
        raise json.JSONDecodeError("Expecting value", s, i)
    integer, frac, exp = m.groups()
    if frac or exp:
        return float(integer + (frac or "") + (exp or "")), m.end()
    return int(integer), m.end()


def _parse(s: str, strict: bool) -> Any:
    """An iterative JSON parser: nesting uses a list, not the call stack."""
    stack: list[list[Any]] = []  # [container, key of the value being read]
    i = _ws(s, 0)
    while True:
        c = s[i : i + 1]
        if c in ("{", "["):
            i = _ws(s, i + 1)
            if s[i : i + 1] == ("}" if c == "{" else "]"):
                value: Any = {} if c == "{" else []
                i += 1
            elif c == "{":
                key, i = _key(s, i)
                stack.append([{}, key])
                continue
            else:
                stack.append([[], None])
                continue
        else:
            value, i = _scalar(s, i, strict)
        while True:  # a complete value: store it, then close what ends after it
            if not stack:
                i = _ws(s, i)
                if i != len(s):
                    raise json.JSONDecodeError("Extra data", s, i)
                return value
            top = stack[-1]
            container = top[0]
            if isinstance(container, dict):
                container[top[1]] = value
            else:
                container.append(value)
            i = _ws(s, i)
            c = s[i : i + 1]
            if c == ",":
                i = _ws(s, i + 1)
                if isinstance(container, dict):
                    top[1], i = _key(s, i)
                break
            if c != ("}" if isinstance(container, dict) else "]"):
                raise json.JSONDecodeError("Expecting ',' delimiter", s, i)
            stack.pop()
            value, i = container, i + 1


# -- writing -----------------------------------------------------------------------------


_END = object()
_ASCII: Callable[[str], str] = json.encoder.encode_basestring_ascii
_UNICODE: Callable[[str], str] = json.encoder.encode_basestring


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` whatever the caller's stack depth: when the caller
    is too deep for the encoder, an iterative encoder writes the same text (it takes
    ``ensure_ascii``, ``allow_nan``, ``sort_keys`` and ``separators``)."""
    try:
        return json.dumps(obj, **kwargs)
    except RecursionError:
        pass  # too deep for the C encoder from here: the iterative one below writes it
    return _encode(obj, **kwargs)


def _encode(obj: Any, *, ensure_ascii: bool = True, allow_nan: bool = True, sort_keys: bool = False,
            separators: tuple[str, str] | None = None, **other: Any) -> str:
    """An iterative JSON encoder: nesting uses a list, not the call stack."""
    if other:
        raise TypeError(f"dumps() of a value nested this deeply takes no {', '.join(sorted(other))}")
    item_sep, key_sep = separators or (", ", ": ")
    string: Callable[[str], str] = _ASCII if ensure_ascii else _UNICODE

    def number(v: float) -> str:
        if v != v or v in (math.inf, -math.inf):
            if not allow_nan:
                raise ValueError(f"Out of range float values are not JSON compliant: {v!r}")
            return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
        return float.__repr__(v)

    def key(k: Any) -> str:
        if isinstance(k, str):
            return k
        if k is True or k is False or k is None:
            return json.dumps(k)
        if isinstance(k, int):
            return int.__repr__(k)
        if isinstance(k, float):
            return number(k)
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")

    out: list[str] = []
    stack: list[tuple[Iterator[Any], bool, int]] = []  # (what is left, is an object, id)
    open_ids: set[int] = set()
    value = obj
    while True:
        if isinstance(value, str):
            out.append(string(value))
        elif value is None or value is True or value is False:
            out.append("null" if value is None else "true" if value else "false")
        elif isinstance(value, int):
            out.append(int.__repr__(value))
        elif isinstance(value, float):
            out.append(number(value))
        elif isinstance(value, (list, tuple, dict)):
            if id(value) in open_ids:
                raise ValueError("Circular reference detected")
            open_ids.add(id(value))
            is_object = isinstance(value, dict)
            if isinstance(value, dict):
                items: Any = sorted(value.items()) if sort_keys else value.items()
            else:
                items = value
            out.append("{" if is_object else "[")
            stack.append((iter(items), is_object, id(value)))
        else:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        while stack:  # the next value to write, closing what has nothing left
            items, is_object, ident = stack[-1]
            item: Any = next(items, _END)
            if item is _END:
                out.append("}" if is_object else "]")
                stack.pop()
                open_ids.discard(ident)
                continue
            if out[-1] not in ("{", "["):
                out.append(item_sep)
            if is_object:
                out.append(string(key(item[0])) + key_sep)
                value = item[1]
            else:
                value = item
            break
        else:
            return "".join(out)
