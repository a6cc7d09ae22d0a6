"""The examples' one way to pick a model: a real provider when one is configured, else
the scripted model the example brings.

A provider is configured by ``AGENTKIT_MODEL`` (any ``get_model`` spec) or by
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` in the environment. When the provider's extra
is not installed, the example says so in one line and runs on its scripted model.
"""

from __future__ import annotations

import os

from agentkit import MissingDependencyError, get_model
from agentkit.models import ChatModel


def configured_spec() -> str | None:
    """The model spec the environment asks for, if any."""
    spec = os.environ.get("AGENTKIT_MODEL")
    if spec:
        return spec
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    return None


def pick_model(scripted: ChatModel) -> tuple[ChatModel, str]:
    """(model, label): the configured real model, else ``scripted``. The label says
    which one runs and, for the scripted one, why."""
    spec = configured_spec()
    if not spec:
        return scripted, "ScriptedModel (no provider configured: set AGENTKIT_MODEL or an API key)"
    try:
        return get_model(spec), spec
    except MissingDependencyError as exc:
        return scripted, f"ScriptedModel, not {spec}: {exc}"
