"""Anthropic Messages API behind the ChatModel port.

Built on the official ``anthropic`` SDK's synchronous client (streaming). Install with
``pip install 'sync-agentkit[anthropic]'``. Supports extended thinking: reasoning streams as
:class:`ReasoningDelta`; each finished thinking block arrives as a :class:`ReasoningDone`
carrying its signature (or redacted data), which is sent back unchanged next time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError, MissingDependencyError, ProviderUnavailableError
from ..messages import (
    ReasoningPart,
)
from ..usage import Usage
from ._anthropic_messages import to_anthropic_messages
from ._common import (
    check_tool_choice,
    make_client,
    parse_tool_arguments,
)
from ._errors import translate_sdk_error
from ._retry import RetryInfo, RetryPolicy, TranslatedError
from ._sdk import SDKModel
from .base import (
    FinishEvent,
    FinishReason,
    ModelRequest,
    OutputMode,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)

try:
    import anthropic as _anthropic
except ImportError:  # pragma: no cover - exercised when the extra is missing
    _anthropic = None  # type: ignore[assignment]

__all__ = ["AnthropicModel"]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}
_MAX_BREAKPOINTS = 4
_CACHEABLE = ("text", "image", "document", "tool_use", "tool_result")


class AnthropicModel(SDKModel):
    """A Claude model on the Messages API.

    ``AnthropicModel("claude-sonnet-4-5")`` reads ``ANTHROPIC_API_KEY``. Pass
    ``client=`` to reuse a configured ``anthropic.Anthropic`` (its own retries are
    disabled; ``retry``, a :class:`RetryPolicy`, is the only retry loop).

    ``max_tokens`` is sent when ``ModelSettings.max_tokens`` is not set (the API
    requires one). ``ModelSettings.reasoning_budget`` turns on extended thinking with
    that token budget; ``ModelSettings.reasoning_effort`` is sent as
    ``output_config.effort``. Prompt caching places ``cache_control`` breakpoints on the
    system prompt (or the tools when there is no system prompt) and on the last
    ``cache_messages`` user turns, at most four per request; ``cache=False`` or
    ``ModelRequest.cache=False`` turns it off, ``cache_ttl="1h"`` lengthens it, and
    ``provider_options={"cache_control": {...}}`` tunes one run (``None`` turns it off).

    A structured output (``output_type=``) is the input of a tool the model is forced to
    call (``tool_choice`` names it, or ``any`` when the model has other tools to call
    first); with extended thinking, which forbids forced tool use, the choice stays
    ``auto`` and agentkit sends the model back if it answers in text.
    """

    provider = "anthropic"
    output_mode: OutputMode = "tool"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        api_key: str | Callable[[], str] | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryInfo], Any] | None = None,
        cache: bool = True,
        cache_ttl: Literal["5m", "1h"] | None = None,
        cache_messages: int = 2,
    ) -> None:
        if _anthropic is None:
            raise MissingDependencyError("anthropic", "anthropic", "AnthropicModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError("AnthropicModel needs a model name, e.g. 'claude-sonnet-4-5'")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry must be an agentkit.models.RetryPolicy")
        if cache_ttl not in (None, "5m", "1h"):
            raise ConfigurationError(f"cache_ttl must be '5m' or '1h', got {cache_ttl!r}")
        if not isinstance(cache_messages, int) or not 0 <= cache_messages <= _MAX_BREAKPOINTS - 1:
            raise ConfigurationError("cache_messages must be an int from 0 to 3")
        self.model_name = model
        self._api_key = api_key if callable(api_key) else None
        self._client = make_client(
            _anthropic.Anthropic,
            client,
            api_key=api_key,
            env_key="ANTHROPIC_API_KEY",
            base_url=base_url,
            timeout=timeout,
            default_headers=default_headers,
            label="Anthropic",
        )
        self._max_tokens = max_tokens
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._cache = cache
        self._cache_control: dict[str, Any] = {"type": "ephemeral"}
        if cache_ttl is not None:
            self._cache_control["ttl"] = cache_ttl
        self._cache_messages = cache_messages

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_name!r})"

    # -- the port (stream() comes from ProviderModel, prepare() from SDKModel) ---------

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """The anthropic SDK's exceptions (and raw transport or JSON errors it lets through)
        as agentkit errors; None for anything else."""
        return translate_sdk_error(exc, _anthropic, "anthropic", "Anthropic", str(self._client.base_url))

    def _create(self) -> Callable[..., Any]:
        return self._client.messages.create  # type: ignore[no-any-return]

    def _events(self, response: Any, kwargs: dict[str, Any], cancel: CancelToken) -> Iterator[StreamEvent]:
        return _events(response, cancel)

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body agentkit would send (after ``provider_options``)."""
        check_tool_choice(request)
        options = dict(request.provider_options)
        if options.pop("stream", True) is not True:
            raise ConfigurationError("AnthropicModel always streams; remove 'stream' from provider_options")
        cache_control: Any = self._cache_control if (self._cache and request.cache) else None
        if "cache_control" in options:  # agentkit places the breakpoints; this tunes them
            cache_control = options.pop("cache_control") or None
            if cache_control is not None and not isinstance(cache_control, Mapping):
                raise ConfigurationError(
                    "provider_options['cache_control'] must be a dict such as "
                    "{'type': 'ephemeral', 'ttl': '1h'}, or None to turn caching off"
                )
        s = request.settings
        params: dict[str, Any] = {"model": self.model_name, "stream": True}
        max_tokens = s.max_tokens
        if s.reasoning_budget is not None:
            budget = s.reasoning_budget
            if budget < 1024:
                raise ConfigurationError(
                    f"reasoning_budget must be at least 1024 tokens for Anthropic extended "
                    f"thinking, got {budget}"
                )
            if max_tokens is None:
                max_tokens = budget + self._max_tokens
            elif max_tokens <= budget:
                raise ConfigurationError(
                    f"max_tokens ({max_tokens}) must be greater than reasoning_budget ({budget}): "
                    f"the thinking budget is part of max_tokens"
                )
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        params["max_tokens"] = max_tokens if max_tokens is not None else self._max_tokens
        # the API rejects empty and whitespace-only text blocks
        system_texts = [request.system] if request.system and request.system.strip() else []
        system_texts += [m.text for m in request.messages if m.role == "system" and m.text.strip()]
        messages = to_anthropic_messages(request.messages)
        tools = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
            for t in request.tools
        ]
        system: list[dict[str, Any]] = [{"type": "text", "text": t} for t in system_texts]
        if cache_control is not None:
            _place_breakpoints(system, tools, messages, dict(cache_control), self._cache_messages)
        if system:
            params["system"] = system
        params["messages"] = messages
        if tools:
            params["tools"] = tools
            choice = request.tool_choice
            params["tool_choice"] = (
                {"type": {"required": "any"}.get(choice, choice)}
                if choice in ("auto", "none", "required")
                else {"type": "tool", "name": choice}
            )
        if s.temperature is not None:
            params["temperature"] = s.temperature
        if s.top_p is not None:
            params["top_p"] = s.top_p
        if s.stop:
            params["stop_sequences"] = list(s.stop)
        if s.reasoning_effort is not None:  # merged: output_config may carry other settings
            params["output_config"] = {**params.get("output_config", {}), "effort": s.reasoning_effort}
        params.update(options)
        if request.output is not None and request.tool_choice == "auto" and "tool_choice" not in options:
            _force_output(params, request.output.name)
        _check_thinking(params)
        return params


def _force_output(params: dict[str, Any], name: str) -> None:
    """Force the output tool (``any`` when other tools may come first), unless extended
    thinking is on: the API refuses forced tool use with it."""
    thinking = params.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled"):
        return
    tools = params.get("tools") or []
    only = len(tools) == 1 and tools[0].get("name") == name
    params["tool_choice"] = {"type": "tool", "name": name} if only else {"type": "any"}


def _check_thinking(params: Mapping[str, Any]) -> None:
    """Reject, before any request, what the API rejects with extended thinking on:
    forced tool use, a temperature other than 1, top_p under 0.95, and top_k."""
    thinking = params.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") in (None, "disabled"):
        return
    hint = "; turn thinking off (no reasoning_budget) to use it"
    choice = params.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        raise ConfigurationError(
            "Anthropic extended thinking cannot be combined with forced tool use "
            "(tool_choice 'required' or a tool name); use tool_choice 'auto' or 'none'" + hint
        )
    temperature = params.get("temperature")
    if temperature is not None and temperature != 1:
        raise ConfigurationError(
            f"Anthropic extended thinking only allows temperature 1, got {temperature}; "
            f"leave ModelSettings.temperature unset" + hint
        )
    top_p = params.get("top_p")
    if top_p is not None and not 0.95 <= top_p <= 1:
        raise ConfigurationError(
            f"Anthropic extended thinking needs top_p between 0.95 and 1, got {top_p}; "
            f"leave ModelSettings.top_p unset" + hint
        )
    if params.get("top_k") is not None:
        raise ConfigurationError("Anthropic extended thinking does not allow top_k; remove it" + hint)


def _place_breakpoints(
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    control: dict[str, Any],
    recent: int,
) -> None:
    """Mark the prefix (system prompt, else tools) and the last ``recent`` user turns."""
    used = 0
    if system:
        system[-1]["cache_control"] = control
        used += 1
    elif tools:
        tools[-1]["cache_control"] = control
        used += 1
    marked = 0
    for msg in reversed(messages):
        if marked >= recent or used >= _MAX_BREAKPOINTS:
            break
        if msg["role"] != "user":
            continue
        for block in reversed(msg["content"]):
            if block.get("type") in _CACHEABLE:
                block["cache_control"] = control
                marked += 1
                used += 1
                break


# -- stream events ---------------------------------------------------------------------


class _Block:
    __slots__ = ("kind", "text", "signature", "data", "id", "name", "json")

    def __init__(self, start: Any) -> None:
        self.kind: str = getattr(start, "type", "")
        self.text: list[str] = [getattr(start, "thinking", "") or ""] if self.kind == "thinking" else []
        self.signature: str = getattr(start, "signature", "") or ""
        self.data: str | None = getattr(start, "data", None)
        self.id: str = getattr(start, "id", "") or ""
        self.name: str = getattr(start, "name", "") or ""
        initial = getattr(start, "input", None)
        self.json: list[str] = []
        if initial:
            self.json.append(json.dumps(initial))


def _events(stream: Any, cancel: CancelToken) -> Iterator[StreamEvent]:
    blocks: dict[int, _Block] = {}
    usage = {"input": 0, "output": 0, "read": 0, "write": 0, "thinking": 0}
    stop_reason: str | None = None
    seen = 0
    stopped = False
    try:
        for event in stream:
            if cancel.cancelled:
                raise CancelledError(cancel.reason)
            seen += 1
            kind = getattr(event, "type", None)
            if kind == "message_start":
                _read_usage(getattr(event.message, "usage", None), usage)
            elif kind == "content_block_start":
                started = _Block(event.content_block)
                blocks[event.index] = started
                first_text: str = getattr(event.content_block, "text", "") or ""
                if started.kind == "text" and first_text:
                    yield TextDelta(first_text)
                if started.kind == "thinking" and started.text[0]:
                    yield ReasoningDelta(started.text[0])
            elif kind == "content_block_delta":
                block: _Block | None = blocks.get(event.index)
                delta = event.delta
                dtype = getattr(delta, "type", None)
                if dtype == "text_delta" and delta.text:
                    yield TextDelta(delta.text)
                elif dtype == "thinking_delta" and block is not None:
                    block.text.append(delta.thinking)
                    if delta.thinking:
                        yield ReasoningDelta(delta.thinking)
                elif dtype == "signature_delta" and block is not None:
                    block.signature += delta.signature
                elif dtype == "input_json_delta" and block is not None:
                    block.json.append(delta.partial_json)
            elif kind == "content_block_stop":
                done = blocks.pop(event.index, None)
                if done is not None:
                    yield from _finish_block(done)
            elif kind == "message_delta":
                stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
                _read_usage(getattr(event, "usage", None), usage)
            elif kind == "message_stop":
                stopped = True
    finally:
        stream.close()
    if seen == 0:
        raise ProviderUnavailableError(
            "the Anthropic API answered 200 but the stream ended without any event",
            provider="anthropic",
            status_code=200,
        )
    if not stopped:
        raise ProviderUnavailableError(
            "the Anthropic stream ended before message_stop; the answer may be cut off",
            provider="anthropic",
        )
    total_in = usage["input"] + usage["read"] + usage["write"]
    yield UsageEvent(
        Usage(
            input_tokens=total_in,
            output_tokens=usage["output"],
            total_tokens=total_in + usage["output"],
            cache_read_tokens=usage["read"],
            cache_write_tokens=usage["write"],
            reasoning_tokens=usage["thinking"],
        )
    )
    yield FinishEvent(_FINISH.get(stop_reason or "", "other"), stop_reason)


def _read_usage(u: Any, into: dict[str, int]) -> None:
    """Anthropic usage counts are cumulative: the latest non-null value wins."""
    if u is None:
        return
    for attr, key in (
        ("input_tokens", "input"),
        ("output_tokens", "output"),
        ("cache_read_input_tokens", "read"),
        ("cache_creation_input_tokens", "write"),
    ):
        value = getattr(u, attr, None)
        if value is not None:
            into[key] = int(value)
    # output_tokens_details.thinking_tokens: the part of output_tokens spent thinking
    thinking = getattr(getattr(u, "output_tokens_details", None), "thinking_tokens", None)
    if thinking is not None:
        into["thinking"] = int(thinking)


def _finish_block(block: _Block) -> Iterator[StreamEvent]:
    if block.kind == "thinking":
        text = "".join(block.text)
        yield ReasoningDone(ReasoningPart(text=text, signature=block.signature or None))
    elif block.kind == "redacted_thinking":
        yield ReasoningDone(ReasoningPart(text="", redacted_data=block.data or ""))
    elif block.kind == "tool_use":
        value, error = parse_tool_arguments("".join(block.json))
        yield ToolCallEvent(tool_call_id=block.id, tool_name=block.name, input=value, input_error=error)


# -- message conversion ----------------------------------------------------------------
