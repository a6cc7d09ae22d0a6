"""The agent loop against a real model endpoint (skipped unless one is configured).

* ``AGENTKIT_LIVE_OPENAI_BASE_URL`` (+ ``AGENTKIT_LIVE_MODEL``): any OpenAI-compatible
  server, e.g. ``http://127.0.0.1:11434/v1`` for Ollama.
* ``OPENAI_API_KEY``: OpenAI (model from ``AGENTKIT_LIVE_OPENAI_MODEL``, default
  ``gpt-4.1-mini``).
* ``ANTHROPIC_API_KEY``: Anthropic (model from ``AGENTKIT_LIVE_ANTHROPIC_MODEL``, default
  ``claude-sonnet-4-5``).

Answers of real models vary, so these tests assert mechanics only: the loop finishes,
the tool was called with parseable arguments and its results match, usage is reported.
Never the wording.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from agentkit import run_agent, tool
from agentkit.models import ChatModel, ModelSettings, RetryPolicy

pytestmark = pytest.mark.live

def _compatible() -> ChatModel:
    from agentkit.models.openai import OpenAIChatModel

    return OpenAIChatModel(
        os.environ.get("AGENTKIT_LIVE_MODEL", "llama3.2"),
        base_url=os.environ["AGENTKIT_LIVE_OPENAI_BASE_URL"],
        api_key=os.environ.get("AGENTKIT_LIVE_API_KEY"),
        retry=RetryPolicy(max_retries=2),
    )


def _openai() -> ChatModel:
    from agentkit.models.openai import OpenAIChatModel

    return OpenAIChatModel(os.environ.get("AGENTKIT_LIVE_OPENAI_MODEL", "gpt-4.1-mini"), base_url=None)


def _anthropic() -> ChatModel:
    from agentkit.models.anthropic import AnthropicModel

    return AnthropicModel(os.environ.get("AGENTKIT_LIVE_ANTHROPIC_MODEL", "claude-sonnet-4-5"))


ENDPOINTS: dict[str, tuple[str, Callable[[], ChatModel]]] = {
    "openai-compatible": ("AGENTKIT_LIVE_OPENAI_BASE_URL", _compatible),
    "openai": ("OPENAI_API_KEY", _openai),
    "anthropic": ("ANTHROPIC_API_KEY", _anthropic),
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers and return the sum.

    Args:
        a: the first addend
        b: the second addend
    """
    return a + b


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_live_agent_loop_with_a_tool(endpoint):
    env, factory = ENDPOINTS[endpoint]
    if not os.environ.get(env):
        pytest.skip(f"{env} is not set")
    tokens: list[str] = []
    result = run_agent(
        factory(),
        "Use the add tool to add 19 and 23, then answer with the sum.",
        system="You are a careful assistant. Use tools when asked to.",
        tools=[add],
        max_steps=4,
        settings=ModelSettings(max_tokens=512),
        on_token=tokens.append,
    )
    assert result.steps, "the loop ran no step"
    assert result.finish_reason == "stop", f"the loop did not finish: {result.finish_reason}"
    assert result.usage.output_tokens > 0
    assert result.tool_calls, "the model never called the tool"
    for record in result.tool_calls:
        assert record.tool_name == "add"
    parsed = [r for r in result.tool_calls if isinstance(r.input, dict) and not r.is_error]
    assert parsed, f"no tool call had parseable arguments: {[r.input for r in result.tool_calls]}"
    for record in parsed:
        assert record.output.value == record.input["a"] + record.input["b"]
    # every step's text arrived through on_token as it streamed
    assert "".join(tokens) == "".join(step.text for step in result.steps)
