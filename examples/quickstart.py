"""agentkit quickstart: a tool-using agent in a plain synchronous script.

Runs on a real provider when one is configured, otherwise on a ScriptedModel:
  AGENTKIT_MODEL=openai:gpt-4.1-mini        (any get_model spec), or
  OPENAI_API_KEY / ANTHROPIC_API_KEY in the environment.
If the provider's extra is not installed, the first line says so and the ScriptedModel runs.
"""

from __future__ import annotations

import sys

from _pick_model import pick_model

from agentkit import ScriptedModel, ToolCall, run_agent, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def choose_model():
    """A real model when one is configured, else a scripted one. Returns (model, label)."""
    scripted = ScriptedModel(
        [
            [ToolCall("add", {"a": 7, "b": 35}), ToolCall("multiply", {"a": 6, "b": 9})],
            lambda request: (
                "7 + 35 = {} and 6 x 9 = {}.".format(
                    *(p.output.value for p in request.messages[-1].content)
                )
            ),
        ]
    )
    return pick_model(scripted)


def main() -> int:
    model, label = choose_model()
    print(f"model: {label}")
    result = run_agent(
        model,
        "What is 7 + 35, and what is 6 times 9? Use the tools.",
        system="You are a careful assistant. Use the tools for arithmetic.",
        tools=[add, multiply],
        on_tool_call_finish=lambda call: print(f"  tool {call.tool_name}({call.input}) -> {call.output.as_text()}"),
    )
    print(f"answer: {result.text}")
    print(f"steps: {len(result.steps)}, tool calls: {len(result.tool_calls)}, tokens: {result.usage.total_tokens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
