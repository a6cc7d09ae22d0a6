"""Building blocks for model adapters: what agentkit's own adapters are made of.

A provider adapter (OpenAI, Anthropic, LangChain, or your own) subclasses
:class:`ProviderModel` and implements two methods:

- ``prepare(request)`` checks the request and builds the provider call, raising
  :class:`~agentkit.errors.ConfigurationError` for bad input before any I/O, and returns
  a function that runs one attempt and yields :mod:`stream events <agentkit.models.base>`;
- ``translate_error(exc)`` turns the provider's (or its SDK's) exception into an
  :mod:`agentkit.errors` type wrapped in a :class:`TranslatedError` that says whether
  another attempt may help, or returns None to let the exception through unchanged.

``stream()`` comes from the base: it runs attempts under ``self.retry`` (a
:class:`RetryPolicy`), retries what ``translate_error`` calls retryable only before the
first event was passed on, waits cancellably, and raises the translated errors. Retrying
knows nothing about any SDK; translating knows nothing about retrying.

The helpers below convert agentkit's request parts into common wire shapes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

from ._common import check_tool_choice, data_url, function_tools, parse_tool_arguments, tool_result_text
from ._retry import RetryInfo, RetryPolicy, TranslatedError, stream_with_retries
from .base import ModelRequest, OutputMode, StreamEvent

__all__ = [
    "ProviderModel",
    "TranslatedError",
    "check_tool_choice",
    "data_url",
    "function_tools",
    "parse_tool_arguments",
    "stream_with_retries",
    "tool_result_text",
]


class ProviderModel(ABC):
    """Base class of a model adapter; a :class:`~agentkit.ChatModel` once its two
    abstract methods are written.

    ``provider`` names the API in errors (``ModelError.provider``); ``model_name`` is
    recorded on assistant events; ``retry`` and ``on_retry`` drive the retry loop (the
    default policy retries up to four times).
    """

    provider: str = ""
    """The API's name, e.g. ``"openai"``; errors carry it."""
    model_name: str = ""
    """The model's name, recorded on assistant events."""
    retry: RetryPolicy = RetryPolicy()
    """How transient failures are retried; ``RetryPolicy(max_retries=0)`` never retries."""
    on_retry: Callable[[RetryInfo], Any] | None = None
    """Called before each wait between attempts."""
    output_mode: OutputMode = "tool"
    """How the adapter gives a structured output (``output_type=``): ``tool`` (a
    final-answer tool, ``ModelRequest.output`` names it) or ``json-schema`` (the provider
    constrains the final text to ``ModelRequest.output.schema``)."""

    @abstractmethod
    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        """Check ``request`` and return a function that runs one attempt; raises on bad
        input before any I/O. Each call of the function is a fresh attempt."""

    @abstractmethod
    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """The agentkit error for ``exc`` raised by an attempt, and whether to retry it;
        None lets ``exc`` propagate unchanged."""

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Stream the reply. Bad input raises here, before any request is sent."""
        attempt = self.prepare(request)
        on_retry = self.on_retry
        if request.on_retry is not None:  # the generation's too (its ``retry`` events)
            on_retry = request.on_retry if on_retry is None else _both(on_retry, request.on_retry)
        return stream_with_retries(
            attempt, translate=self.translate_error, policy=self.retry, cancel=request.cancel, on_retry=on_retry
        )


def _both(first: Callable[[RetryInfo], Any], second: Callable[[RetryInfo], Any]) -> Callable[[RetryInfo], Any]:
    def on_retry(info: RetryInfo) -> None:
        first(info)
        second(info)

    return on_retry
