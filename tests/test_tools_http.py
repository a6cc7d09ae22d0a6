"""http_tools against the `responses` library (no network)."""

from __future__ import annotations

import json

import pytest
import requests
import responses

from agentkit import CancelToken, ConfigurationError, LocalExecutionContext, ToolContext, ToolOutput, http_tools
from agentkit.messages import ToolCallPart
from agentkit.tools.runner import run_tool_call


def call(tools, name: str, **args) -> ToolOutput:
    tool = {t.name: t for t in tools}[name]
    ctx = ToolContext(tool_call_id="h1", tool_name=name, cancel=CancelToken())
    return run_tool_call(tool, ToolCallPart(tool_call_id="h1", tool_name=name, input=args), ctx)


@responses.activate
def test_get_returns_status_headers_and_body_and_sends_headers():
    responses.get("https://api.example.test/status", json={"ok": True}, status=200,
                  match=[responses.matchers.header_matcher({"X-Token": "abc"})])
    out = call(http_tools(), "http_get", url="https://api.example.test/status", headers={"X-Token": "abc"})
    assert not out.is_error
    assert out.value.startswith("HTTP 200 OK")
    assert "content-type: application/json" in out.value
    assert out.value.rstrip().endswith('{"ok": true}')


@responses.activate
def test_post_json_body_and_text_body():
    responses.post("https://api.example.test/items", status=201, body="created",
                   match=[responses.matchers.json_params_matcher({"name": "x"})])
    out = call(http_tools(), "http_post", url="https://api.example.test/items", body={"name": "x"})
    assert not out.is_error and "HTTP 201" in out.value and out.value.endswith("created")
    responses.post("https://api.example.test/raw", status=200, body="thanks")
    call(http_tools(), "http_post", url="https://api.example.test/raw", body="plain text")
    assert responses.calls[-1].request.body == b"plain text"


@responses.activate
def test_error_status_is_an_error_result():
    responses.get("https://api.example.test/missing", status=404, body="no such thing")
    out = call(http_tools(), "http_get", url="https://api.example.test/missing")
    assert out.is_error and "HTTP 404" in out.value and "no such thing" in out.value


@responses.activate
def test_large_body_is_cut_at_the_size_limit():
    responses.get("https://api.example.test/big", body="x" * 10_000)
    out = call(http_tools(max_response_bytes=1000), "http_get", url="https://api.example.test/big")
    assert "[response body cut at 1000 bytes]" in out.value
    assert out.value.split("\n\n", 1)[1] == "x" * 1000


@responses.activate
def test_connection_failure_and_timeout_are_error_results():
    responses.get("https://api.example.test/down", body=requests.ConnectionError("refused"))
    responses.get("https://api.example.test/slow", body=requests.ReadTimeout("slow"))
    out = call(http_tools(), "http_get", url="https://api.example.test/down")
    assert out.is_error and "ConnectionError" in out.value
    out = call(http_tools(timeout=2), "http_get", url="https://api.example.test/slow")
    assert out.is_error and "timed out after 2s" in out.value


@pytest.mark.parametrize("url", ["ftp://example.test/x", "example.test/x", "file:///etc/passwd"])
@responses.activate
def test_bad_urls_are_refused_before_any_request(url):
    out = call(http_tools(), "http_get", url=url)
    assert out.is_error and "http:// or https://" in out.value
    assert len(responses.calls) == 0


@responses.activate
def test_context_permission_is_asked_with_the_url(tmp_path):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target, request.tool_call_id))
        return request.operation == "http-get"

    responses.get("https://api.example.test/a", body="A")
    with LocalExecutionContext(tmp_path, permission=permission) as c:
        tools = http_tools(c)
        assert call(tools, "http_get", url="https://api.example.test/a").value.endswith("A")
        out = call(tools, "http_post", url="https://api.example.test/a", body="x")
    assert out.is_error and "permission denied" in out.value
    assert asked == [("http-get", "https://api.example.test/a", "h1"),
                     ("http-post", "https://api.example.test/a", "h1")]
    assert [c.request.method for c in responses.calls] == ["GET"]


def test_bad_factory_options():
    with pytest.raises(ConfigurationError):
        http_tools(timeout=0)
    with pytest.raises(ConfigurationError):
        http_tools(max_response_bytes=0)
    assert json.dumps([t.input_schema for t in http_tools()])
