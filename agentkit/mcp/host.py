"""What an MCP server may ask of the host, and what the host's catalog calls return.

Servers can ask the client for three things besides answering tool calls: the
directories it may use (``roots/list``), an LLM completion (``sampling/createMessage``)
and information from the user (``elicitation/create``). These frozen dataclasses are what
the host's handlers receive and return; they hold no mcp SDK types, so handlers are plain
Python. :class:`McpResource`, :class:`McpPrompt` and :class:`McpPromptArgument` describe
the entries of :meth:`McpToolset.list_resources` and :meth:`McpToolset.list_prompts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from ..messages import Message


@dataclass(frozen=True, kw_only=True)
class SamplingRequest:
    """A server's ``sampling/createMessage``: it asks the host's model for a reply."""

    server: str
    """The name of the asking server (as given to :func:`~agentkit.mcp.connect_mcp`)."""
    messages: tuple[Message, ...]
    """The conversation to complete (user and assistant messages)."""
    max_tokens: int
    """The most tokens the reply may use (``maxTokens``; the shipped handler passes it to
    the model as ``ModelSettings.max_tokens``)."""
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model_hints: tuple[str, ...] = ()
    """Model names the server would prefer, best first (advice only)."""
    metadata: Mapping[str, Any] | None = None
    """Provider-specific metadata the server sent, passed through unchanged."""


@dataclass(frozen=True, kw_only=True)
class SamplingResult:
    """The host's reply to a :class:`SamplingRequest`."""

    text: str
    """The assistant's text."""
    model: str = "agentkit"
    """The name of the model that wrote it."""
    stop_reason: str | None = "endTurn"
    """``endTurn``, ``maxTokens``, ``stopSequence`` (or another string, or None)."""


@dataclass(frozen=True, kw_only=True)
class ElicitationRequest:
    """A server's ``elicitation/create``: it asks the user for information."""

    server: str
    """The name of the asking server."""
    message: str
    """What to show the user."""
    mode: Literal["form", "url"] = "form"
    """``form``: answer with ``content`` matching ``requested_schema``; ``url``: the user
    should visit ``url`` (answer accept/decline/cancel without content)."""
    requested_schema: Mapping[str, Any] | None = None
    """A flat JSON Schema object describing the fields wanted (form mode)."""
    url: str | None = None
    """The page to open (url mode)."""
    elicitation_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ElicitationResult:
    """The user's answer to an :class:`ElicitationRequest`."""

    action: Literal["accept", "decline", "cancel"]
    """``accept`` (with ``content`` in form mode), ``decline`` (the user said no) or
    ``cancel`` (the user dismissed the question)."""
    content: Mapping[str, Any] | None = None
    """The fields the user filled in (form mode, ``accept`` only)."""

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationResult:
        """The user answered with ``content``."""
        return cls(action="accept", content=dict(content) if content is not None else None)

    @classmethod
    def decline(cls) -> ElicitationResult:
        """The user refused to answer."""
        return cls(action="decline")

    @classmethod
    def cancel(cls) -> ElicitationResult:
        """The user dismissed the question without choosing."""
        return cls(action="cancel")


SamplingHandler = Callable[[SamplingRequest], Union[SamplingResult, str]]
"""``handler(request) -> SamplingResult | str``: answers a server's sampling request
(a str is the reply text). Raising refuses the request; the server gets an error."""

ApproveSampling = Callable[[SamplingRequest], Any]
"""``approve_sampling(request)``: the host's policy gate, run before any model is asked.
Returning False or raising refuses the request (nothing is spent); anything else lets it
through. Without one, sampling requests are answered."""

ElicitationHandler = Callable[[ElicitationRequest], Union[ElicitationResult, Mapping[str, Any], None]]
"""``handler(request) -> ElicitationResult | dict | None``: a dict means accept with that
content, None means decline. Raising refuses the request; the server gets an error."""


@dataclass(frozen=True, kw_only=True)
class McpResource:
    """One entry of a server's ``resources/list``."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """Size in bytes, when the server says."""


@dataclass(frozen=True, kw_only=True)
class McpPromptArgument:
    """One argument of an :class:`McpPrompt`."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, kw_only=True)
class McpPrompt:
    """One entry of a server's ``prompts/list``."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = field(default=())
