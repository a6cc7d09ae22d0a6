"""Restoring stored events defensively (private).

A store gives back only what agentkit writes: every field of a restored event has the
type its class declares (``content`` a tuple of parts, ``seq`` an int >= 0, ...), and a
log's events have distinct ids and a ``seq`` that never goes backwards. A record that
breaks this passed its store's own integrity check (a valid checksum), so it was
written by hand or by another program: the stores turn the problem described here into
a StoreCorruptionError naming the file and line (or the session and event) instead of
letting a raw AttributeError or TypeError surface later from ``Session.open``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ConfigurationError
from ..events import Event, event_from_dict
from ..messages import FilePart, ImagePart, TextPart, ToolOutput


class Unreadable(ValueError):
    """A stored event that agentkit cannot restore; the message says why. Internal."""


class OutOfOrder(Unreadable):
    """Readable events that no agentkit writes in this order (a repeated id, a seq that
    goes backwards). Internal."""


_HINTS: dict[type, list[tuple[str, Any]]] = {}


def _fields(cls: type) -> list[tuple[str, Any]]:
    hints = _HINTS.get(cls)
    if hints is None:
        resolved = typing.get_type_hints(cls)
        hints = _HINTS[cls] = [(f.name, resolved[f.name]) for f in dataclasses.fields(cls)]
    return hints


def _shape_problem(value: Any, hint: Any, where: str) -> str | None:
    """None when ``value`` has type ``hint`` (the hints agentkit's events use), else what
    is wrong at ``where``."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(hint)
        if type(value) in members and dataclasses.is_dataclass(value):
            return _object_problem(value, where)  # the part it is, checked field by field
        if any(_shape_problem(value, h, where) is None for h in members):
            return None
        return f"{where} is {_show(value)}, not {_name(hint)}"
    if origin is typing.Literal:
        args = typing.get_args(hint)
        return None if value in args and type(value) is str else f"{where} is {_show(value)}, not one of {args}"
    if origin is tuple:
        if not isinstance(value, tuple):
            return f"{where} is {_show(value)}, not a list"
        item = typing.get_args(hint)[0]
        return next((p for i, v in enumerate(value) if (p := _shape_problem(v, item, f"{where}[{i}]"))), None)
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return f"{where} is {_show(value)}, not an object"
        return None
    if hint is type(None):
        return None if value is None else f"{where} is {_show(value)}, not null"
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else f"{where} is {_show(value)}, not a number"
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"{where} is {_show(value)}, not an integer"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return _object_problem(value, where)
        return f"{where} is {_show(value)}, not {_name(hint)}"
    return None if isinstance(value, hint) else f"{where} is {_show(value)}, not {_name(hint)}"


def _object_problem(obj: Any, where: str) -> str | None:
    for name, hint in _fields(type(obj)):
        problem = _shape_problem(getattr(obj, name), hint, f"{where}.{name}")
        if problem is not None:
            return problem
    if isinstance(obj, ToolOutput):
        return _output_problem(obj, where)
    return None


def _output_problem(out: ToolOutput, where: str) -> str | None:
    if out.kind in ("text", "error-text") and not isinstance(out.value, str):
        return f"{where}.value is {_show(out.value)}, not the text a {out.kind!r} output holds"
    if out.kind == "content":
        parts = out.value
        if not isinstance(parts, tuple) or not all(isinstance(p, (TextPart, ImagePart, FilePart)) for p in parts):
            return f"{where}.value is not the text, image and file parts a 'content' output holds"
        return next((p for i, v in enumerate(out.value) if (p := _object_problem(v, f"{where}.value[{i}]"))), None)
    return None


_CHECKS: dict[Any, Callable[[Any], bool]] = {}


def _check(hint: Any) -> Callable[[Any], bool]:
    """A fast test that a value has type ``hint``, built once per hint: every stored
    event passes through it at load, and only a failing one is described (slowly) by
    :func:`_shape_problem`."""
    check = _CHECKS.get(hint)
    if check is None:
        check = _CHECKS[hint] = _build(hint)
    return check


def _simple(hint: Any) -> frozenset[type] | None:
    """The exact types a value of ``hint`` may have (``str | None``: str and NoneType),
    or None when ``hint`` needs a deeper look."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_simple(m) for m in typing.get_args(hint)]
        known = [p for p in parts if p is not None]
        return frozenset[type]().union(*known) if len(known) == len(parts) else None
    if hint is float:
        return frozenset((int, float))
    if hint in (int, str, bool, bytes, type(None)):
        return frozenset((hint,))
    return None


def _build(hint: Any) -> Callable[[Any], bool]:
    simple = _simple(hint)
    if simple is not None:
        return lambda v: type(v) in simple
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda v: True
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(hint)
        if all(dataclasses.is_dataclass(m) for m in members):
            table = {m: _check(m) for m in members}
            return lambda v: (c := table.get(type(v))) is not None and c(v)
        checks = [_check(m) for m in members]
        return lambda v: any(c(v) for c in checks)
    if origin is typing.Literal:
        allowed = frozenset(typing.get_args(hint))
        return lambda v: type(v) is str and v in allowed
    if origin is tuple:
        item = _check(typing.get_args(hint)[0])

        def items(v: Any) -> bool:
            if type(v) is not tuple:
                return False
            for x in v:
                if not item(x):
                    return False
            return True

        return items
    if origin is dict:
        return lambda v: type(v) is dict and all(type(k) is str for k in v)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build_object(hint)
    return lambda v: isinstance(v, hint)


def _build_object(cls: type) -> Callable[[Any], bool]:
    hints = [(name, h) for name, h in _fields(cls) if h is not Any]
    plain = [(name, t) for name, h in hints if (t := _simple(h)) is not None]
    deep = [(name, _check(h)) for name, h in hints if _simple(h) is None]
    output = cls is ToolOutput

    def check(v: Any) -> bool:
        if type(v) is not cls:
            return False
        d = v.__dict__
        for name, allowed in plain:
            if type(d[name]) not in allowed:
                return False
        for name, deeper in deep:
            if not deeper(d[name]):
                return False
        return not output or _output_problem(typing.cast(ToolOutput, v), "") is None

    return check


def _name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_name(h) for h in typing.get_args(hint))
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", bytes: "bytes"}
    if hint is type(None):
        return "null"
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def restore_event(data: object) -> Event:
    """The event ``data`` (one stored event's JSON object) describes, or Unreadable
    saying what is wrong with it."""
    if not isinstance(data, dict):
        raise Unreadable(f"an event is a JSON {type(data).__name__}, not an object")
    try:
        event = event_from_dict(data)
    except Exception as exc:  # noqa: BLE001 - hostile data can fail any constructor: report it, whatever it is
        why = str(exc) if isinstance(exc, ConfigurationError) else f"{type(exc).__name__}: {exc}"
        raise Unreadable(f"{data.get('type')} event {_id_of(data)}: {why}") from None
    problem = None if _check(type(event))(event) else _object_problem(event, "$")
    if problem is None and not event.id:
        problem = "$.id is empty"
    if problem is None and event.seq < 0:
        problem = f"$.seq is {event.seq}, below 0"
    if problem is not None:
        raise Unreadable(f"{event.type} event {_id_of(data)}: {problem}")
    return event


def _id_of(data: dict[str, Any]) -> str:
    ident = data.get("id")
    return repr(ident) if isinstance(ident, str) else "(no valid id)"


class LogOrder:
    """Checks, event by event in log order, that ids are distinct and that ``seq`` never
    goes backwards (``seq`` 0, an event no Session numbered, is not checked)."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._seq = 0
        self._seq_at = ""

    def check(self, event: Event, where: str) -> None:
        """Raise OutOfOrder when ``event`` (found at ``where``) breaks the order."""
        first = self._seen.get(event.id)
        if first is not None:
            raise OutOfOrder(f"event id {event.id!r} appears twice (first at {first}); event ids are unique")
        if event.seq:
            if event.seq <= self._seq:
                raise OutOfOrder(
                    f"event {event.id!r} has seq {event.seq} after seq {self._seq} (at {self._seq_at}); "
                    f"seq numbers only go up"
                )
            self._seq, self._seq_at = event.seq, where
        self._seen[event.id] = where


def restore_events(items: Iterable[object], where: str) -> tuple[Event, ...]:
    """The events of one stored list (``where`` names it), checked in order; Unreadable
    (or OutOfOrder) for the first one that is wrong, naming its index."""
    order = LogOrder()
    out = []
    for i, data in enumerate(items):
        try:
            event = restore_event(data)
            order.check(event, f"{where}, event {i + 1}")
        except Unreadable as exc:
            raise type(exc)(f"event {i + 1}: {exc}") from None
        out.append(event)
    return tuple(out)
