"""Error messages a new user meets: each says what was wrong and what to do, in the
caller's terms."""

from __future__ import annotations

import logging

import pytest
from _procs import free_port

from agentkit import (
    ApprovalPolicy,
    ConfigurationError,
    ProviderUnavailableError,
    ScriptedModel,
    ToolCall,
    get_model,
    run_agent,
    run_agent_stream,
    tool,
)
from agentkit.models import RetryPolicy


@pytest.mark.parametrize(("spec", "meant"), [
    ("gpt-4o", "openai:gpt-4o"), ("o3-mini", "openai:o3-mini"),
    ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"), ("gpt-4o:latest", "openai:gpt-4o:latest"),
])
def test_a_bare_model_name_suggests_its_provider(spec, meant):
    with pytest.raises(ConfigurationError, match=f"did you mean '{meant}'"):
        get_model(spec)


def test_an_unknown_bare_name_gets_no_guess():
    with pytest.raises(ConfigurationError) as info:
        get_model("llama3")
    assert "did you mean" not in str(info.value) and "'<provider>:<model>'" in str(info.value)


@pytest.mark.parametrize("function", [run_agent, run_agent_stream])
def test_run_agent_without_a_model_names_run_agent(function):
    with pytest.raises(ConfigurationError) as info:
        function(None, "hi")
    message = str(info.value)
    assert message.startswith(f"{function.__name__}() needs a model") and "'openai:gpt-4.1-mini'" in message
    assert "Session" not in message and "generate()" not in message


@pytest.mark.parametrize(("provider", "env"), [("openai", "OPENAI"), ("anthropic", "ANTHROPIC")])
def test_an_unreachable_base_url_from_the_environment_is_named(monkeypatch, provider, env):
    pytest.importorskip(provider)
    url = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv(f"{env}_BASE_URL", url)
    monkeypatch.setenv(f"{env}_API_KEY", "sk-test")
    model = get_model(f"{provider}:some-model", retry=RetryPolicy(max_retries=0))
    with pytest.raises(ProviderUnavailableError) as info:
        run_agent(model, "hi")
    message = str(info.value)
    assert "could not be reached at " + url in message
    assert f"{env}_BASE_URL in the environment" in message and "base_url=" in message


class Conn:
    """A plain class: no fields pydantic could fill from JSON."""


def test_a_plain_class_as_output_type_says_which_types_are_supported():
    with pytest.raises(ConfigurationError) as info:
        run_agent(ScriptedModel(["x"]), "hi", output_type=Conn)
    message = str(info.value)
    assert "arbitrary_types_allowed" not in message and "errors.pydantic.dev" not in message
    assert message.startswith("output_type Conn cannot be validated from JSON (there is no JSON Schema for Conn)")
    assert "a pydantic model, a dataclass or a TypedDict" in message
    assert "make it a dataclass or a pydantic model" in message
    with pytest.raises(ConfigurationError, match=r"output_type list\[.*Conn\] cannot be validated"):
        run_agent(ScriptedModel(["x"]), "hi", output_type=list[Conn])


def test_run_agent_stopped_for_approval_says_so_in_the_result_and_the_log(caplog):
    @tool
    def write(text: str) -> str:
        """Write ``text``."""
        return "written"

    with caplog.at_level(logging.WARNING, logger="agentkit.session"):
        result = run_agent(ScriptedModel([ToolCall("write", {"text": "x"}), "done"]), "go", tools=[write],
                           approval=ApprovalPolicy(mode="ask-all"))
    assert result.finish_reason == "approval-required" and result.text == ""
    (record,) = [r for r in caplog.records if r.name == "agentkit.session"]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert message.startswith("run_agent() stopped with finish_reason 'approval-required'")
    assert "'write'" in message and "approver=" in message and "session.pending_approvals()" in message
