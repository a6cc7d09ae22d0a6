"""The fast "certainly valid" check never calls an invalid tool input valid."""

from __future__ import annotations

import random

import jsonschema
import pytest
from _tools import add

from agentkit.tools._fastschema import compile_simple

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "required": ["a", "b"], "additionalProperties": False},
    {"type": "object", "properties": {"s": {"type": "string", "description": "x"}, "n": {"type": "number"},
                                      "f": {"type": "boolean"}, "z": {"type": "null"}}, "required": ["s"]},
    {"type": "object", "title": "T", "properties": {}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer", "default": 3}}},
]

VALUES = [0, 1, -5, 2**70, 1.0, 1.5, float("nan"), float("inf"), True, False, None, "", "x", [], {}, [1], {"a": 1}]

GOOD = {"integer": [0, 3, -2, 2**70], "number": [0, 1.5, -2], "string": ["", "x"], "boolean": [True, False],
        "null": [None]}


def _inputs(schema: dict, rng: random.Random) -> object:
    if rng.random() < 0.05:
        return rng.choice(VALUES)  # not even an object
    props = schema.get("properties", {})
    keys = list(props) + ["extra", "a", "s"]
    out = {}
    for k in rng.sample(keys, rng.randint(0, len(keys))):
        fitting = GOOD.get(props.get(k, {}).get("type"), VALUES)
        out[k] = rng.choice(fitting if rng.random() < 0.8 else VALUES)
    return out


@pytest.mark.parametrize("schema", SCHEMAS)
def test_certainly_valid_agrees_with_jsonschema_whenever_it_says_valid(schema: dict) -> None:
    check = compile_simple(schema)
    assert check is not None
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(7)
    said_valid = 0
    for _ in range(5000):
        data = _inputs(schema, rng)
        if check(data):
            said_valid += 1
            assert validator.is_valid(data), (schema, data)
    assert said_valid > 50  # the fast path is really taken


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
    {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}},
    {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
])
def test_anything_outside_the_simple_shape_is_left_to_jsonschema(schema: dict) -> None:
    assert compile_simple(schema) is None


def test_a_tool_still_reports_jsonschema_errors_and_takes_its_exact_answers() -> None:
    assert add.validation_error({"a": 1, "b": 2}) is None
    assert add.validation_error({"a": 1.0, "b": 2}) is None  # an integral float is an integer in JSON Schema
    problem = add.validation_error({"a": True, "b": 2})
    assert problem is not None and "$.a" in problem and "integer" in problem
    problem = add.validation_error({"a": 1})
    assert problem is not None and "required" in problem
    problem = add.validation_error({"a": 1, "b": 2, "c": 3})
    assert problem is not None and "additionalProperties" in problem
