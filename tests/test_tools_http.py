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


@responses.activate
def test_every_redirect_hop_is_checked_and_asked_for(tmp_path):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target))
        return "169.254.169.254" not in request.target

    responses.get("https://api.example.test/moved", status=302, headers={"Location": "/new"})
    responses.get("https://api.example.test/new", body="here")
    responses.get("https://api.example.test/sneaky", status=302,
                  headers={"Location": "http://169.254.169.254/latest/meta-data"})
    responses.get("http://169.254.169.254/latest/meta-data", body="secret-token")
    responses.get("https://api.example.test/local", status=301, headers={"Location": "file:///etc/passwd"})
    with LocalExecutionContext(tmp_path, permission=permission) as c:
        tools = http_tools(c)
        out = call(tools, "http_get", url="https://api.example.test/moved")
        assert not out.is_error and "(redirected to https://api.example.test/new)" in out.value
        assert out.value.endswith("here")
        out = call(tools, "http_get", url="https://api.example.test/sneaky")
        assert out.is_error and "permission denied" in out.value and "secret-token" not in out.value
        out = call(tools, "http_get", url="https://api.example.test/local")
        assert out.is_error and "http:// or https://" in out.value
    assert ("http-get", "https://api.example.test/new") in asked
    assert ("http-get", "http://169.254.169.254/latest/meta-data") in asked
    assert "http://169.254.169.254/latest/meta-data" not in [c.request.url for c in responses.calls]


@responses.activate
def test_redirects_drop_credentials_across_hosts_and_turn_a_post_into_a_get_on_303():
    responses.post("https://api.example.test/submit", status=303,
                   headers={"Location": "https://other.example.test/result"})
    responses.get("https://other.example.test/result", body="done")
    out = call(http_tools(), "http_post", url="https://api.example.test/submit", body={"a": 1},
               headers={"Authorization": "Bearer s3cret", "X-Trace": "t1"})
    assert not out.is_error and out.value.endswith("done")
    follow = responses.calls[-1].request
    assert follow.method == "GET" and not follow.body
    assert "Authorization" not in follow.headers and follow.headers["X-Trace"] == "t1"


@responses.activate
def test_redirect_loops_stop_at_the_limit():
    responses.get("https://api.example.test/loop", status=302, headers={"Location": "/loop"})
    out = call(http_tools(max_redirects=3), "http_get", url="https://api.example.test/loop")
    assert out.is_error and "more than 3 redirects" in out.value
    assert len(responses.calls) == 4


@responses.activate
def test_a_body_without_a_charset_is_read_as_utf8():
    responses.get("https://api.example.test/text", body="héllo €".encode(), content_type="text/plain")
    responses.get("https://api.example.test/latin", body="héllo".encode("latin-1"),
                  content_type="text/plain; charset=ISO-8859-1")
    assert call(http_tools(), "http_get", url="https://api.example.test/text").value.endswith("héllo €")
    assert call(http_tools(), "http_get", url="https://api.example.test/latin").value.endswith("héllo")


@responses.activate
def test_a_binary_body_is_described_not_dumped():
    responses.get("https://api.example.test/logo.png", body=b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(4000),
                  content_type="image/png")
    out = call(http_tools(), "http_get", url="https://api.example.test/logo.png")
    assert not out.is_error and "content-type: image/png" in out.value
    assert out.value.endswith("[binary body of 4010 bytes, not shown]")
