"""Translation of the official SDKs' errors, shared by the OpenAI and Anthropic adapters.

Both SDKs raise the same shape of exception (``APIStatusError`` with a status code,
headers and a decoded body; ``APIConnectionError`` / ``APITimeoutError``). Each adapter's
``translate_error`` matches its own SDK's classes and hands the details to these
functions, which hold the one table of what a status or error type means.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import (
    AuthenticationError,
    ContextOverflowError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from ._retry import TranslatedError, parse_retry_after

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "exceed_context_size",
    "exceeds the available context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceed context limit",
)




def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """(message, type, code) from an error body in OpenAI or Anthropic shape."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            msg = inner.get("message")
            etype = inner.get("type")
            code = inner.get("code")
            return (
                msg if isinstance(msg, str) else None,
                etype if isinstance(etype, str) else None,
                str(code) if code is not None else None,
            )
        if isinstance(inner, str):
            return inner, None, None
    if isinstance(body, str) and body.strip():
        return body.strip(), None, None
    return None, None, None


def _is_overflow(status: int | None, message: str, etype: str | None, code: str | None) -> bool:
    if status == 413:
        return True
    if status is not None and not (400 <= status < 500 and status != 429):
        return False  # rate limits and server faults are never about the prompt's size
    haystack = " ".join(x for x in (message, etype or "", code or "") if x).lower()
    return any(marker in haystack for marker in _OVERFLOW_MARKERS)


def connection_failure(exc: BaseException, provider: str, label: str, *, timed_out: bool,
                       server: str | None = None) -> TranslatedError:
    """The SDK could not reach the server (or it timed out): transient. The message names
    ``server`` (the client's base URL) and where it came from."""
    what = "timed out" if timed_out else "could not be reached"
    where = f" at {server}" if server else ""
    hint = "" if timed_out or not server else (
        f"; check the server address (base_url=, or {provider.upper()}_BASE_URL in the environment) "
        f"and that the server is running"
    )
    return TranslatedError(
        error=ProviderUnavailableError(f"the {label} API {what}{where}: {str(exc).rstrip('.')}{hint}",
                                       provider=provider),
        retryable=True,
    )


def transport_failure(exc: BaseException, provider: str, label: str) -> TranslatedError | None:
    """An HTTP-client error (``httpx`` / ``httpx2``) the SDK let through unwrapped: the
    ``anthropic`` SDK does not wrap a read timeout or a dropped connection that happens
    while a stream is being read. None for anything else."""
    module = type(exc).__module__.split(".")[0]
    names = {c.__name__ for c in type(exc).__mro__}
    if module not in ("httpx", "httpx2") or not {"TransportError", "TimeoutException"} & names:
        return None
    timed_out = "TimeoutException" in names
    what = "timed out while streaming" if timed_out else "dropped the connection while streaming"
    return TranslatedError(
        error=ProviderUnavailableError(f"the {label} API {what}: {exc}", provider=provider), retryable=True
    )


def invalid_payload(exc: json.JSONDecodeError, provider: str, label: str) -> TranslatedError:
    """The server sent a stream event (or body) that is not JSON: a server fault, retried
    like one (only before any event was passed on)."""
    snippet = exc.doc[max(0, exc.pos - 40) : exc.pos + 40] if isinstance(exc.doc, str) else ""
    return TranslatedError(
        error=ProviderUnavailableError(
            f"the {label} API sent data that is not valid JSON ({exc.msg} at position {exc.pos}"
            + (f", near {snippet!r}" if snippet else "")
            + "); the server or a proxy in between is faulty",
            provider=provider,
        ),
        retryable=True,
    )


def translate_sdk_error(exc: Exception, sdk: Any, provider: str, label: str,
                        server: str | None = None) -> TranslatedError | None:
    """``exc`` raised through an official SDK module ``sdk`` (``openai`` or ``anthropic``,
    which share their exception classes' names and shapes), including the raw transport
    and JSON errors the SDK lets through; None for anything else. ``server`` (the
    client's base URL) is named when it cannot be reached."""
    if isinstance(exc, sdk.APIConnectionError):  # includes APITimeoutError
        return connection_failure(exc, provider, label, timed_out=isinstance(exc, sdk.APITimeoutError),
                                  server=server)
    if isinstance(exc, sdk.APIError):
        return api_failure(exc, provider, label)
    if isinstance(exc, json.JSONDecodeError):  # a garbage event in the stream
        return invalid_payload(exc, provider, label)
    return transport_failure(exc, provider, label)


def api_failure(exc: BaseException, provider: str, label: str) -> TranslatedError:
    """An SDK ``APIError`` (a status error, or an error event inside a stream)."""
    status: int | None = getattr(exc, "status_code", None)
    if status == 200:  # an error event inside a 200 stream (Anthropic)
        status = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if status is not None else None
    body = getattr(exc, "body", None)
    message, etype, code = _error_fields(body)
    message = message or str(getattr(exc, "message", "") or exc)
    where = f"{status}" if status is not None else "in stream"
    detail = f" ({etype or code})" if (etype or code) else ""
    text = f"{label} API error {where}{detail}: {message}"
    retry_after = parse_retry_after(headers)
    should_retry = headers.get("x-should-retry") if headers is not None else None
    fields: dict[str, Any] = {"provider": provider, "status_code": status}

    if status in (401, 403) or etype in ("authentication_error", "permission_error"):
        return TranslatedError(error=AuthenticationError(text, **fields))
    if _is_overflow(status, message, etype, code):
        return TranslatedError(error=ContextOverflowError(text, **fields))
    if status == 429 or etype in ("rate_limit_error",):
        # an exhausted quota is not transient: retrying cannot help
        transient = code != "insufficient_quota" and etype != "insufficient_quota"
        return TranslatedError(error=RateLimitError(text, **fields), retryable=transient, retry_after=retry_after)
    overloaded = etype in ("overloaded_error", "api_error", "server_error")
    if status is None and not overloaded and etype is None and code is None:
        overloaded = True  # an unexplained error event mid-stream: treat as a server fault
    if (status is not None and (status >= 500 or status == 408)) or overloaded:
        return TranslatedError(
            error=ProviderUnavailableError(text, **fields),
            retryable=should_retry != "false",
            retry_after=retry_after,
        )
    return TranslatedError(
        error=ProviderError(text, **fields), retryable=should_retry == "true", retry_after=retry_after
    )
