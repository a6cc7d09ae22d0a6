"""Redaction: secrets in tool inputs, tool outputs and runtime event data are replaced
before they are committed (the store and the model see only ``[redacted]``), while the
tool still gets the real input; http_tools never records credential header values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_tools_http import Site

from agentkit import (
    ApprovalPolicy,
    ConfigurationError,
    FileEventStore,
    HookError,
    ScriptedModel,
    Session,
    ToolCall,
    http_tools,
    run_agent,
    tool,
)
from agentkit.session import Redactor, redactor_of

SECRET = "sk-live4242abcd"


def stored_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def all_request_text(model: ScriptedModel) -> str:
    return " ".join(repr(r.messages) for r in model.requests)


def test_a_secret_in_a_tool_input_and_output_never_reaches_the_store_or_the_model(tmp_path):
    received: list[str] = []

    @tool
    def login(user: str, token: str) -> str:
        """Log in."""
        received.append(token)
        return f"logged in {user} with {token}"

    model = ScriptedModel([ToolCall("login", {"user": "ann", "token": SECRET}), "done"])
    records = []
    with Session.open("r1", store=FileEventStore(tmp_path / "store"), model=model, tools=[login],
                      redact=[r"sk-[a-z0-9]+"], on_tool_call_finish=records.append) as s:
        s.push_user_message("log in")
        result = s.generate()
    assert received == [SECRET]  # the tool got the real value
    assert SECRET not in stored_text(tmp_path / "store")
    assert "[redacted]" in stored_text(tmp_path / "store")
    assert SECRET not in all_request_text(model)  # the model's next request saw the redacted form
    (call,) = result.tool_calls
    assert call.input == {"user": "ann", "token": "[redacted]"}
    assert call.output.value == "logged in ann with [redacted]" and records[0].output == call.output


def test_runtime_event_data_is_redacted_with_the_session_option(tmp_path):
    with Session.open("r2", store=FileEventStore(tmp_path / "store"), redact=re.compile(r"pw=\S+")) as s:
        event = s.push_runtime_event("deploy-finished", {"log": ["ok", {"cmd": "login pw=hunter2 now"}]})
    assert event.data == {"log": ["ok", {"cmd": "login [redacted] now"}]}
    assert "hunter2" not in stored_text(tmp_path / "store")


def test_a_callable_runs_after_the_patterns():
    def mask_emails(text: str) -> str:
        return re.sub(r"\S+@\S+", "<email>", text)

    @tool
    def whois(name: str) -> dict:
        """Look someone up."""
        return {"name": name, "contact": "ann@example.org", "key": SECRET, "n": 3}

    model = ScriptedModel([ToolCall("whois", {"name": "ann"}), "ok"])
    result = run_agent(model, "who", tools=[whois], redact=[r"sk-\w+", mask_emails])
    assert result.tool_calls[0].output.value == {"name": "ann", "contact": "<email>", "key": "[redacted]", "n": 3}


def test_a_call_waiting_for_approval_is_recorded_redacted(tmp_path):
    @tool
    def send(to: str, key: str) -> str:
        """Send."""
        return "sent"

    model = ScriptedModel([ToolCall("send", {"to": "bob", "key": SECRET}), "ok"])
    with Session(model, tools=[send], approval=ApprovalPolicy(mode="ask-all"), redact=r"sk-\w+") as s:
        s.push_user_message("send")
        s.generate()
        (pending,) = s.pending_approvals()
        assert pending.input == {"to": "bob", "key": "[redacted]"}
        assert SECRET not in repr(s.events)


def test_http_get_never_records_credential_headers_but_sends_them(tmp_path):
    site = Site()
    site.routes["/me"] = (200, {"Content-Type": "text/plain"}, b"you are ann")
    try:
        headers = {"Authorization": "Bearer tok-9f8e7d", "x-api-key": "key-1a2b3c", "Cookie": "sid=cookie-55aa",
                   "Proxy-Authorization": "Basic prx-7777", "Accept": "text/plain"}
        model = ScriptedModel([ToolCall("http_get", {"url": site.url("/me"), "headers": headers}), "ok"])
        events = []
        with Session.open("h1", store=FileEventStore(tmp_path / "store"), model=model,
                          tools=http_tools(allow_private_networks=True)) as s:
            s.push_user_message("who am I")
            with s.stream() as stream:
                events = [e.to_dict() for e in stream]
            result = stream.result
    finally:
        site.close()
    seen = site.seen[0].headers
    assert seen["Authorization"] == "Bearer tok-9f8e7d" and seen["x-api-key"] == "key-1a2b3c"  # sent
    assert seen["Cookie"] == "sid=cookie-55aa" and seen["Proxy-Authorization"] == "Basic prx-7777"
    recorded = result.tool_calls[0].input["headers"]
    assert recorded == {"Authorization": "[redacted]", "x-api-key": "[redacted]", "Cookie": "[redacted]",
                        "Proxy-Authorization": "[redacted]", "Accept": "text/plain"}
    assert "you are ann" in result.tool_calls[0].output.value
    everything = stored_text(tmp_path / "store") + repr(events) + all_request_text(model)
    for value in ("tok-9f8e7d", "key-1a2b3c", "cookie-55aa", "prx-7777"):
        assert value not in everything


def test_redaction_walks_any_depth_without_recursion():
    redactor = redactor_of(r"sk-\w+")
    assert isinstance(redactor, Redactor)
    deep: object = SECRET
    for _ in range(5000):
        deep = [deep]
    out = redactor.value(deep)
    for _ in range(5000):
        out = out[0]
    assert out == "[redacted]"


@pytest.mark.parametrize(
    ("spec", "message"),
    [("(", "not a valid regex"), ("", "empty pattern"), ([42], "redact items must be"),
     (re.compile(b"x"), "str patterns"), (3.5, "redact must be")],
)
def test_a_bad_redact_option_is_a_configuration_error(spec, message):
    with pytest.raises(ConfigurationError, match=message):
        Session(ScriptedModel(["x"]), redact=spec)


def test_a_failing_redact_callable_is_a_hook_error():
    def broken(text: str) -> str:
        raise ValueError("boom")

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    with pytest.raises(HookError, match=r"the redact callable '.*broken' raised ValueError: boom"):
        run_agent(ScriptedModel([ToolCall("echo", {"text": "x"}), "ok"]), "go", tools=[echo], redact=broken)
