"""agentkit._json: the one strict-JSON check, and JSON reading and writing that do not
depend on how deep the caller's stack is."""

from __future__ import annotations

import json
import sys

import pytest
from _deep import depth_of, near_the_recursion_limit

from agentkit._json import MAX_DEPTH, dumps, json_problem, loads


def brackets(levels: int) -> str:
    return "[" * levels + "]" * levels


# Before 3.12 the C json module counts its nesting against the Python recursion limit, so
# json.loads/dumps fail when called from a deep stack; 3.12+ checks the C stack instead.
OLD_RECURSION = sys.version_info < (3, 12)

DOCUMENTS = [
    '{"a": [1, 2.5, -3e2, 1E+2, "x\\u00e9\\n"], "b": {"c": null, "d": true, "e": false}}',
    " [ [ ] , { } , 0 , -0.0 , \"\" ] ",
    '"just a string"',
    "12",
    '{"nested": [{"k": [[{"z": [1]}]]}], "": {}}',
]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_loads_from_a_deep_stack_reads_what_json_loads_reads(doc):
    wrapped = "[" * 100 + doc + "]" * 100  # too deep for json.loads down there
    if OLD_RECURSION:  # the failure this module exists for
        with pytest.raises(RecursionError):
            near_the_recursion_limit(lambda: json.loads(wrapped))
    assert near_the_recursion_limit(lambda: loads(wrapped)) == json.loads(wrapped)
    assert near_the_recursion_limit(lambda: loads(wrapped.encode())) == json.loads(wrapped)


@pytest.mark.parametrize("bad", ["[1,]", '{"a" 1}', "[1 2]", "{1: 2}", "[", "[] []", '{"a": 1,}', "[tru]"])
def test_loads_from_a_deep_stack_refuses_what_json_loads_refuses(bad):
    wrapped = "[" * 100 + bad + "]" * 100
    with pytest.raises(json.JSONDecodeError):
        near_the_recursion_limit(lambda: loads(wrapped))


def test_loads_reads_any_depth_and_strict_refuses_nan():
    assert depth_of(loads(brackets(20_000))) == 20_000
    assert json.loads("[NaN]")[0] != json.loads("[NaN]")[0]  # the lenient default, as json.loads
    for text in ('{"x": NaN}', "[Infinity]", "[" * 2000 + "-Infinity" + "]" * 2000):
        with pytest.raises(ValueError, match="is not JSON"):
            loads(text, strict=True)


def test_dumps_from_a_deep_stack_writes_what_json_dumps_writes():
    value = {"b": loads(brackets(300)), "a": [1.5, "é", None]}
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if OLD_RECURSION:
        with pytest.raises(RecursionError):
            near_the_recursion_limit(lambda: json.dumps(value, sort_keys=True, separators=(",", ":")))
    assert near_the_recursion_limit(lambda: dumps(value, sort_keys=True, separators=(",", ":"))) == expected
    with pytest.raises(ValueError, match="Out of range float"):  # errors come back to the caller
        near_the_recursion_limit(lambda: dumps([loads(brackets(300)), float("nan")], allow_nan=False))


def test_json_problem_names_what_is_wrong_and_where():
    assert json_problem({"a": [1, "x", None, True, 2.5, {"b": []}]}) is None
    assert json_problem({"a": [{"b c": [object()]}]}) == '$.a[0]["b c"][0] is of type object, not a JSON value'
    assert json_problem({"x": float("inf")}).startswith("$.x is inf, which is not a JSON number")
    looped: list = []
    looped.append(looped)
    assert "nested deeper than 500 levels (or contains itself)" in json_problem(looped)
    assert json_problem(loads(brackets(MAX_DEPTH))) is None
    assert json_problem(loads(brackets(MAX_DEPTH + 1))).startswith("$[0][0][0][0][0][0][0][0]... is nested deeper")
    assert json_problem(loads(brackets(50)), max_depth=49) is not None


def test_json_problem_accepts_subclasses_that_come_back_equal():
    import collections
    import enum

    class Key(str):
        pass

    class Level(enum.IntEnum):
        HIGH = 3

    value = collections.OrderedDict([(Key("k"), [Level.HIGH, 1.5, Key("v")])])
    assert json_problem(value) is None and loads(dumps(value)) == value
    assert "is nan" in json_problem(collections.OrderedDict(x=float("nan")))
