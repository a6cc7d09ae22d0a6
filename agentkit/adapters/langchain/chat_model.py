"""A LangChain chat model as an agentkit :class:`~agentkit.ChatModel`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    ModelError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from ...messages import ReasoningPart
from ...models import RetryPolicy
from ...models.adapter import ProviderModel, TranslatedError, function_tools, parse_tool_arguments
from ...models.base import (
    FinishEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)
from ._common import finish_reason_from_langchain, require_langchain, usage_from_langchain
from .messages import messages_to_langchain

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

_SETTINGS = ("temperature", "top_p", "max_tokens", "seed")


@dataclass
class _Call:
    index: Any = None
    id: str | None = None
    name: str | None = None
    args: list[str] = field(default_factory=list)


def _continued_call(calls: list[_Call], index: Any, call_id: str | None) -> _Call | None:
    """The streamed call a ``tool_call_chunk`` continues, matched as LangChain merges
    chunks: the same ``index`` with ids that do not disagree (a provider that numbers
    every parallel call 0 still gives each its own id), or, without an index, the same id."""
    for call in reversed(calls):
        if index is not None:
            if call.index == index and (not call.id or not call_id or call.id == call_id):
                return call
        elif call_id and call.id == call_id:
            return call
    return None


@dataclass
class _State:
    calls: list[_Call] = field(default_factory=list)
    reasoning: bool = False
    reasoning_index: Any = None
    signature: str | None = None
    finish: tuple[str, str] | None = None
    emitted_calls: int = 0


def _tool_call_event(call_id: str | None, name: str | None, raw: Any) -> ToolCallEvent:
    call_id = call_id or f"call_{uuid.uuid4().hex}"
    if isinstance(raw, dict):
        return ToolCallEvent(tool_call_id=call_id, tool_name=name or "", input=raw)
    value, error = parse_tool_arguments(raw if isinstance(raw, str) else "")
    return ToolCallEvent(tool_call_id=call_id, tool_name=name or "", input=value, input_error=error)


class LangChainChatModel(ProviderModel):
    """Any LangChain ``BaseChatModel`` as an agentkit :class:`~agentkit.ChatModel`::

        from langchain_openai import ChatOpenAI
        model = LangChainChatModel(ChatOpenAI(model="gpt-4.1-mini"))
        run_agent(model, "What is 2+2?", tools=[add])

    Each request is sent through ``chat_model.stream(...)``: the system prompt as a
    ``SystemMessage``, the conversation via
    :func:`~agentkit.adapters.langchain.messages_to_langchain`, and tools through
    ``chat_model.bind_tools`` (in OpenAI function format; ``tool_choice`` ``required``
    becomes LangChain's ``"any"``, a tool name stays a tool name, and ``none`` binds no
    tools, since LangChain has no common ``"none"``). Text and reasoning stream as they arrive; tool call
    chunks are assembled into complete calls (arguments that are not a JSON object
    become a call with ``input_error``); usage and the finish reason are mapped.
    ``ModelSettings`` values that are set (temperature, top_p, max_tokens, seed, stop)
    and ``provider_options`` are passed as call keyword arguments, which LangChain
    integrations forward to their API; ``reasoning_budget`` and ``reasoning_effort`` have
    no common LangChain option and are refused (configure reasoning on the chat model
    itself). LangChain's model errors are translated into agentkit's
    (``ContextOverflowError``, ``RateLimitError``...) by :meth:`translate_error`.
    agentkit does not retry: LangChain integrations retry on their own (``max_retries``).
    """

    retry = RetryPolicy(max_retries=0)

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        model_name: str | None = None,
        config: RunnableConfig | None = None,
    ) -> None:
        require_langchain("LangChainChatModel")
        from langchain_core.language_models import BaseChatModel

        if not isinstance(chat_model, BaseChatModel):
            raise ConfigurationError(
                f"LangChainChatModel needs a LangChain BaseChatModel (e.g. ChatOpenAI), "
                f"not {type(chat_model).__name__}"
            )
        self.chat_model = chat_model
        """The wrapped LangChain chat model."""
        self.config = config
        """Passed to every ``stream`` call (callbacks, tags, metadata)."""
        named = model_name or getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
        self.model_name = named if isinstance(named, str) else chat_model._llm_type
        self.provider = chat_model._llm_type

    def __repr__(self) -> str:
        return f"LangChainChatModel({type(self.chat_model).__name__}, model_name={self.model_name!r})"

    def _runnable(self, request: ModelRequest) -> Any:
        if not request.tools or request.tool_choice == "none":
            # LangChain's bind_tools knows "any" and tool names, not "none" (ChatAnthropic
            # would force a tool named "none"): a model offered no tools calls none
            return self.chat_model
        tools = function_tools(request.tools)
        choice = request.tool_choice
        kwargs: dict[str, Any] = {}
        if choice != "auto":
            kwargs["tool_choice"] = "any" if choice == "required" else choice
        try:
            return self.chat_model.bind_tools(tools, **kwargs)
        except NotImplementedError:
            raise ConfigurationError(
                f"{type(self.chat_model).__name__} does not implement bind_tools, so it cannot "
                f"be offered tools; use a chat model with tool calling or run without tools"
            ) from None
        except Exception as exc:  # noqa: BLE001 - integrations validate tools their own way
            raise ConfigurationError(
                f"{type(self.chat_model).__name__}.bind_tools refused the tools "
                f"({', '.join(t.name for t in request.tools)}) with tool_choice={choice!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _call_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        for name in ("reasoning_budget", "reasoning_effort"):
            if getattr(settings, name) is not None:
                raise ConfigurationError(
                    f"LangChainChatModel cannot apply ModelSettings.{name}: LangChain has no "
                    f"common option for it. Configure reasoning on the {type(self.chat_model).__name__} "
                    f"itself (e.g. ChatAnthropic(thinking=...), ChatOpenAI(reasoning_effort=...)) or pass "
                    f"the integration's option in provider_options, and leave {name} unset"
                )
        kwargs: dict[str, Any] = {
            name: getattr(settings, name) for name in _SETTINGS if getattr(settings, name) is not None
        }
        if settings.stop:
            kwargs["stop"] = list(settings.stop)
        kwargs.update(request.provider_options)
        return kwargs

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        """Convert ``request``; bad requests fail here, before the call."""
        from langchain_core.messages import SystemMessage

        kwargs = self._call_kwargs(request)
        messages = messages_to_langchain(request.messages)
        if request.system:
            messages.insert(0, SystemMessage(content=request.system))
        runnable = self._runnable(request)
        return lambda: self._events(runnable, messages, kwargs, request)

    def _events(self, runnable: Any, messages: list[Any], kwargs: dict[str, Any],
                request: ModelRequest) -> Iterator[StreamEvent]:
        cancel = request.cancel
        state = _State()
        cancel.raise_if_cancelled()
        chunks = None
        try:
            chunks = runnable.stream(messages, config=self.config, **kwargs)
            for chunk in chunks:
                cancel.raise_if_cancelled()
                yield from self._chunk(chunk, state)
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):
                close()
        yield from self._close_reasoning(state)
        for call in state.calls:
            yield _tool_call_event(call.id, call.name, "".join(call.args))
            state.emitted_calls += 1
        reason, raw = state.finish or (None, None)
        if reason is None or (reason == "stop" and state.emitted_calls):
            reason = "tool-calls" if state.emitted_calls else "stop"
        yield FinishEvent(reason, raw)  # type: ignore[arg-type]

    # -- one chunk -----------------------------------------------------------------------

    def _close_reasoning(self, state: _State) -> Iterator[StreamEvent]:
        if state.reasoning and state.signature:
            yield ReasoningDone(ReasoningPart(text="", signature=state.signature))
        state.reasoning, state.signature, state.reasoning_index = False, None, None

    def _reasoning(self, state: _State, text: str, index: Any, signature: Any) -> Iterator[StreamEvent]:
        if state.reasoning and index is not None and index != state.reasoning_index:
            yield from self._close_reasoning(state)
        state.reasoning, state.reasoning_index = True, index
        if isinstance(signature, str) and signature:
            state.signature = (state.signature or "") + signature
        if text:
            yield ReasoningDelta(text)

    def _text(self, state: _State, text: str) -> Iterator[StreamEvent]:
        if text:
            yield from self._close_reasoning(state)
            yield TextDelta(text)

    def _content(self, content: Any, state: _State) -> Iterator[StreamEvent]:
        if isinstance(content, str):
            yield from self._text(state, content)
            return
        for block in content or ():
            if isinstance(block, str):
                yield from self._text(state, block)
                continue
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                yield from self._text(state, str(block.get("text") or ""))
            elif btype == "reasoning":
                extras = block.get("extras") or {}
                yield from self._reasoning(
                    state, str(block.get("reasoning") or ""), block.get("index"),
                    extras.get("signature") or block.get("signature"),
                )
            elif btype == "thinking":
                yield from self._reasoning(
                    state, str(block.get("thinking") or ""), block.get("index"), block.get("signature")
                )
            elif btype == "redacted_thinking":
                yield from self._close_reasoning(state)
                yield ReasoningDone(ReasoningPart(redacted_data=block.get("data")))
            # tool_use / tool_call_chunk / input_json_delta blocks duplicate tool_call_chunks

    def _chunk(self, chunk: Any, state: _State) -> Iterator[StreamEvent]:
        from langchain_core.messages import AIMessage, AIMessageChunk

        if not isinstance(chunk, AIMessage):
            raise ModelError(
                f"{type(self.chat_model).__name__} streamed a {type(chunk).__name__}; expected AI message chunks"
            )
        reasoning = (chunk.additional_kwargs or {}).get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            yield from self._reasoning(state, reasoning, None, None)
        yield from self._content(chunk.content, state)
        if isinstance(chunk, AIMessageChunk):
            for part in chunk.tool_call_chunks:
                index, call_id = part.get("index"), part.get("id")
                call = _continued_call(state.calls, index, call_id)
                if call is None:
                    call = _Call(index=index)
                    state.calls.append(call)
                call.id = call.id or call_id
                call.name = call.name or part.get("name")
                if args := part.get("args"):
                    call.args.append(args)
        else:  # a model without streaming yields its whole AIMessage once
            for tc in chunk.tool_calls:
                yield from self._close_reasoning(state)
                yield _tool_call_event(tc.get("id"), tc.get("name"), tc.get("args") or {})
                state.emitted_calls += 1
            for bad in chunk.invalid_tool_calls:
                yield from self._close_reasoning(state)
                event = _tool_call_event(bad.get("id"), bad.get("name"), bad.get("args") or "")
                yield ToolCallEvent(
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    input=bad.get("args") or "",
                    input_error=bad.get("error") or event.input_error
                    or "the tool call arguments could not be parsed",
                )
                state.emitted_calls += 1
        usage = usage_from_langchain(chunk.usage_metadata)
        if usage is not None:
            yield UsageEvent(usage)
        finish = finish_reason_from_langchain(chunk.response_metadata)
        if finish is not None:
            state.finish = finish

    # -- errors --------------------------------------------------------------------------

    def translate_error(self, exc: Exception) -> TranslatedError:
        """LangChain's model errors (and status codes the integration's SDK reports) as
        agentkit errors; anything else becomes a plain :class:`ModelError`. Never retried
        here: the integration has already retried."""
        from langchain_core import exceptions as lce

        provider = self.provider
        status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
        status = status if isinstance(status, int) else None
        message = f"{type(self.chat_model).__name__} failed: {type(exc).__name__}: {exc}"
        fields: dict[str, Any] = {"provider": provider, "status_code": status}

        def is_a(*names: str) -> bool:
            return any(isinstance(exc, cls) for n in names if isinstance(cls := getattr(lce, n, None), type))

        text = str(exc).lower()
        error: ModelError
        if is_a("ContextOverflowError") or "context_length_exceeded" in text or "maximum context length" in text:
            error = ContextOverflowError(message, **fields)
        elif is_a("ModelAuthenticationError", "ModelPermissionDeniedError") or status in (401, 403):
            error = AuthenticationError(message, **fields)
        elif is_a("ModelRateLimitError") or status == 429:
            error = RateLimitError(message, **fields)
        elif (
            is_a("ModelAPIError", "ModelConnectionError", "ModelTimeoutError")
            or (status or 0) >= 500
            or isinstance(exc, json.JSONDecodeError)  # a garbage payload from the provider
        ):
            error = ProviderUnavailableError(message, **fields)
        elif is_a("ModelError") or status is not None:
            error = ProviderError(message, **fields)
        else:
            error = ModelError(message, provider=provider)
        return TranslatedError(error=error)
