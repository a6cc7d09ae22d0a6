"""OpenTelemetry spans of a generation (private; the public switch is
:mod:`agentkit.observability`).

The span tree follows the OpenTelemetry GenAI semantic conventions::

    invoke_agent                 one generation (a run_agent call, a generate())
    ├── chat {model}             one model call
    ├── execute_tool {name}      one tool call (on its worker thread)
    │   └── background_job       a background job the tool started (on the job's thread)
    └── chat {model}

Nothing here imports OpenTelemetry. A host that configured a tracer provider has
imported ``opentelemetry.trace`` already, so :func:`start_run` looks for it in
``sys.modules``: when it is absent, or the global provider is still the API's proxy or
no-op provider (no SDK configured), a generation gets no trace object and the loop does
no tracing work at all. The provider is looked up per generation, so one configured
after ``import agentkit`` is honoured.

Parents are passed explicitly, never left to whatever context a thread happens to
have: tool spans are children of the generation's span on the tool worker threads, and
a job remembers the context it was started in (:func:`job_parent`) for the span its own
thread opens (:func:`job_span`).

Prompts, outputs, tool arguments and tool results are recorded (as the conventions'
``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` attributes) only when the
host opts in: :func:`agentkit.observability.configure` ``(record_content=True)`` or the
conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..messages import ContentPart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from ..messages import ToolOutput
    from ..models.base import ModelRequest
    from ..results import RunResult
    from ..usage import Usage

__all__ = ["RunTrace", "job_parent", "job_span", "note_tool_error", "start_run", "settings"]

class _Inference(Protocol):
    """What the loop's model call returns (``_loop._Inference``)."""

    @property
    def content(self) -> tuple[ContentPart, ...]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def finish_reason(self) -> str: ...


_I = TypeVar("_I", bound=_Inference)

TRACER_NAME = "agentkit"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# the values that put content on spans; anything else (NO_CONTENT, EVENT_ONLY: agentkit
# emits no content events) keeps it off
_ON_VALUES = ("true", "1", "yes", "on", "span_only", "span_and_event")


class _Settings:
    """What :func:`agentkit.observability.configure` set (None: the environment decides)."""

    record_content: bool | None = None


settings = _Settings()


def content_recorded() -> bool:
    """True when prompts and outputs go on spans: the configured choice, else the
    environment variable (``true``, ``SPAN_ONLY``, ``SPAN_AND_EVENT``...)."""
    if settings.record_content is not None:
        return settings.record_content
    return os.environ.get(CONTENT_ENV, "").strip().lower() in _ON_VALUES


def _trace_api() -> Any:
    """The ``opentelemetry.trace`` module when a host may have configured a provider."""
    return sys.modules.get("opentelemetry.trace")


def _provider() -> Any:
    """The configured tracer provider, or None when none is (or nothing would record)."""
    api = _trace_api()
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    return provider


def _tracer() -> Any:
    """The agentkit tracer of the configured provider, or None."""
    provider = _provider()
    return None if provider is None else provider.get_tracer(TRACER_NAME)


def start_run(*, model: Any, session_id: str | None) -> RunTrace | None:
    """A generation's trace, or None when no tracer provider is configured."""
    tracer = _tracer()
    if tracer is None:
        return None
    return RunTrace(tracer, model, session_id)


class RunTrace:
    """The spans of one generation: its ``invoke_agent`` span and the ``chat`` and
    ``execute_tool`` spans under it."""

    def __init__(self, tracer: Any, model: Any, session_id: str | None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self._content = content_recorded()
        self._model_name = str(getattr(model, "model_name", None) or type(model).__name__)
        self._provider = str(getattr(model, "provider", None) or type(model).__name__.lower())
        self._session_id = session_id
        self._parent: Any = None  # the invoke_agent span's context, once it runs

    def _common(self, operation: str) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model_name,
        }
        if self._session_id:
            attrs["gen_ai.conversation.id"] = self._session_id
        return attrs

    @contextmanager
    def _current(self, span: Any) -> Iterator[Any]:
        """``span`` as this thread's current span (so spans of libraries called inside,
        an HTTP client's say, nest under it); errors end it with an error status."""
        from opentelemetry import context

        token = context.attach(self._trace.set_span_in_context(span))
        try:
            yield span
        except BaseException as exc:
            if getattr(exc, "pauses_call", False):  # ctx.ask_human: the call waits for a person, no error
                span.set_attribute("tool.input_request_id", str(getattr(exc, "request_id", "")))
            else:
                _fail(span, exc)
            raise
        finally:
            context.detach(token)
            span.end()

    def run(self, body: Callable[[], RunResult]) -> RunResult:
        """Run the generation ``body`` under its ``invoke_agent`` span."""
        span = self._tracer.start_span("invoke_agent", kind=self._trace.SpanKind.INTERNAL,
                                       attributes=self._common("invoke_agent"))
        self._parent = self._trace.set_span_in_context(span)
        with self._current(span):
            result = body()
            attrs = _usage_attributes(result.usage)
            attrs["gen_ai.response.finish_reasons"] = [result.finish_reason]
            if self._content and result.text:
                attrs["gen_ai.output.messages"] = _dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": result.text}],
                      "finish_reason": result.finish_reason}]
                )
            span.set_attributes(attrs)
            return result

    def chat(self, request: ModelRequest, body: Callable[[], _I],
             recorded: Callable[[tuple[ContentPart, ...]], tuple[ContentPart, ...]]) -> _I:
        """Run one model call ``body`` (returning the loop's inference) under a ``chat``
        span; ``recorded`` gives the content as it may be recorded (redacted)."""
        attrs = self._common("chat")
        settings_ = request.settings
        for key, value in (("temperature", settings_.temperature), ("top_p", settings_.top_p),
                           ("max_tokens", settings_.max_tokens), ("seed", settings_.seed)):
            if value is not None:
                attrs[f"gen_ai.request.{key}"] = value
        if self._content:
            if request.system:
                attrs["gen_ai.system_instructions"] = _dumps([{"type": "text", "content": request.system}])
            attrs["gen_ai.input.messages"] = _dumps([_message(m) for m in request.messages])
        span = self._tracer.start_span(f"chat {self._model_name}", context=self._parent,
                                       kind=self._trace.SpanKind.CLIENT, attributes=attrs)
        with self._current(span):
            inference = body()
            out = _usage_attributes(inference.usage)
            out["gen_ai.response.finish_reasons"] = [inference.finish_reason]
            if self._content:
                parts = [_part(p) for p in recorded(inference.content)]
                out["gen_ai.output.messages"] = _dumps(
                    [{"role": "assistant", "parts": parts, "finish_reason": inference.finish_reason}]
                )
            span.set_attributes(out)
            return inference

    def tool(self, call: ToolCallPart, body: Callable[[], ToolOutput],
             recorded: Callable[[ToolOutput], ToolOutput], arguments: Callable[[], Any]) -> ToolOutput:
        """Run one tool call ``body`` under an ``execute_tool`` span, a child of the
        generation's span whichever thread runs it; an error result sets an error status."""
        attrs = self._common("execute_tool")
        attrs.update({"gen_ai.tool.name": call.tool_name, "gen_ai.tool.call.id": call.tool_call_id,
                      "gen_ai.tool.type": "function"})
        if self._content:
            attrs["gen_ai.tool.call.arguments"] = _dumps(arguments())
        span = self._tracer.start_span(f"execute_tool {call.tool_name}", context=self._parent,
                                       kind=self._trace.SpanKind.INTERNAL, attributes=attrs)
        with self._current(span):
            output = body()
            if output.is_error:
                if "error.type" not in (getattr(span, "attributes", None) or {}):
                    span.set_attribute("error.type", "tool_error")
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _first_line(output.as_text())
                                                   if self._content else None))
            if self._content:
                span.set_attribute("gen_ai.tool.call.result", recorded(output).as_text())
            return output


def note_tool_error(error_type: str, exc: BaseException | None = None) -> None:
    """Say why a tool call failed on the current ``execute_tool`` span (``error.type``:
    the exception's class, or ``timeout``); nothing when tracing is off. The exception
    itself (its message may quote the tool's input) is recorded only with content on."""
    api = _trace_api()
    if api is None:
        return
    span = api.get_current_span()
    if span.is_recording():
        span.set_attribute("error.type", error_type)
        if exc is not None and content_recorded():
            span.record_exception(exc)


def job_parent() -> Any:
    """The context a background job starts in (the ``execute_tool`` span that started
    it), or None when tracing is off."""
    if _provider() is None:
        return None
    from opentelemetry import context

    return context.get_current()


@contextmanager
def job_span(parent: Any, execution_id: str) -> Iterator[Callable[[str, int | None, str | None], None]]:
    """A ``background_job`` span for a job's thread under ``parent`` (from
    :func:`job_parent`); yields ``finish(state, exit_code, error)``. A no-op without one."""
    tracer = _tracer() if parent is not None else None
    if tracer is None:
        yield _ignore
        return
    from opentelemetry import trace

    span = tracer.start_span("background_job", context=parent, kind=trace.SpanKind.INTERNAL,
                             attributes={"agentkit.job.execution_id": execution_id})

    def finish(state: str, exit_code: int | None, error: str | None) -> None:
        span.set_attribute("agentkit.job.state", state)
        if exit_code is not None:
            span.set_attribute("process.exit.code", exit_code)
        if state != "finished":
            span.set_attribute("error.type", f"job_{state}")
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))

    try:
        yield finish
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        span.end()


def _ignore(state: str, exit_code: int | None, error: str | None) -> None:
    """The ``finish`` of a job that is not traced."""


def _fail(span: Any, exc: BaseException) -> None:
    from opentelemetry import trace

    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    attrs = {"gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens}
    if usage.cache_read_tokens:
        attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attrs["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attrs["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return attrs


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": [_part(p) for p in message.content]}


def _part(part: ContentPart) -> dict[str, Any]:
    """A content part in the conventions' message-part shape."""
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "content": part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.tool_call_id, "name": part.tool_name, "arguments": part.input}
    if isinstance(part, ToolResultPart):
        return {"type": "tool_call_response", "id": part.tool_call_id, "response": part.output.as_text()}
    return {"type": part.kind}  # images and files: their bytes are not recorded


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _first_line(text: str) -> str:
    return text.splitlines()[0][:200] if text else ""
