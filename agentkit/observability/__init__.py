"""OpenTelemetry tracing and logging of agentkit.

Install ``sync-agentkit[otel]`` (the OpenTelemetry API only) and configure the
OpenTelemetry SDK as usual; every generation then produces spans following the
OpenTelemetry GenAI semantic conventions: ``invoke_agent`` for the generation, ``chat
{model}`` for each model call and ``execute_tool {name}`` for each tool call, with a
background job's ``background_job`` span under the tool call that started it. Without
OpenTelemetry, or with no SDK tracer provider configured, agentkit does no tracing work.
The provider is looked up for each generation, so one set after ``import agentkit`` is
used.

Prompts, outputs, tool arguments and tool results are not recorded unless the host
opts in, with :func:`configure` ``(record_content=True)`` or the conventions'
environment variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Logs go to the standard :mod:`logging` hierarchy under ``agentkit`` (``agentkit.models``
for retries, ``agentkit.session`` for listeners and store failures, ``agentkit.jobs``,
``agentkit.mcp``); the package logger has a ``NullHandler``, so nothing is printed
unless the host configures logging. No prompt or output text is logged at INFO or above.
See ``docs/observability.md``.
"""

from __future__ import annotations

from . import _tracing

__all__ = ["configure", "recording_content"]


def configure(*, record_content: bool | None = None) -> None:
    """Set whether spans record prompts, outputs, tool arguments and tool results.

    ``record_content=True`` records them, ``False`` never does, ``None`` (the default)
    follows the ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment
    variable (off unless it says ``true``, ``SPAN_ONLY`` or ``SPAN_AND_EVENT``). Takes
    effect from the next generation.
    """
    if record_content is not None and not isinstance(record_content, bool):
        raise _bad_flag(record_content)
    _tracing.settings.record_content = record_content


def recording_content() -> bool:
    """True when the next generation's spans will record prompts and outputs."""
    return _tracing.content_recorded()


def _bad_flag(value: object) -> Exception:
    from ..errors import ConfigurationError

    return ConfigurationError(
        f"record_content must be True, False or None (follow the environment), not {value!r}"
    )
