"""The front door's conversions: foreign objects in, agentkit objects out (private).

``run_agent`` and :class:`~agentkit.Session` accept what a user already has -- a model
spec string, a LangChain chat model, LangChain tools and toolkits, a LangChain message
history -- and turn it into agentkit's own types here, before anything else sees it. The
ports below (``ChatModel``, ``Tool``) never import an adapter.

LangChain objects are recognised by their classes' names and modules, so this module
imports ``langchain_core`` only when it meets one; a conversion that fails raises an
error naming the adapter function that was tried, so the user can call it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from ..errors import AgentkitError, ConfigurationError, MissingDependencyError, ToolDefinitionError
from ..messages import Message
from ..models.base import ChatModel
from ..tools.base import Tool, coerce_tool

__all__ = ["history_from", "model_from", "tools_from"]


def _is_langchain(obj: object, *class_names: str) -> bool:
    """True when ``obj`` is an instance of one of LangChain's ``class_names``."""
    return any(
        c.__name__ in class_names and c.__module__.startswith("langchain_core")
        for c in type(obj).__mro__
    )


def _adapted(fn: Callable[[], Any], what: str, adapter: str, error: type[AgentkitError]) -> Any:
    """Run one adapter call; an agentkit error it raises is re-raised naming it."""
    try:
        return fn()
    except MissingDependencyError:
        raise
    except AgentkitError as exc:
        raise error(
            f"could not convert {what} with agentkit.adapters.langchain.{adapter}: {exc}. "
            f"Call {adapter} yourself to pass options, or convert the object first."
        ) from exc


def model_from(model: object) -> ChatModel | None:
    """A ChatModel for ``model``: a spec string, a ChatModel, or a LangChain chat model
    (wrapped in ``LangChainChatModel``); None stays None."""
    if model is None:
        return None
    if isinstance(model, str):
        from ..models.registry import get_model

        return get_model(model)
    if _is_langchain(model, "BaseChatModel", "BaseLanguageModel"):
        from ..adapters.langchain import LangChainChatModel

        return _adapted(  # type: ignore[no-any-return]
            lambda: LangChainChatModel(model),  # type: ignore[arg-type]
            f"the LangChain model {type(model).__name__} passed as model=",
            "LangChainChatModel",
            ConfigurationError,
        )
    if isinstance(model, ChatModel):
        return model
    raise ConfigurationError(
        f"model must be a ChatModel (with a stream(request) method), a spec string like "
        f"'openai:gpt-4.1-mini', or a LangChain chat model, not {type(model).__name__}"
    )


def tools_from(tools: object) -> list[Tool]:
    """``tools=`` as agentkit Tools: Tools and plain functions as they are (functions
    through ``@tool``), LangChain tools through ``from_langchain_tool``, and LangChain
    toolkits (alone or in the list) through ``from_langchain_tools``."""
    if tools is None:
        return []
    items: list[Any]
    if isinstance(tools, Tool) or _is_toolkit(tools) or _is_langchain(tools, "BaseTool"):
        items = [tools]  # one tool or toolkit instead of a list (a pydantic model iterates)
    elif isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ToolDefinitionError(
            f"tools= must be a list of tools (agentkit Tools, @tool functions, LangChain "
            f"tools or toolkits), not {type(tools).__name__}"
        )
    else:
        items = list(tools)
    out: list[Tool] = []
    for item in items:
        if isinstance(item, Tool):
            out.append(item)
        elif _is_toolkit(item):
            from ..adapters.langchain import from_langchain_tools

            out.extend(_adapted(
                partial(from_langchain_tools, item),
                f"the LangChain toolkit {type(item).__name__} passed in tools=",
                "from_langchain_tools",
                ToolDefinitionError,
            ))
        elif _is_langchain(item, "BaseTool"):
            from ..adapters.langchain import from_langchain_tool

            out.append(_adapted(
                partial(from_langchain_tool, item),
                f"the LangChain tool {getattr(item, 'name', type(item).__name__)!r} passed in tools=",
                "from_langchain_tool",
                ToolDefinitionError,
            ))
        else:
            out.append(coerce_tool(item))
    return out


def _is_toolkit(obj: object) -> bool:
    return _is_langchain(obj, "BaseToolkit")


def history_from(messages: Sequence[Any] | None) -> list[Message]:
    """``messages=`` as agentkit messages: agentkit Messages as they are, a LangChain
    history (BaseMessage objects) through ``messages_from_langchain``."""
    if messages is None:
        return []
    if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Iterable):
        raise ConfigurationError(
            f"messages= must be a list of Message objects (a previous result.messages) or of "
            f"LangChain messages, not {type(messages).__name__}"
        )
    items = list(messages)
    if any(_is_langchain(m, "BaseMessage") for m in items):
        from ..adapters.langchain import messages_from_langchain

        return _adapted(  # type: ignore[no-any-return]
            lambda: messages_from_langchain(items),
            "the LangChain history passed as messages=",
            "messages_from_langchain",
            ConfigurationError,
        )
    bad = next((m for m in items if not isinstance(m, Message)), None)
    if bad is not None:
        raise ConfigurationError(
            f"messages= holds a {type(bad).__name__}; give agentkit Message objects (a previous "
            f"result.messages) or LangChain messages"
        )
    return items
