"""Google Gemini behind the ChatModel port.

Built on the official ``google-genai`` SDK's synchronous client
(``models.generate_content_stream``, or ``generate_content`` with ``stream=False``).
Install with ``pip install 'sync-agentkit[gemini]'``. Messages are converted in
:mod:`agentkit.models._gemini_messages` (which also says how thought signatures are
kept), answers read in :mod:`agentkit.models._gemini_stream`; the SDK's errors are
translated here.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._threads import run_and_wait
from ..cancel import CancelToken
from ..errors import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    MissingDependencyError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from ._common import check_tool_choice
from ._errors import _is_overflow, connection_failure, transport_failure
from ._gemini_messages import system_instruction, to_gemini_contents
from ._gemini_stream import gemini_events
from ._retry import RetryInfo, RetryPolicy, TranslatedError, parse_retry_after
from ._sdk import _Interrupter
from .adapter import ProviderModel
from .base import ModelRequest, OutputMode, StreamEvent

try:
    from google import genai as _genai
    from google.genai import errors as _genai_errors
    from google.genai import types as _genai_types
except ImportError:  # pragma: no cover - exercised when the extra is missing
    _genai = None  # type: ignore[assignment]

__all__ = ["GeminiModel"]

_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
# what Gemini says when the prompt does not fit the model's context window
_OVERFLOW = ("input token count", "exceeds the maximum number of tokens", "exceeds the maximum input")
_AUTH_REASONS = ("API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED", "API_KEY_HTTP_REFERRER_BLOCKED")
_ENV_KEYS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")  # the SDK's own order
_BEFORE_3 = re.compile(r"^(models/)?gemini-[12](\.|-)")  # no response schema together with function calling
_local = threading.local()  # the exchange whose request the current thread sends


class GeminiModel(ProviderModel):
    """A Gemini model on the Gemini API (``google:<model>``).

    ``GeminiModel("gemini-2.5-flash")`` reads ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``
    (as the SDK does); ``api_key=`` may also be a callable, asked before every attempt.
    ``base_url`` is the host root (``https://generativelanguage.googleapis.com``, or a
    gateway or test server; the SDK's ``GOOGLE_GEMINI_BASE_URL`` works too);
    ``api_version`` picks the path version (the SDK's default, else e.g. ``"v1beta"``).
    The SDK's own retries stay off: ``retry`` (a :class:`RetryPolicy`) is the only
    retry loop. ``stream=False`` makes plain ``generateContent`` calls.

    Thinking: ``ModelSettings.reasoning_budget`` is sent as
    ``thinking_config.thinking_budget`` and ``reasoning_effort`` as ``thinking_level``
    (not both). Thought summaries are asked for (``include_thoughts``) when either is set
    (``include_thoughts=True`` or ``False`` decides it always) and stream as
    :class:`ReasoningDelta`; thought signatures are kept in the assistant message and sent
    back on their parts. Gemini's function calls rarely carry ids: agentkit gives them
    ids of its own and answers them by name and order, as Gemini requires.

    A structured output (``output_type=``) is asked for as ``response_json_schema`` with
    ``response_mime_type="application/json"``; ``output_mode="tool"`` gets it through a
    final-answer tool instead. ``provider_options`` are ``GenerateContentConfig`` fields
    (snake_case, e.g. ``{"cached_content": "cachedContents/..."}``) and win over
    agentkit's; they are checked against the SDK's config before any request.
    """

    provider = "google"
    output_mode: OutputMode = "json-schema"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | Callable[[], str] | None = None,
        base_url: str | None = None,
        stream: bool = True,
        api_version: str | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryInfo], Any] | None = None,
        include_thoughts: bool | None = None,
        output_mode: OutputMode = "json-schema",
    ) -> None:
        if _genai is None:
            raise MissingDependencyError("google-genai", "gemini", "GeminiModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError("GeminiModel needs a model name, e.g. 'gemini-2.5-flash'")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry must be an agentkit.models.RetryPolicy")
        if output_mode not in ("json-schema", "tool"):
            raise ConfigurationError(f"output_mode must be 'json-schema' or 'tool', got {output_mode!r}")
        if api_key is not None and not isinstance(api_key, str) and not callable(api_key):
            raise ConfigurationError(
                f"GeminiModel: api_key must be a str or a callable returning one (asked before every "
                f"request), not {type(api_key).__name__}"
            )
        if base_url is not None and (not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))):
            raise ConfigurationError(
                f"base_url must be an http(s) URL of the host root, e.g. 'https://generativelanguage.googleapis.com', "
                f"got {base_url!r}"
            )
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.model_name = model
        self.output_mode = output_mode
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._stream = stream
        self._include_thoughts = include_thoughts
        self._api_key = api_key if callable(api_key) else None
        key = api_key if isinstance(api_key, str) else None
        if key is None and self._api_key is None:
            key = next((os.environ[k] for k in _ENV_KEYS if os.environ.get(k)), None)
        if key is None:
            if self._api_key is None and base_url is None and not os.environ.get("GOOGLE_GEMINI_BASE_URL"):
                raise ConfigurationError(
                    "no Gemini API key: set the GOOGLE_API_KEY (or GEMINI_API_KEY) environment variable "
                    "or pass api_key="
                )
            key = "not-needed"  # a gateway or local server; a callable key replaces it per request
        options: dict[str, Any] = {
            # each response is handed to the attempt that sent it, so a cancel can shut its
            # connection down (see _Exchange)
            "client_args": {"event_hooks": {"response": [_on_response]}},
        }
        if base_url is not None:
            options["base_url"] = base_url
        if api_version is not None:
            options["api_version"] = api_version
        if timeout is not None:
            options["timeout"] = int(timeout * 1000)  # the SDK counts milliseconds
        if default_headers:
            options["headers"] = dict(default_headers)
        # no retry_options: the SDK then tries once, and agentkit's loop retries
        self._client = _genai.Client(api_key=key, http_options=_genai_types.HttpOptions(**options))

    def __repr__(self) -> str:
        return f"GeminiModel({self.model_name!r}, base_url={self._server()!r})"

    def _server(self) -> str:
        """The host the client talks to (for messages)."""
        options = getattr(getattr(self._client, "_api_client", None), "_http_options", None)
        return str(getattr(options, "base_url", None) or "")

    # -- the port ----------------------------------------------------------------------

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """The google-genai SDK's errors (``APIError`` with its ``ClientError`` and
        ``ServerError``, unparseable bodies, and the raw httpx errors it lets through) as
        agentkit errors; None for anything else."""
        if isinstance(exc, _genai_errors.APIError):
            return _api_failure(exc)
        if isinstance(exc, _genai_errors.UnknownApiResponseError):
            return TranslatedError(
                error=ProviderUnavailableError(f"the Gemini API sent data that is not valid JSON: {exc}",
                                               provider="google"),
                retryable=True,
            )
        names = {c.__name__ for c in type(exc).__mro__}
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2") and (
            "ConnectError" in names or "TimeoutException" in names
        ):  # not reached, or no answer within the timeout
            return connection_failure(exc, "google", "Gemini", timed_out="TimeoutException" in names,
                                      server=self._server())
        return transport_failure(exc, "google", "Gemini")

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        params = self.build_params(request)
        cancel = request.cancel
        models: Any = self._client.models  # config is a dict of GenerateContentConfig fields

        def attempt() -> Iterator[StreamEvent]:
            config = self._with_key(params["config"])
            exchange = _Exchange(cancel)
            try:
                if not self._stream:
                    response = run_and_wait(lambda: exchange.run(
                        lambda: models.generate_content(model=params["model"], contents=params["contents"],
                                                        config=config)),
                        cancel=cancel, name="agentkit-model-call")
                    yield from gemini_events(iter([response]), cancel)
                    return
                chunks = models.generate_content_stream(model=params["model"], contents=params["contents"],
                                                        config=config)
                try:
                    # the request goes out with the first read, on a helper thread: a cancel
                    # meanwhile returns at once, and shuts the connection once it is open
                    first = run_and_wait(lambda: exchange.run(lambda: next(chunks, None)), cancel=cancel,
                                         name="agentkit-model-call", abandoned=lambda _: chunks.close())
                except BaseException:
                    if not cancel.cancelled:
                        chunks.close()
                    raise
                try:
                    yield from gemini_events(_chain(first, chunks), cancel)
                finally:
                    chunks.close()
            finally:
                exchange.forget()

        return attempt

    def _with_key(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` carrying, as a per-request header, the key the callable gives now."""
        if self._api_key is None:
            return config
        try:
            key = self._api_key()
        except Exception as exc:
            raise AuthenticationError(
                f"the api_key callable of google model {self.model_name!r} raised {type(exc).__name__}: "
                f"{exc}; nothing was sent", provider="google",
            ) from exc
        if not isinstance(key, str) or not key:
            raise AuthenticationError(
                f"the api_key callable of google model {self.model_name!r} must return a non-empty str, "
                f"got {key!r}; nothing was sent", provider="google",
            )
        http = dict(config.get("http_options") or {})
        http["headers"] = {**(http.get("headers") or {}), "x-goog-api-key": key}
        return {**config, "http_options": http}

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """``{"model", "contents", "config"}``: what agentkit hands the SDK (``config`` in
        ``GenerateContentConfig`` field names, after ``provider_options``)."""
        check_tool_choice(request)
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        system = system_instruction(request.system, request.messages)
        if system is not None:
            config["system_instruction"] = system
        if request.tools:
            config["tools"] = [{"function_declarations": [
                {"name": t.name, "description": t.description, "parameters_json_schema": dict(t.input_schema)}
                for t in request.tools
            ]}]
            choice = request.tool_choice
            calling: dict[str, Any] = {"mode": _MODES.get(choice, "ANY")}
            if choice not in _MODES:
                calling["allowed_function_names"] = [choice]
            config["tool_config"] = {"function_calling_config": calling}
        s = request.settings
        for name, value in (("temperature", s.temperature), ("top_p", s.top_p),
                            ("max_output_tokens", s.max_tokens), ("seed", s.seed)):
            if value is not None:
                config[name] = value
        if s.stop:
            config["stop_sequences"] = list(s.stop)
        thinking = self._thinking(request)
        if thinking:
            config["thinking_config"] = thinking
        output = request.output
        if output is not None and output.mode == "json-schema":
            if request.tools and _BEFORE_3.match(self.model_name):
                raise ConfigurationError(
                    f"{self.model_name} cannot combine a response schema (output_type=) with function calling "
                    f"(Gemini 3 can); use GeminiModel({self.model_name!r}, output_mode='tool') to get the output "
                    f"through a final-answer function call"
                )
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = dict(output.schema)
        config.update(request.provider_options)
        try:
            _genai_types.GenerateContentConfig.model_validate(config)
        except ValueError as exc:  # pydantic's ValidationError
            raise ConfigurationError(
                f"the Gemini request config is not valid (provider_options are GenerateContentConfig "
                f"fields, snake_case): {exc}"
            ) from None
        return {"model": self.model_name, "contents": to_gemini_contents(request.messages), "config": config}

    def _thinking(self, request: ModelRequest) -> dict[str, Any]:
        s = request.settings
        if s.reasoning_budget is not None and s.reasoning_effort is not None:
            raise ConfigurationError(
                "Gemini takes a thinking budget (ModelSettings.reasoning_budget) or a thinking level "
                "(ModelSettings.reasoning_effort), not both; set one of them"
            )
        thinking: dict[str, Any] = {}
        if s.reasoning_budget is not None:
            thinking["thinking_budget"] = s.reasoning_budget
        if s.reasoning_effort is not None:
            thinking["thinking_level"] = s.reasoning_effort.upper()
        include = self._include_thoughts if self._include_thoughts is not None else bool(thinking)
        if include or self._include_thoughts is False:
            thinking["include_thoughts"] = include
        return thinking


# -- one exchange: the HTTP response under a stream, for the cancel ----------------------


class _Exchange:
    """One attempt's HTTP response, handed over by the client's response hook on the
    thread that sends the request: from then until the attempt ends, cancelling the
    token shuts its connection down (``_Interrupter`` reads ``.response``), so a read
    blocked on a silent server ends, also on a helper thread a cancel left behind."""

    def __init__(self, cancel: CancelToken) -> None:
        self.cancel = cancel
        self.response: Any = None
        self._forget: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        _local.exchange = self
        try:
            return fn()
        finally:
            _local.exchange = None

    def attach(self, response: Any) -> None:
        with self._lock:
            self.response = response
            if self._forget is not None:
                self._forget()
            # at once when the token is already cancelled
            self._forget = self.cancel._on_cancel(_Interrupter(self))

    def forget(self) -> None:
        with self._lock:
            if self._forget is not None:
                self._forget()
                self._forget = None


def _on_response(response: Any) -> None:
    exchange = getattr(_local, "exchange", None)
    if exchange is not None:
        exchange.attach(response)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
        yield from rest


# -- errors ----------------------------------------------------------------------------


def _api_failure(exc: Any) -> TranslatedError:
    """A Gemini ``APIError``: ``code`` (HTTP status), ``status`` (``RESOURCE_EXHAUSTED``...),
    ``message`` and ``details`` (the error body, with ``google.rpc`` detail objects)."""
    code: int | None = exc.code if isinstance(exc.code, int) else None
    status = exc.status if isinstance(exc.status, str) else None
    message = exc.message if isinstance(exc.message, str) and exc.message else str(exc)
    details = _details(exc.details)
    text = f"Gemini API error {code if code is not None else 'in stream'}" + (f" ({status})" if status else "")
    text += f": {message}"
    fields: dict[str, Any] = {"provider": "google", "status_code": code}
    reasons = {str(d.get("reason")) for d in details if d.get("reason")}
    if code in (401, 403) or status in ("UNAUTHENTICATED", "PERMISSION_DENIED") or reasons & set(_AUTH_REASONS):
        return TranslatedError(error=AuthenticationError(text, **fields))
    lowered = message.lower()
    if (code is None or 400 <= code < 500 and code != 429) and (
        any(m in lowered for m in _OVERFLOW) or _is_overflow(code, message, status, None)
    ):
        return TranslatedError(error=ContextOverflowError(text, **fields))
    response = getattr(exc, "response", None)
    retry_after = _retry_delay(details)
    if retry_after is None:
        retry_after = parse_retry_after(getattr(response, "headers", None))
    if code == 429 or status == "RESOURCE_EXHAUSTED":
        # a daily quota used up is not transient: retrying within minutes cannot help
        daily = any("PerDay" in str(v.get("quotaId", "")) for d in details
                    for v in d.get("violations") or [] if isinstance(v, dict))
        return TranslatedError(error=RateLimitError(text, **fields), retryable=not daily, retry_after=retry_after)
    if code is not None and (code >= 500 or code == 408) or status in ("UNAVAILABLE", "INTERNAL",
                                                                       "DEADLINE_EXCEEDED"):
        return TranslatedError(error=ProviderUnavailableError(text, **fields), retryable=True,
                               retry_after=retry_after)
    return TranslatedError(error=ProviderError(text, **fields))


def _details(body: Any) -> list[dict[str, Any]]:
    """The ``google.rpc`` detail objects of an error body."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    found = inner.get("details") if isinstance(inner, Mapping) else None
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _retry_delay(details: list[dict[str, Any]]) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "3s"``)."""
    for d in details:
        delay = d.get("retryDelay")
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                seconds = float(delay[:-1])
            except ValueError:
                continue
            if seconds >= 0:
                return seconds
    return None
