"""get_model spec strings, environment keys, missing SDKs, and spec strings in run_agent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import anthropic_wire as aw
from fakes import openai_wire as ow
from fakes.server import FakeServer

from agentkit import ConfigurationError, MissingDependencyError, ScriptedModel, Session, get_model, run_agent
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.openai import OpenAIChatModel


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def test_openai_spec_reads_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.add(ow.text_stream("hi from openai"))
    model = get_model("openai:gpt-4.1-mini")
    assert isinstance(model, OpenAIChatModel) and model.model_name == "gpt-4.1-mini"
    result = run_agent(model, "hello")
    assert result.text == "hi from openai"
    sent = server.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-from-env"
    assert sent.body["model"] == "gpt-4.1-mini"


def test_anthropic_spec_reads_the_environment(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(aw.stream(aw.text("hi from claude")))
    model = get_model("anthropic:claude-fake-1", max_tokens=321)
    assert isinstance(model, AnthropicModel)
    assert run_agent(model, "hello").text == "hi from claude"
    sent = server.requests[0]
    assert "sk-ant-from-env" in (sent.headers.get("x-api-key", ""), sent.headers.get("authorization", "")[7:])
    assert sent.body["model"] == "claude-fake-1" and sent.body["max_tokens"] == 321


def test_run_agent_and_session_accept_spec_strings(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(ow.text_stream("compat answer"), aw.stream(aw.text("claude answer")))
    assert run_agent(f"openai-compatible:llama3@{server.url}/v1", "q").text == "compat answer"
    assert server.bodies[0]["model"] == "llama3"
    with Session("anthropic:claude-fake-2") as session:
        session.push_user_message("q")
        assert session.generate().text == "claude answer"
    assert server.bodies[1]["model"] == "claude-fake-2"


def test_openai_compatible_takes_base_url_keyword(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.add(ow.text_stream("ok"))
    model = get_model("openai-compatible:qwen3", base_url=server.url + "/v1")
    assert run_agent(model, "q").text == "ok"
    assert "max_tokens" not in server.bodies[0]  # nothing set: nothing sent


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4.1-mini", "provider>:<model"),
        ("mystery:model", "unknown model provider"),
        ("openai:", "names no model"),
        ("openai-compatible:llama3", "needs a server"),
    ],
)
def test_bad_specs_are_configuration_errors(spec, message):
    with pytest.raises(ConfigurationError, match=message):
        get_model(spec)


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        get_model("openai:gpt-4.1-mini")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        get_model("anthropic:claude-sonnet-4-5")


def _distribution_name() -> str:
    """The [project] name in pyproject.toml: what `pip install` must be given."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return re.search(r'^name = "([^"]+)"', project, re.M).group(1)


def test_the_distribution_name_is_not_the_unrelated_agentkit_on_the_index():
    # "agentkit" on the package index is another project: installing it gives no agentkit
    dist = _distribution_name()
    assert dist != "agentkit"
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    everything = re.search(rf'^all = \["{re.escape(dist)}\[([a-z,-]+)\]"\]$', text, re.M)  # the extras name it
    assert everything is not None
    named = set(everything.group(1).split(","))
    assert {"openai", "anthropic", "bedrock", "gemini", "mcp", "langchain", "postgres", "otel", "celery"} <= named
    assert f'"{dist}[all]",' in text


@pytest.mark.parametrize(("provider", "package"), [("anthropic", "anthropic"), ("openai", "openai")])
def test_missing_sdk_names_the_extra(monkeypatch, provider, package):
    dist = re.escape(_distribution_name())
    monkeypatch.setitem(sys.modules, package, None)  # makes `import <package>` fail
    with pytest.raises(MissingDependencyError, match=rf"pip install '{dist}\[{package}\]'") as info:
        get_model(f"{provider}:some-model")
    assert isinstance(info.value, ImportError)
    assert f"pip install -e '.[{package}]'" in str(info.value)  # in a checkout
    assert "'agentkit[" not in str(info.value)
    import agentkit.models as models

    name = "AnthropicModel" if provider == "anthropic" else "OpenAIChatModel"
    with pytest.raises(MissingDependencyError, match=rf"pip install '{dist}\[{package}\]'"):
        getattr(models, name)


@pytest.mark.parametrize(
    ("package", "extra", "build"),
    [
        ("mcp", "mcp", lambda: __import__("agentkit.mcp", fromlist=["x"]).connect_mcp({})),
        ("langchain_core", "langchain", lambda: __import__("agentkit.adapters.langchain", fromlist=["x"])
         .LangChainChatModel(object())),
        ("psycopg", "postgres", lambda: __import__("agentkit.stores.postgres", fromlist=["x"])),
        ("psycopg_pool", "postgres", lambda: __import__("agentkit.stores.postgres", fromlist=["x"])),
        ("celery", "celery", lambda: __import__("agentkit.celery", fromlist=["x"])),
    ],
)
def test_every_missing_extra_names_the_distribution(monkeypatch, package, extra, build):
    monkeypatch.setitem(sys.modules, package, None)
    for module in ("agentkit.stores.postgres", "agentkit.stores._pg", "agentkit.stores._pg_jobs",
                   "agentkit.stores._pg_wait", "agentkit.celery", "agentkit.celery._app"):
        monkeypatch.delitem(sys.modules, module, raising=False)  # imported afresh, without the package
    with pytest.raises(MissingDependencyError) as info:
        build()
    assert f"pip install '{_distribution_name()}[{extra}]'" in str(info.value)


def test_scripted_spec():
    model = get_model("scripted:any", turns=["hello"])
    assert isinstance(model, ScriptedModel)
    assert run_agent(model, "hi").text == "hello"


def test_importing_agentkit_does_not_import_the_sdks():
    code = (
        "import sys, agentkit, agentkit.models\n"
        "from agentkit.models import RetryPolicy\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "assert 'anthropic' not in sys.modules, 'anthropic imported'\n"
        "agentkit.models.OpenAIChatModel\n"
        "assert 'openai' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_openai_key_from_the_environment_is_not_sent_to_other_servers(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai-key")
    server.add(ow.text_stream("a"), ow.text_stream("b"))
    run_agent(f"openai-compatible:m@{server.url}/v1", "q")
    assert "sk-secret-openai-key" not in server.requests[0].headers.get("authorization", "")
    run_agent(get_model("openai-compatible:m", base_url=server.url + "/v1", api_key="sk-local"), "q")
    assert server.requests[1].headers["authorization"] == "Bearer sk-local"


def test_compatible_model_names_may_hold_an_at_sign(server):
    server.add(ow.text_stream("a"), ow.text_stream("b"))
    model = get_model("openai-compatible:@cf/meta/llama-3.1-8b-instruct", base_url=server.url + "/v1")
    assert run_agent(model, "q").text == "a"
    assert server.bodies[0]["model"] == "@cf/meta/llama-3.1-8b-instruct"
    assert run_agent(f"openai-compatible:@cf/meta/llama@{server.url}/v1", "q").text == "b"
    assert server.bodies[1]["model"] == "@cf/meta/llama"


def test_two_different_servers_in_one_spec_are_a_configuration_error():
    with pytest.raises(ConfigurationError, match="give the server once"):
        get_model("openai-compatible:m@http://127.0.0.1:1/v1", base_url="http://127.0.0.1:2/v1")
    with pytest.raises(ConfigurationError, match="names no model"):
        get_model("openai-compatible:@http://127.0.0.1:1/v1")
