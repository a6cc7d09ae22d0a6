"""Built-in JSON tools: json_validate and json_transform.

Paths (used by ``required_fields`` and ``select``) are dot-separated: ``user.name``,
``items.0.id`` (an integer indexes a list, negative from the end), ``items.*.id`` (``*``
maps over every list element or object value, giving a list). ``$`` (or an empty path)
is the whole document.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from ..context._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ..errors import ConfigurationError
from ..messages import ToolOutput
from ._common import check_limits, guarded, visible
from .base import Tool

_MISSING = object()


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null"


def json_path(document: Any, path: str) -> Any:
    """The value at ``path`` in ``document`` (see the module docstring for the syntax).
    Raises KeyError naming the first segment that does not exist."""
    if path in ("", "$"):
        return document
    segments = path[2:].split(".") if path.startswith("$.") else path.split(".")
    return _walk(document, segments, [])


def _walk(value: Any, segments: list[str], seen: list[str]) -> Any:
    if not segments:
        return value
    head, rest = segments[0], segments[1:]
    here = seen + [head]
    if head == "*":
        if isinstance(value, list):
            items = value
        elif isinstance(value, dict):
            items = list(value.values())
        else:
            raise KeyError(f"'{'.'.join(here)}': '*' needs an array or object, found {_kind(value)}")
        return [_walk(v, rest, here) for v in items]
    if isinstance(value, dict):
        if head not in value:
            raise KeyError(f"'{'.'.join(here)}' does not exist")
        return _walk(value[head], rest, here)
    if isinstance(value, list):
        try:
            index = int(head)
        except ValueError:
            raise KeyError(f"'{'.'.join(here)}': an array needs an integer index or '*'") from None
        if not -len(value) <= index < len(value):
            raise KeyError(f"'{'.'.join(here)}': index out of range (length {len(value)})")
        return _walk(value[index], rest, here)
    raise KeyError(f"'{'.'.join(here)}' does not exist ({'.'.join(seen) or '$'} is {_kind(value)})")


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ConfigurationError("the JSON is nested too deeply to be read; flatten it") from None


def json_tools(*, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Tool]:
    """``json_validate {json, schema?, required_fields?}``: parse JSON text and check it
    against a JSON Schema (Draft 2020-12) and/or required paths; every problem is
    listed. ``json_transform {json, select, missing?}``: build a new object whose keys
    are those of ``select`` and whose values are taken from the given paths (pick and
    rename in one step); a missing path is an error, or null with
    ``missing="null"``."""
    check_limits(max_lines, max_bytes)

    def json_validate(json: str, schema: dict[str, Any] | None = None,
                      required_fields: list[str] | None = None) -> ToolOutput:
        document = _parse(json)
        problems: list[str] = []
        if schema is not None:
            try:
                validator = jsonschema.Draft202012Validator(schema)
                validator.check_schema(schema)
            except SchemaError as exc:
                return ToolOutput.error(f"json_validate: the schema itself is invalid: {exc.message}")
            try:
                errors = list(validator.iter_errors(document))
            except Unresolvable as exc:
                return ToolOutput.error(
                    f"json_validate: the schema refers to {getattr(exc, 'ref', str(exc))!r}, which "
                    f"cannot be resolved (remote references are not fetched); inline that schema"
                )
            for err in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])[:20]:
                where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
                problems.append(f"{where}: {err.message}")
        for path in required_fields or []:
            try:
                json_path(document, path)
            except KeyError as exc:
                problems.append(f"required field {exc.args[0]}")
        if problems:
            return ToolOutput.error(visible("invalid:\n" + "\n".join(problems), max_lines, max_bytes))
        return ToolOutput.text(f"valid JSON ({_kind(document)})")

    def json_transform(json: str, select: dict[str, str], missing: str = "error") -> Any:
        document = _parse(json)
        out: dict[str, Any] = {}
        errors: list[str] = []
        for key, path in select.items():
            try:
                out[key] = json_path(document, path)
            except KeyError as exc:
                if missing == "null":
                    out[key] = None
                else:
                    errors.append(f"{key}: {exc.args[0]}")
        if errors:
            return ToolOutput.error("json_transform: missing paths: " + "; ".join(errors)
                                    + " (pass missing='null' to use null instead)")
        text = _dumps(out)
        if len(text.encode("utf-8")) > max_bytes or text.count("\n") >= max_lines:
            return ToolOutput.text(visible(text, max_lines, max_bytes))
        return out

    return [
        Tool(name="json_validate",
             description="Check JSON text: that it parses, matches a JSON Schema, and/or has "
                         "required fields (dot paths like 'user.name', 'items.0.id').",
             input_schema={"type": "object", "properties": {
                 "json": {"type": "string", "description": "The JSON text to check"},
                 "schema": {"type": "object", "description": "A JSON Schema the document must match"},
                 "required_fields": {"type": "array", "items": {"type": "string"},
                                     "description": "Dot paths that must exist"},
             }, "required": ["json"], "additionalProperties": False},
             fn=guarded("json_validate", json_validate), read_only=True),
        Tool(name="json_transform",
             description="Pick and rename values from JSON text: 'select' maps each output key "
                         "to a dot path ('user.name', 'items.0.id', 'items.*.id' for every "
                         "element, '$' for the whole document).",
             input_schema={"type": "object", "properties": {
                 "json": {"type": "string", "description": "The JSON text to read"},
                 "select": {"type": "object", "additionalProperties": {"type": "string"},
                            "minProperties": 1, "description": "output key -> dot path"},
                 "missing": {"enum": ["error", "null"],
                             "description": "What a missing path gives (default: an error)"},
             }, "required": ["json", "select"], "additionalProperties": False},
             fn=guarded("json_transform", json_transform), read_only=True),
    ]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
