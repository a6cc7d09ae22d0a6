"""LangChain adapters: reuse LangChain tools, message histories and chat models in
agentkit, and take agentkit tools and histories back to LangChain.

Needs the ``langchain`` extra (``langchain-core``; ``pip install 'sync-agentkit[langchain]'``).
Importing this module does not import LangChain; each function does, and raises
:class:`~agentkit.errors.MissingDependencyError` naming the extra when it is missing.

* tools: :func:`from_langchain_tool`, :func:`from_langchain_tools`,
  :func:`to_langchain_tool` (``run_agent(tools=[lc_tool])`` adapts LangChain tools on
  the fly);
* messages: :func:`messages_from_langchain`, :func:`messages_to_langchain`,
  :func:`events_from_langchain` (a Session's starting events);
* models: :class:`LangChainChatModel`.
"""

from __future__ import annotations

from .chat_model import LangChainChatModel
from .messages import LangChainHistory, events_from_langchain, messages_from_langchain, messages_to_langchain
from .tools import Injected, from_langchain_tool, from_langchain_tools, to_langchain_tool

__all__ = [
    "Injected",
    "LangChainChatModel",
    "LangChainHistory",
    "events_from_langchain",
    "from_langchain_tool",
    "from_langchain_tools",
    "messages_from_langchain",
    "messages_to_langchain",
    "to_langchain_tool",
]
