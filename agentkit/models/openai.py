"""OpenAI Chat Completions (and OpenAI-compatible servers) behind the ChatModel port.

Built on the official ``openai`` SDK's synchronous client. Install with
``pip install 'sync-agentkit[openai]'``. With ``base_url`` the same adapter serves any
OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import CancelledError, ConfigurationError, MissingDependencyError, ProviderUnavailableError
from ..messages import (
    ReasoningPart,
)
from ..usage import Usage
from ._common import (
    check_tool_choice,
    function_tools,
    make_client,
    parse_tool_arguments,
)
from ._errors import translate_sdk_error
from ._openai_messages import to_openai_messages
from ._retry import RetryInfo, RetryPolicy, TranslatedError
from ._sdk import SDKModel
from .base import (
    FinishEvent,
    FinishReason,
    ModelRequest,
    OutputMode,
    OutputSpec,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)

try:
    import openai as _openai
except ImportError:  # pragma: no cover - exercised when the extra is missing
    _openai = None  # type: ignore[assignment]

__all__ = ["OpenAIChatModel"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
    "error": "error",
}


class OpenAIChatModel(SDKModel):
    """A Chat Completions model.

    ``OpenAIChatModel("gpt-4.1-mini")`` reads ``OPENAI_API_KEY``;
    ``OpenAIChatModel("qwen3", base_url="http://127.0.0.1:8000/v1")`` talks to an
    OpenAI-compatible server (pass ``api_key=`` if it wants one: ``OPENAI_API_KEY`` is
    never sent to a server other than OpenAI's). Pass
    ``client=`` to reuse a configured ``openai.OpenAI``; its own retries are disabled
    either way, so ``retry`` (a :class:`RetryPolicy`) is the only retry loop.

    ``stream=False`` uses plain (non-streaming) completions, for servers that cannot
    stream tool calls. ``max_tokens_param`` names the field ``ModelSettings.max_tokens``
    is sent as (default ``max_completion_tokens`` for OpenAI, ``max_tokens`` with a
    ``base_url``). ``prompt_cache_key`` (the session id) goes to OpenAI's own API; with a
    ``base_url`` it is sent only with ``cache=True``, because several compatible servers
    (Groq, Cerebras, NVIDIA) reject fields they do not know. ``cache=False`` never sends it.

    A structured output (``output_type=``) is asked for as a ``json_schema`` response
    format (``strict`` when the schema meets strict mode's rules); pass
    ``output_mode="tool"`` for a compatible server without response formats, to get it
    through a final-answer tool instead.
    """

    provider = "openai"
    output_mode: OutputMode = "json-schema"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        api_key: str | Callable[[], str] | None = None,
        base_url: str | None = None,
        stream: bool = True,
        organization: str | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryInfo], Any] | None = None,
        cache: bool | None = None,
        include_usage: bool = True,
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] | None = None,
        system_role: Literal["system", "developer"] = "system",
        output_mode: OutputMode = "json-schema",
    ) -> None:
        if _openai is None:
            raise MissingDependencyError("openai", "openai", "OpenAIChatModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError("OpenAIChatModel needs a model name, e.g. 'gpt-4.1-mini'")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry must be an agentkit.models.RetryPolicy")
        if system_role not in ("system", "developer"):
            raise ConfigurationError("system_role must be 'system' or 'developer'")
        if max_tokens_param not in (None, "max_completion_tokens", "max_tokens"):
            raise ConfigurationError("max_tokens_param must be 'max_completion_tokens' or 'max_tokens'")
        if output_mode not in ("json-schema", "tool"):
            raise ConfigurationError(f"output_mode must be 'json-schema' or 'tool', got {output_mode!r}")
        self.output_mode = output_mode
        self.model_name = model
        self._api_key = api_key if callable(api_key) else None
        self._client, official = _openai_client(client, api_key, base_url, timeout, default_headers, organization)
        self._max_tokens_param = max_tokens_param or ("max_completion_tokens" if official else "max_tokens")
        self._stream = stream
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._cache = official if cache is None else bool(cache)
        self._include_usage = include_usage
        self._system_role = system_role

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model_name!r}, base_url={str(self._client.base_url)!r})"

    # -- the port (stream() comes from ProviderModel, prepare() from SDKModel) ---------

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """The openai SDK's exceptions (and raw transport or JSON errors it lets through)
        as agentkit errors; None for anything else."""
        return translate_sdk_error(exc, _openai, "openai", "OpenAI", str(self._client.base_url))

    def _create(self) -> Callable[..., Any]:
        return self._client.chat.completions.create  # type: ignore[no-any-return]

    def _events(self, response: Any, kwargs: dict[str, Any], cancel: Any) -> Iterator[StreamEvent]:
        if kwargs.get("stream"):
            return self._streamed(response, cancel)
        return _completion_events(response)

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body agentkit would send (after ``provider_options``)."""
        check_tool_choice(request)
        params: dict[str, Any] = {
            "model": self.model_name,
            "messages": to_openai_messages(request, self._system_role),
        }
        if request.tools:
            params["tools"] = function_tools(request.tools)
            choice = request.tool_choice
            if choice in ("auto", "none", "required"):
                params["tool_choice"] = choice
            else:
                params["tool_choice"] = {"type": "function", "function": {"name": choice}}
        s = request.settings
        if s.temperature is not None:
            params["temperature"] = s.temperature
        if s.top_p is not None:
            params["top_p"] = s.top_p
        if s.max_tokens is not None:
            params[self._max_tokens_param] = s.max_tokens
        if s.stop:
            params["stop"] = list(s.stop)
        if s.seed is not None:
            params["seed"] = s.seed
        if s.reasoning_budget is not None:
            raise ConfigurationError(
                "OpenAIChatModel cannot apply ModelSettings.reasoning_budget: Chat Completions has no "
                "reasoning token budget. Use ModelSettings(reasoning_effort='low'|'medium'|'high') for "
                "OpenAI reasoning models (or a server's own field in provider_options), and leave "
                "reasoning_budget unset"
            )
        if s.reasoning_effort is not None:
            params["reasoning_effort"] = s.reasoning_effort
        if self._stream:
            params["stream"] = True
        output = request.output
        if output is not None and output.mode == "json-schema":
            params["response_format"] = _response_format(output)
        if request.cache and self._cache and request.session_id:
            params["prompt_cache_key"] = request.session_id
        params.update(request.provider_options)
        # after the caller's options: a per-run "stream" decides whether usage is asked
        # for (the API rejects stream_options on a request that does not stream)
        if "stream_options" not in request.provider_options:
            if params.get("stream") and self._include_usage:
                params["stream_options"] = {"include_usage": True}
            else:
                params.pop("stream_options", None)
        return params

    # -- streaming ---------------------------------------------------------------------

    def _streamed(self, stream: Any, cancel: Any) -> Iterator[StreamEvent]:
        state = _StreamState()
        try:
            for chunk in stream:
                if cancel.cancelled:
                    raise CancelledError(cancel.reason)
                yield from state.feed(chunk)
        finally:
            stream.close()
        yield from state.finish()


class _Call:
    __slots__ = ("id", "name", "args")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []


class _StreamState:
    """Assembles Chat Completions chunks into agentkit stream events."""

    def __init__(self) -> None:
        self.chunks = 0
        self.reasoning: list[str] = []
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def feed(self, chunk: Any) -> Iterator[StreamEvent]:
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage  # some servers repeat a cumulative usage: keep the last
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = getattr(choice, "delta", None)
            if delta is not None:
                thought = _reasoning_of(delta)
                if thought:
                    self.reasoning.append(thought)
                    yield ReasoningDelta(thought)
                # a refusal is the model's answer: show it like text
                content = getattr(delta, "content", None) or getattr(delta, "refusal", None)
                if content:
                    yield from self._close_reasoning()
                    yield TextDelta(content)
                for tc in getattr(delta, "tool_calls", None) or ():
                    yield from self._close_reasoning()
                    self._add_fragment(tc)
            if getattr(choice, "finish_reason", None):
                self.finish_reason = choice.finish_reason

    def _close_reasoning(self) -> Iterator[StreamEvent]:
        if self.reasoning:
            yield ReasoningDone(ReasoningPart(text="".join(self.reasoning)))
            self.reasoning = []

    def _add_fragment(self, tc: Any) -> None:
        index = getattr(tc, "index", None)
        call_id = getattr(tc, "id", None) or ""
        fn = getattr(tc, "function", None)
        name = (getattr(fn, "name", None) or "") if fn is not None else ""
        args = (getattr(fn, "arguments", None) or "") if fn is not None else ""
        slot: _Call | None = None
        if index is not None and index in self.by_index:
            slot = self.by_index[index]
            if call_id and slot.id and call_id != slot.id:
                slot = None  # a server that reuses one index for several calls
        elif index is None and self.calls and (not call_id or call_id == self.calls[-1].id):
            slot = self.calls[-1]
        if slot is None:
            slot = _Call(call_id, name)
            self.calls.append(slot)
            if index is not None:
                self.by_index[index] = slot
        else:
            # id and name come from the first chunk that carries them; a server that
            # repeats them in every chunk must not get them concatenated
            slot.id = slot.id or call_id
            slot.name = slot.name or name
        if args:
            slot.args.append(args)

    def finish(self) -> Iterator[StreamEvent]:
        if self.chunks == 0:
            raise ProviderUnavailableError(
                "the OpenAI-compatible server answered 200 but the stream ended without any "
                "chunk; the server may have crashed or cut the connection. If it cannot stream, "
                "use OpenAIChatModel(..., stream=False)",
                provider="openai",
                status_code=200,
            )
        yield from self._close_reasoning()
        for call in self.calls:
            yield _tool_call_event(call.id, call.name, "".join(call.args))
        if self.usage is not None:
            yield UsageEvent(_usage(self.usage))
        if self.finish_reason is None:
            raise ProviderUnavailableError(
                "the OpenAI-compatible stream ended before the model finished (no chunk carried "
                "a finish_reason); the answer may be cut off",
                provider="openai",
            )
        yield FinishEvent(_finish(self.finish_reason, bool(self.calls)), self.finish_reason)


def _openai_client(client: Any, api_key: str | Callable[[], str] | None, base_url: str | None,
                  timeout: float | None, default_headers: Mapping[str, str] | None,
                  organization: str | None) -> tuple[Any, bool]:
    """An ``openai.OpenAI`` for an adapter (:func:`make_client`), and whether it talks to
    OpenAI's own API: ``OPENAI_API_KEY`` is read only then, never sent to another server."""
    server = str(client.base_url) if client is not None and base_url is None else base_url
    official = server is None or urlsplit(server).hostname == "api.openai.com"
    made = make_client(_openai.OpenAI, client, api_key=api_key, env_key="OPENAI_API_KEY", base_url=base_url,
                       timeout=timeout, default_headers=default_headers, label="OpenAI", read_env=official,
                       organization=organization)
    return made, official


def _response_format(output: OutputSpec) -> dict[str, Any]:
    """A structured output as a Chat Completions ``json_schema`` response format."""
    spec: dict[str, Any] = {"name": output.name, "schema": dict(output.schema), "strict": output.strict}
    if output.description:
        spec["description"] = output.description
    return {"type": "json_schema", "json_schema": spec}


def _reasoning_of(obj: Any) -> str | None:
    """Reasoning text of a delta or message: ``reasoning_content`` (vLLM, llama.cpp,
    DeepSeek) or ``reasoning`` (Ollama, OpenRouter)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _tool_call_event(call_id: str, name: str, raw: str) -> ToolCallEvent:
    value, error = parse_tool_arguments(raw)
    return ToolCallEvent(
        tool_call_id=call_id or f"call_{uuid.uuid4().hex[:24]}",
        tool_name=name,
        input=value,
        input_error=error,
    )


def _finish(raw: str | None, has_calls: bool) -> FinishReason:
    if has_calls and raw in ("stop", None):
        return "tool-calls"  # some servers say "stop" after tool calls
    return _FINISH.get(raw or "", "other")


def _usage(u: Any) -> Usage:
    inp = int(getattr(u, "prompt_tokens", 0) or 0)
    out = int(getattr(u, "completion_tokens", 0) or 0)
    total = int(getattr(u, "total_tokens", 0) or 0) or inp + out
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    out_details = getattr(u, "completion_tokens_details", None)
    reasoning = int(getattr(out_details, "reasoning_tokens", 0) or 0) if out_details is not None else 0
    return Usage(input_tokens=inp, output_tokens=out, total_tokens=total, cache_read_tokens=cached,
                 reasoning_tokens=reasoning)


def _completion_events(completion: Any) -> Iterator[StreamEvent]:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise ProviderUnavailableError(
            "the OpenAI-compatible server answered without any choice", provider="openai"
        )
    choice = choices[0]
    message = choice.message
    thought = _reasoning_of(message)
    if thought:
        yield ReasoningDelta(thought)
        yield ReasoningDone(ReasoningPart(text=thought))
    content = message.content or getattr(message, "refusal", None)
    if content:
        yield TextDelta(content)
    calls = [c for c in (message.tool_calls or ()) if getattr(c, "function", None) is not None]
    for call in calls:
        yield _tool_call_event(call.id or "", call.function.name or "", call.function.arguments or "")
    if getattr(completion, "usage", None) is not None:
        yield UsageEvent(_usage(completion.usage))
    yield FinishEvent(_finish(choice.finish_reason, bool(calls)), choice.finish_reason)


# -- message conversion ----------------------------------------------------------------
