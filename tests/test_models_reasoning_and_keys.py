"""Reasoning settings, reasoning-token usage and per-request API keys, for the OpenAI and
Anthropic adapters over the real SDKs against the loopback fakes (which check
``reasoning_effort`` and ``output_config.effort`` like the real APIs)."""

from __future__ import annotations

import itertools

import pytest
from fakes import anthropic_wire as aw
from fakes import openai_wire as ow

from agentkit import AuthenticationError, ConfigurationError, ProviderError, run_agent
from agentkit.messages import Message
from agentkit.models import ModelRequest, ModelSettings, RetryPolicy, UsageEvent
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.openai import OpenAIChatModel

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)


@pytest.fixture
def oserver(openai_server):
    return openai_server


@pytest.fixture
def aserver(anthropic_server):
    return anthropic_server


def req(**settings) -> ModelRequest:
    return ModelRequest(messages=(Message.user("hi"),), settings=ModelSettings(**settings))


def sent_key(headers: dict[str, str]) -> str:
    """The key a request carried (x-api-key, or a bearer token)."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


# -- ModelSettings ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["extreme", "HIGH", "", 3])
def test_reasoning_effort_is_validated(bad):
    with pytest.raises(ConfigurationError, match="reasoning_effort must be 'low', 'medium' or 'high'"):
        ModelSettings(reasoning_effort=bad)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_reasoning_budget_is_validated(bad):
    with pytest.raises(ConfigurationError, match="reasoning_budget must be a positive int"):
        ModelSettings(reasoning_budget=bad)


# -- OpenAI ----------------------------------------------------------------------------


def test_openai_sends_reasoning_effort_and_reads_reasoning_tokens(oserver):
    oserver.add(ow.text_stream("42", usage_=ow.usage(prompt=9, completion=40, reasoning=32)))
    model = OpenAIChatModel("o4-mini", base_url=oserver.url + "/v1", retry=FAST)
    result = run_agent(model, "think", settings=ModelSettings(reasoning_effort="high"))
    assert oserver.bodies[0]["reasoning_effort"] == "high"
    assert result.usage.reasoning_tokens == 32
    assert result.usage.output_tokens == 40
    assert result.usage.to_dict()["reasoning_tokens"] == 32


def test_openai_reasoning_effort_on_a_model_without_reasoning_is_the_apis_error(oserver):
    # the fake answers as the API does; the adapter passes the error on, named
    oserver.add(ow.text_stream("never"))
    model = OpenAIChatModel("gpt-4.1-mini", base_url=oserver.url + "/v1", retry=FAST)
    with pytest.raises(ProviderError, match="reasoning_effort' is not supported with this model"):
        list(model.stream(req(reasoning_effort="low")))


def test_openai_refuses_reasoning_budget_before_sending(oserver):
    model = OpenAIChatModel("o4-mini", base_url=oserver.url + "/v1", retry=FAST)
    with pytest.raises(ConfigurationError, match="reasoning_budget.*reasoning_effort="):
        list(model.stream(req(reasoning_budget=4096)))
    assert oserver.requests == []


def test_openai_provider_options_still_win_over_reasoning_effort(oserver):
    oserver.add(ow.text_stream("ok"))
    model = OpenAIChatModel("o3", base_url=oserver.url + "/v1", retry=FAST)
    request = ModelRequest(messages=(Message.user("hi"),), settings=ModelSettings(reasoning_effort="low"),
                           provider_options={"reasoning_effort": "minimal"})
    list(model.stream(request))
    assert oserver.bodies[0]["reasoning_effort"] == "minimal"


def test_openai_callable_api_key_is_resolved_before_every_request_and_retry(oserver):
    keys = (f"sk-token-{n}" for n in itertools.count(1))
    calls = []

    def fresh_key() -> str:
        calls.append(1)
        return next(keys)

    oserver.add(ow.error(500, "try again", type_="server_error"), ow.text_stream("a"), ow.text_stream("b"))
    model = OpenAIChatModel("gpt-4.1-mini", base_url=oserver.url + "/v1", api_key=fresh_key, retry=FAST)
    list(model.stream(req()))  # a 500, then a retry
    list(model.stream(req()))
    assert [sent_key(r.headers) for r in oserver.requests] == ["sk-token-1", "sk-token-2", "sk-token-3"]
    assert len(calls) == 3
    assert all("agentkit-resolves" not in str(r.headers) for r in oserver.requests)


def test_a_failing_api_key_callable_sends_nothing(oserver):
    def broken() -> str:
        raise RuntimeError("vault sealed")

    model = OpenAIChatModel("gpt-4.1-mini", base_url=oserver.url + "/v1", api_key=broken, retry=FAST)
    with pytest.raises(AuthenticationError, match="api_key callable.*RuntimeError: vault sealed"):
        list(model.stream(req()))
    empty = OpenAIChatModel("gpt-4.1-mini", base_url=oserver.url + "/v1", api_key=lambda: "", retry=FAST)
    with pytest.raises(AuthenticationError, match="must return a non-empty str"):
        list(empty.stream(req()))
    assert oserver.requests == []


def test_api_key_of_the_wrong_type_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="api_key must be a str or a callable"):
        OpenAIChatModel("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key=42)  # type: ignore[arg-type]


# -- Anthropic -------------------------------------------------------------------------


def test_anthropic_maps_reasoning_effort_to_output_config(aserver):
    aserver.add(aw.stream(aw.text("ok")))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key="sk-ant", retry=FAST)
    list(model.stream(req(reasoning_effort="medium")))
    assert aserver.bodies[0]["output_config"] == {"effort": "medium"}
    assert "thinking" not in aserver.bodies[0]


def test_anthropic_reasoning_effort_merges_with_provider_output_config(aserver):
    aserver.add(aw.stream(aw.text("ok")))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key="sk-ant", retry=FAST)
    request = ModelRequest(messages=(Message.user("hi"),), settings=ModelSettings(reasoning_effort="low"),
                           provider_options={"output_config": {"effort": "max"}})
    list(model.stream(request))
    assert aserver.bodies[0]["output_config"] == {"effort": "max"}  # explicit options win


def test_anthropic_thinking_budget_with_effort_and_thinking_tokens(aserver):
    aserver.add(aw.stream(aw.thinking("hmm", "sig-1"), aw.text("done"), output_tokens=300, thinking_tokens=250))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key="sk-ant", retry=FAST)
    events = list(model.stream(req(reasoning_budget=2048, reasoning_effort="high")))
    body = aserver.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["output_config"] == {"effort": "high"}
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (usage.output_tokens, usage.reasoning_tokens) == (300, 250)


def test_anthropic_without_thinking_tokens_reports_zero(aserver):
    aserver.add(aw.stream(aw.text("ok"), output_tokens=5))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key="sk-ant", retry=FAST)
    (usage,) = [e.usage for e in model.stream(req()) if isinstance(e, UsageEvent)]
    assert usage.reasoning_tokens == 0


def test_anthropic_fake_rejects_an_unknown_effort(aserver):
    aserver.add(aw.stream(aw.text("never")))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key="sk-ant", retry=FAST)
    request = ModelRequest(messages=(Message.user("hi"),), provider_options={"output_config": {"effort": "huge"}})
    with pytest.raises(ProviderError, match="output_config.effort"):
        list(model.stream(request))


def test_anthropic_callable_api_key_changes_between_requests(aserver):
    keys = iter(["sk-ant-a", "sk-ant-b"])
    aserver.add(aw.stream(aw.text("1")), aw.stream(aw.text("2")))
    model = AnthropicModel("claude-fake-1", base_url=aserver.url, api_key=lambda: next(keys), retry=FAST)
    list(model.stream(req()))
    list(model.stream(req()))
    assert [sent_key(r.headers) for r in aserver.requests] == ["sk-ant-a", "sk-ant-b"]
    # one auth header, not the placeholder next to the real key
    assert all("agentkit-resolves" not in str(r.headers) for r in aserver.requests)


def test_callable_api_key_with_client_is_refused():
    import anthropic

    client = anthropic.Anthropic(api_key="sk-ant", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="either client= or api_key="):
        AnthropicModel("claude-fake-1", client=client, api_key=lambda: "k")
