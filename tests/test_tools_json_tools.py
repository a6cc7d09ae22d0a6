"""json_tools: validation against schemas and required paths; path selection."""

from __future__ import annotations

import json

import pytest

from agentkit import CancelToken, ToolContext, json_tools
from agentkit.messages import ToolCallPart, ToolOutput
from agentkit.tools import json_path
from agentkit.tools.runner import run_tool_call

DOC = json.dumps({"user": {"name": "Ada", "email": "ada@example.org"},
                  "items": [{"id": 1, "tags": ["a"]}, {"id": 2, "tags": []}]})


def call(name: str, **args) -> ToolOutput:
    tool = {t.name: t for t in json_tools()}[name]
    ctx = ToolContext(tool_call_id="c", tool_name=name, cancel=CancelToken())
    return run_tool_call(tool, ToolCallPart(tool_call_id="c", tool_name=name, input=args), ctx)


def test_valid_document_reports_its_kind():
    assert call("json_validate", json=DOC).value == "valid JSON (object)"
    assert call("json_validate", json="[1, 2]").value == "valid JSON (array)"


def test_parse_error_names_line_and_column():
    out = call("json_validate", json='{"a": 1,\n "b": }')
    assert out.is_error and "line 2" in out.value and "column" in out.value


def test_schema_and_required_fields_list_every_problem():
    schema = {"type": "object", "properties": {"user": {"type": "object", "properties": {
        "name": {"type": "integer"}}}}, "required": ["user", "version"]}
    out = call("json_validate", json=DOC, schema=schema, required_fields=["user.email", "user.phone",
                                                                         "items.1.id", "items.5.id"])
    assert out.is_error
    assert "'version' is a required property" in out.value
    assert "$.user.name: 'Ada' is not of type 'integer'" in out.value
    assert "'user.phone' does not exist" in out.value
    assert "items.5" in out.value and "out of range" in out.value
    assert "user.email" not in out.value and "items.1.id" not in out.value


def test_invalid_schema_is_reported():
    out = call("json_validate", json="{}", schema={"type": "no-such-type"})
    assert out.is_error and "schema itself is invalid" in out.value


def test_transform_picks_and_renames_paths():
    out = call("json_transform", json=DOC, select={"who": "user.name", "ids": "items.*.id",
                                                   "first_tags": "items.0.tags", "last": "items.-1.id"})
    assert out.kind == "json"
    assert out.value == {"who": "Ada", "ids": [1, 2], "first_tags": ["a"], "last": 2}


def test_transform_missing_path_is_an_error_or_null_on_request():
    out = call("json_transform", json=DOC, select={"phone": "user.phone"})
    assert out.is_error and "user.phone" in out.value and "missing='null'" in out.value
    out = call("json_transform", json=DOC, select={"phone": "user.phone"}, missing="null")
    assert out.value == {"phone": None}


@pytest.mark.parametrize("path,expected", [("$", {"a": [1]}), ("", {"a": [1]}), ("$.a.0", 1), ("a.*", [1])])
def test_json_path_syntax(path, expected):
    assert json_path({"a": [1]}, path) == expected


def test_json_path_on_a_scalar_names_the_problem():
    with pytest.raises(KeyError, match="a.b"):
        json_path({"a": 3}, "a.b")


def test_unresolvable_references_and_deep_nesting_are_explained():
    out = call("json_validate", json="{}", schema={"$ref": "https://schemas.example.test/s.json"})
    assert out.is_error and "remote references are not fetched" in out.value
    assert "https://schemas.example.test/s.json" in out.value
    out = call("json_validate", json="[" * 100_000 + "]" * 100_000)
    assert out.is_error and "nested too deeply" in out.value
