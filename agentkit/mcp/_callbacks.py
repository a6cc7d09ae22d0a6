"""The client half of MCP: answering a server's ``roots/list``, ``sampling/createMessage``
and ``elicitation/create``.

:class:`HostCallbacks` holds the host's settings (roots, sampling, elicitation) and builds,
per connection, the async callbacks the mcp SDK's ``Client`` takes. The host's handlers
are synchronous (they may call a model or wait for a person), so they run on a worker
thread; the event loop keeps serving every other server meanwhile. A callback that is not
configured is not passed to the SDK, so the capability is not advertised at all.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlparse

from .._threads import ModelStream
from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError
from ..messages import Message
from .host import (
    ApproveSampling,
    ElicitationHandler,
    ElicitationRequest,
    ElicitationResult,
    SamplingHandler,
    SamplingRequest,
    SamplingResult,
)
from .results import content_block_to_parts

__all__: list[str] = []

log = logging.getLogger("agentkit.mcp")

Roots = tuple[tuple[str, str], ...]
"""Normalised roots: ``(file:// URI, name)`` pairs."""

_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "tool-calls": "toolUse"}


def normalize_roots(roots: Any, where: str) -> Roots:
    """Directories (str / PathLike / ``file://`` URIs) or an execution context (its
    ``root_dir``) -> ``(uri, name)`` pairs. Raises ConfigurationError naming ``where``."""
    root_dir = getattr(roots, "root_dir", None)
    if root_dir is not None and not isinstance(roots, (str, os.PathLike)):
        roots = [root_dir]
    if isinstance(roots, (str, bytes, os.PathLike)) or not isinstance(roots, Sequence):
        raise ConfigurationError(
            f"{where} must be a list of directories (paths or file:// URIs) or an execution "
            f"context with a root_dir, not {type(roots).__name__}; e.g. roots=['/srv/project']"
        )
    out: list[tuple[str, str]] = []
    for item in roots:
        if isinstance(item, str) and item.startswith("file://"):
            parsed = urlparse(item)
            if parsed.netloc not in ("", "localhost"):
                raise ConfigurationError(f"{where}: {item!r} names a remote host; use a local file:// URI or path")
            uri, path = item, Path(parsed.path)
        elif isinstance(item, (str, os.PathLike)):
            path = Path(os.fspath(item)).expanduser().resolve()
            if not path.is_dir():
                raise ConfigurationError(f"{where}: {os.fspath(item)!r} is not an existing directory")
            uri = path.as_uri()
        else:
            raise ConfigurationError(f"{where}: each root must be a path or a file:// URI, not {item!r}")
        if uri not in (u for u, _ in out):
            out.append((uri, path.name or uri))
    return tuple(out)


def _sampling_messages(params: Any) -> tuple[Message, ...]:
    messages: list[Message] = []
    for msg in params.messages:
        blocks = msg.content if isinstance(msg.content, list) else [msg.content]
        parts: list[Any] = []
        for block in blocks:
            parts.extend(content_block_to_parts(block))
        if msg.role == "assistant":
            messages.append(Message(role="assistant", content=tuple(parts)))
        else:
            messages.append(Message(role="user", content=tuple(parts)))
    return tuple(messages)


def sampling_request(server: str, params: Any) -> SamplingRequest:
    """The SDK's ``CreateMessageRequestParams`` as an agentkit :class:`SamplingRequest`."""
    prefs = params.model_preferences
    hints = tuple(h.name for h in (prefs.hints or ()) if getattr(h, "name", None)) if prefs else ()
    return SamplingRequest(
        server=server, messages=_sampling_messages(params), max_tokens=int(params.max_tokens),
        system_prompt=params.system_prompt, temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()), model_hints=hints,
        metadata=params.metadata,
    )


_Sampler = Callable[[SamplingRequest, CancelToken], Union[SamplingResult, str]]
"""A sampling handler that also gets a token, set when the request is abandoned."""


def model_sampler(model: Any) -> _Sampler:
    """A sampler that asks ``model`` (a ChatModel), honouring ``max_tokens``; the model
    request is cancelled when the server's request is (or the toolset closes): reading
    stops at the next event, and the model's stream is closed however reading ends."""
    from ..models.base import FinishEvent, ModelRequest, ModelSettings, TextDelta

    def sample(request: SamplingRequest, cancel: CancelToken) -> SamplingResult:
        settings = ModelSettings(max_tokens=request.max_tokens, temperature=request.temperature,
                                 stop=request.stop_sequences or None)
        texts: list[str] = []
        reason: str | None = None
        model_request = ModelRequest(messages=request.messages, system=request.system_prompt,
                                     settings=settings, cancel=cancel)
        with ModelStream(model, model_request) as stream:
            for event in stream:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                elif isinstance(event, FinishEvent):
                    reason = event.reason
        name = getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__
        return SamplingResult(text="".join(texts), model=str(name),
                              stop_reason=_STOP_REASONS.get(reason or "", reason))

    return sample


SESSION = "session"
"""``sampling="session"`` / ``roots="session"``: follow the generation calling the tools."""


class SamplingRefused(Exception):
    """The host will not sample; the message is sent to the server as the reason."""


class Callers:
    """The tool calls in flight, with the model and execution context of the generation
    making each; ``sampling="session"`` and ``roots="session"`` follow them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._calls: dict[int, tuple[str, Any]] = {}

    @contextmanager
    def calling(self, server: str, model: Any) -> Iterator[None]:
        """Record a call to ``server`` made by a generation of ``model`` while it runs."""
        key = next(self._ids)
        with self._lock:
            self._calls[key] = (server, model)
        try:
            yield
        finally:
            with self._lock:
                del self._calls[key]

    def model_for(self, server: str) -> Any:
        """The model of the latest call in flight to ``server`` (else to any server of the
        toolset) made by a generation; None when there is none."""
        with self._lock:
            calls = [c for c in reversed(self._calls.values()) if c[1] is not None]
        for name, model in calls:
            if name == server:
                return model
        return calls[0][1] if calls else None


def session_sampler(callers: Callers) -> _Sampler:
    """``sampling="session"``: answer with the model of the generation calling the tools."""

    def sample(request: SamplingRequest, cancel: CancelToken) -> SamplingResult | str:
        model = callers.model_for(request.server)
        if model is None:
            raise SamplingRefused(
                f"the host refused the sampling request: MCP server {request.server!r} asked to sample "
                f"while no agent generation was calling its tools (sampling='session' answers only "
                f"during a tool call made by a Session or run_agent)"
            )
        return model_sampler(model)(request, cancel)

    return sample


def elicitation_request(server: str, params: Any) -> ElicitationRequest:
    """The SDK's ``ElicitRequestParams`` as an agentkit :class:`ElicitationRequest`."""
    mode = getattr(params, "mode", "form") or "form"
    if mode == "url":
        return ElicitationRequest(server=server, message=params.message, mode="url", url=params.url,
                                  elicitation_id=getattr(params, "elicitation_id", None))
    return ElicitationRequest(server=server, message=params.message, mode="form",
                              requested_schema=getattr(params, "requested_schema", None))


def _elicitation_answer(answer: Any) -> ElicitationResult:
    if answer is None:
        return ElicitationResult.decline()
    if isinstance(answer, ElicitationResult):
        return answer
    if isinstance(answer, Mapping):
        return ElicitationResult.accept(answer)
    raise TypeError(f"the elicitation handler must return an ElicitationResult, a dict (accept) or None "
                    f"(decline), not {type(answer).__name__}")


def _check_form(request: ElicitationRequest, result: ElicitationResult) -> str | None:
    """Why ``result`` does not fit the requested schema (None when it does)."""
    if result.action != "accept" or request.mode != "form" or not request.requested_schema:
        return None
    import jsonschema

    try:
        jsonschema.validate(dict(result.content or {}), dict(request.requested_schema))
    except jsonschema.ValidationError as exc:
        return f"the answer does not match the requested schema: {exc.message}"
    except jsonschema.SchemaError:
        return None  # the server's schema is broken; let the server judge the answer
    return None


class HostCallbacks:
    """The host's answers to server requests, shared by every connection of a toolset."""

    def __init__(self, *, sampling: Any = None, approve_sampling: ApproveSampling | None = None,
                 elicitation: ElicitationHandler | None = None) -> None:
        self.callers = Callers()
        self.sampler: _Sampler | None
        if isinstance(sampling, str) and sampling == SESSION:
            self.sampler = session_sampler(self.callers)
            sampling = None
        elif isinstance(sampling, str):  # a model spec, e.g. "openai:gpt-4.1-mini"
            from ..models.registry import get_model

            sampling = get_model(sampling)
            self.sampler = model_sampler(sampling)
        elif sampling is not None and hasattr(sampling, "stream") and callable(sampling.stream):
            self.sampler = model_sampler(sampling)
        elif sampling is None:
            self.sampler = None
        elif callable(sampling):
            handler: SamplingHandler = sampling
            self.sampler = lambda request, _cancel: handler(request)
        else:
            raise ConfigurationError(f"sampling must be a ChatModel, a model spec such as "
                                     f"'openai:gpt-4.1-mini', 'session' (the model of the generation "
                                     f"calling the tools) or a callable handler(request), "
                                     f"not {type(sampling).__name__}")
        if approve_sampling is not None and not callable(approve_sampling):
            raise ConfigurationError("approve_sampling must be a callable (request) -> bool")
        if elicitation is not None and not callable(elicitation):
            raise ConfigurationError("elicitation must be a callable handler(request) -> ElicitationResult")
        self.approve = approve_sampling
        self.elicitor = elicitation

    def for_server(self, server: str, get_roots: Callable[[], Roots | None],
                   on_roots_listed: Callable[[], None] | None = None) -> dict[str, Any]:
        """The ``mcp.Client`` keyword arguments for ``server``'s callbacks."""
        # long: each callback is a closure over this server's name, roots and the host's
        # handlers, and is offered only when configured; the three are kept side by side
        import anyio.to_thread
        import mcp_types as types

        kwargs: dict[str, Any] = {}

        def error(message: str) -> Any:
            return types.ErrorData(code=types.INVALID_REQUEST, message=message)

        if get_roots() is not None:
            async def list_roots(_context: Any) -> Any:
                roots = get_roots() or ()
                if on_roots_listed is not None:
                    on_roots_listed()
                return types.ListRootsResult(roots=[types.Root.model_validate({"uri": uri, "name": name})
                                                     for uri, name in roots])

            kwargs["list_roots_callback"] = list_roots

        sampler, approve = self.sampler, self.approve
        if sampler is not None:
            def answer_sampling(params: Any, cancel: CancelToken) -> Any:
                request = sampling_request(server, params)
                if approve is not None:
                    try:
                        verdict = approve(request)
                    except Exception as exc:  # noqa: BLE001 - a refusal, reported to the server
                        return error(f"the host refused the sampling request: {exc}")
                    if verdict is False:
                        return error("the host refused the sampling request")
                try:
                    answer = sampler(request, cancel)
                except SamplingRefused as exc:
                    return error(str(exc))
                except CancelledError as exc:  # the server's request was abandoned: nobody waits
                    return error(f"the host stopped sampling: {exc}")
                except Exception as exc:  # noqa: BLE001 - reported to the server
                    log.warning("MCP server %r: the sampling handler failed", server, exc_info=True)
                    return error(f"the host could not sample: {type(exc).__name__}: {exc}")
                if isinstance(answer, str):
                    answer = SamplingResult(text=answer)
                if not isinstance(answer, SamplingResult):
                    return error("the host's sampling handler returned neither a SamplingResult nor a str")
                try:
                    return types.CreateMessageResult(
                        role="assistant", content=types.TextContent(type="text", text=answer.text),
                        model=answer.model, stop_reason=answer.stop_reason,
                    )
                except ValueError as exc:  # pydantic: text or model not a str
                    return error(f"the host's sampling answer cannot be sent: {exc}".splitlines()[0])

            async def sampling_callback(_context: Any, params: Any) -> Any:
                cancel = CancelToken()
                try:
                    return await anyio.to_thread.run_sync(answer_sampling, params, cancel, abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    cancel.cancel("the MCP server's sampling request was cancelled")
                    raise

            kwargs["sampling_callback"] = sampling_callback

        elicitor = self.elicitor
        if elicitor is not None:
            def answer_elicitation(params: Any) -> Any:
                request = elicitation_request(server, params)
                try:
                    result = _elicitation_answer(elicitor(request))
                except Exception as exc:  # noqa: BLE001 - reported to the server
                    log.warning("MCP server %r: the elicitation handler failed", server, exc_info=True)
                    return error(f"the host could not answer the elicitation: {type(exc).__name__}: {exc}")
                problem = _check_form(request, result)
                if problem is not None:
                    return error(problem)
                content = dict(result.content) if result.action == "accept" and result.content is not None else None
                try:
                    return types.ElicitResult(action=result.action, content=content)
                except ValueError as exc:  # pydantic: not flat strings, numbers, booleans
                    return error(f"the host's elicitation answer cannot be sent: {exc}".splitlines()[0]
                                 + " (answer with a flat dict of strings, numbers, booleans or lists "
                                   "of strings)")

            async def elicitation_callback(_context: Any, params: Any) -> Any:
                return await anyio.to_thread.run_sync(answer_elicitation, params, abandon_on_cancel=True)

            kwargs["elicitation_callback"] = elicitation_callback
        return kwargs

