"""A fast "certainly valid" check for the simplest tool input schemas.

Most tools take a flat object of scalars (``{"a": 1, "b": "x"}``). Validating such an
input with jsonschema costs more than the rest of a tool call's bookkeeping; this
module compiles a schema of that shape into a plain function. The function only ever
answers "valid" or "ask jsonschema": when it returns False, or when a schema uses
anything outside the subset below (it is then not compiled at all), jsonschema decides
and writes the error message. So a bug here could only make a valid input slower,
never an invalid one valid, as long as "True" is right for the subset:

- the schema: ``type: object`` with ``properties``, ``required``,
  ``additionalProperties`` (a bool) and annotations (``title``, ``description``,
  ``default``, ``$schema``, ``$id``, ``examples``);
- each property: ``type`` one of string, integer, number, boolean, null (one name),
  with annotations only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_ANNOTATIONS = frozenset({"title", "description", "default", "$schema", "$id", "examples", "$comment"})

# exact types only: a bool is not an integer here (nor for JSON Schema), and a subclass
# of str or int goes to jsonschema
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def compile_simple(schema: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A function returning True for inputs that certainly satisfy ``schema`` (False:
    ask jsonschema), or None when ``schema`` is not of the simple shape."""
    if schema.get("type") != "object" or not set(schema) <= _ANNOTATIONS | {
        "type", "properties", "required", "additionalProperties"
    }:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(extra, bool):
        return None
    kinds: dict[str, tuple[type, ...]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or not set(sub) <= _ANNOTATIONS | {"type"}:
            return None
        named = sub.get("type")
        kind = _TYPES.get(named) if isinstance(named, str) else None
        if kind is None:
            return None
        kinds[name] = kind
    needed = tuple(required)
    if not all(isinstance(n, str) for n in needed):
        return None

    def certainly_valid(data: Any) -> bool:
        if type(data) is not dict:
            return False
        for name in needed:
            if name not in data:
                return False
        for key, value in data.items():
            kind = kinds.get(key)
            if kind is None:
                if not extra:
                    return False
                continue
            if type(value) not in kind:
                return False
        return True

    return certainly_valid
