"""Retries and error translation shared by the provider adapters.

Both official SDKs raise the same shape of exception (``APIStatusError`` with a status
code, headers and a decoded body; ``APIConnectionError`` / ``APITimeoutError``), so one
classifier serves both. The SDKs' own retries are switched off (``max_retries=0``) and
:func:`stream_with_retries` is the only retry loop: exponential backoff with jitter,
honouring ``Retry-After``, bounded in count and total time, cancellable while waiting,
and never after a stream event has been yielded.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    AuthenticationError,
    CancelledError,
    ConfigurationError,
    ContextOverflowError,
    ModelError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from .base import StreamEvent

__all__ = ["RetryInfo", "RetryPolicy"]

log = logging.getLogger("agentkit.models")

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


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How a provider adapter retries transient failures (429, 408, 5xx, 529 overloaded,
    connection errors).

    The wait before retry ``n`` (0-based) is ``initial_delay * 2**n`` capped at
    ``max_delay``, reduced by up to ``jitter`` (a fraction), and never shorter than the
    server's ``Retry-After``. Retrying stops after ``max_retries`` retries or when the
    next wait would pass ``max_elapsed`` seconds since the first attempt.
    """

    max_retries: int = 4
    initial_delay: float = 0.5
    max_delay: float = 20.0
    max_elapsed: float = 120.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for name in ("initial_delay", "max_delay", "max_elapsed"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
                raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def backoff(self, retry_index: int) -> float:
        """The backoff before retry ``retry_index`` (0-based), jitter applied."""
        base = min(self.max_delay, self.initial_delay * (2.0 ** min(retry_index, 60)))
        return base * (1.0 - self.jitter * random.random())


@dataclass(frozen=True, kw_only=True)
class RetryInfo:
    """Passed to an adapter's ``on_retry`` callback before each wait."""

    attempt: int
    """The attempt that failed (1 is the first request)."""
    delay: float
    """Seconds agentkit will wait before the next attempt."""
    error: ModelError
    """The translated error of the failed attempt."""
    retry_after: float | None
    """What the server asked for (``Retry-After``), if it said."""


@dataclass(frozen=True)
class _Failure:
    error: ModelError
    retryable: bool
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
            if math.isfinite(ms) and ms >= 0:
                return ms / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, float(email.utils.mktime_tz(parsed) - time.time()))
    except (TypeError, ValueError, OverflowError):
        return None


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


def _is_transport_error(exc: BaseException, cls_names: set[str]) -> bool:
    """An HTTP-client error (``httpx`` / ``httpx2``) the SDK let through unwrapped: the
    ``anthropic`` SDK does not wrap a read timeout or a dropped connection that happens
    while a stream is being read."""
    module = type(exc).__module__.split(".")[0]
    return module in ("httpx", "httpx2") and bool({"TransportError", "TimeoutException"} & cls_names)


def classify(exc: BaseException, provider: str) -> _Failure | None:
    """Translate an SDK exception into an agentkit error; None when it is not an SDK
    API error (it then propagates unchanged)."""
    cls_names = {c.__name__ for c in type(exc).__mro__}
    label = provider.capitalize() if provider != "openai" else "OpenAI"
    transport = _is_transport_error(exc, cls_names)
    if "APIConnectionError" in cls_names or transport:  # includes timeouts
        timed_out = bool({"APITimeoutError", "TimeoutException"} & cls_names)
        what = "timed out" if timed_out else "could not be reached"
        if transport:  # raised while reading an open stream, not while connecting
            what = "timed out while streaming" if timed_out else "dropped the connection while streaming"
        return _Failure(
            ProviderUnavailableError(f"the {label} API {what}: {exc}", provider=provider), True
        )
    if "APIError" not in cls_names:
        return None
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

    if status in (401, 403) or etype in ("authentication_error", "permission_error"):
        return _Failure(AuthenticationError(text, provider=provider, status_code=status), False)
    if _is_overflow(status, message, etype, code):
        err = ContextOverflowError(text)
        err.provider = provider  # type: ignore[attr-defined]
        err.status_code = status  # type: ignore[attr-defined]
        return _Failure(err, False)
    if status == 429 or etype in ("rate_limit_error",):
        # an exhausted quota is not transient: retrying cannot help
        transient = code != "insufficient_quota" and etype != "insufficient_quota"
        return _Failure(
            RateLimitError(text, provider=provider, status_code=status), transient, retry_after
        )
    overloaded = etype in ("overloaded_error", "api_error", "server_error")
    if status is None and not overloaded and etype is None and code is None:
        overloaded = True  # an unexplained error event mid-stream: treat as a server fault
    if (status is not None and (status >= 500 or status == 408)) or overloaded:
        retry = should_retry != "false"
        return _Failure(
            ProviderUnavailableError(text, provider=provider, status_code=status), retry, retry_after
        )
    retry = should_retry == "true"
    return _Failure(ProviderError(text, provider=provider, status_code=status), retry, retry_after)


def stream_with_retries(
    open_stream: Callable[[], Iterator[StreamEvent]],
    *,
    provider: str,
    policy: RetryPolicy,
    cancel: CancelToken,
    on_retry: Callable[[RetryInfo], Any] | None = None,
) -> Iterator[StreamEvent]:
    """Run ``open_stream()`` and yield its events, retrying transient failures that
    happen before the first event. SDK errors come out as agentkit errors."""
    start = time.monotonic()
    attempt = 0
    while True:
        cancel.raise_if_cancelled()
        attempt += 1
        yielded = False
        events: Iterator[StreamEvent] | None = None
        try:
            events = open_stream()
            for event in events:
                yielded = True
                yield event
            return
        except (ModelError, CancelledError) as exc:
            # agentkit errors raised by the adapter itself: only an unavailable server
            # (e.g. an empty stream) is worth another attempt
            if yielded or not isinstance(exc, ProviderUnavailableError):
                raise
            failure = _Failure(exc, True)
            cause: BaseException = exc
        except Exception as exc:
            if cancel.cancelled:
                raise CancelledError(cancel.reason) from exc
            maybe = classify(exc, provider)
            if maybe is None:
                raise
            failure = maybe
            cause = exc
            if yielded or not failure.retryable:
                raise failure.error from exc
        finally:
            # release the HTTP stream now, also when the caller stops iterating early
            close = getattr(events, "close", None)
            if close is not None:
                close()
        error = failure.error
        if attempt > policy.max_retries:
            raise _exhausted(error, attempt) from cause
        delay = max(policy.backoff(attempt - 1), failure.retry_after or 0.0)
        elapsed = time.monotonic() - start
        if elapsed + delay > policy.max_elapsed:
            budget = policy.max_elapsed
            raise _exhausted(error, attempt, waited=elapsed, wanted=delay, budget=budget) from cause
        log.info("%s; retrying in %.2fs (attempt %d)", error, delay, attempt + 1)
        if on_retry is not None:
            on_retry(RetryInfo(attempt=attempt, delay=delay, error=error, retry_after=failure.retry_after))
        if cancel.wait(delay):
            raise CancelledError(cancel.reason) from cause


def _exhausted(
    error: ModelError,
    attempts: int,
    *,
    waited: float | None = None,
    wanted: float | None = None,
    budget: float | None = None,
) -> ModelError:
    if attempts == 1 and waited is None:
        return error
    if waited is not None:
        why = (
            f"giving up after {attempts} attempt(s): waiting {wanted:.1f}s more would pass the "
            f"retry time budget of {budget:.1f}s"
        )
    else:
        why = f"giving up after {attempts} attempts"
    hint = "; a larger RetryPolicy(max_retries=..., max_elapsed=...) retries longer"
    new = type(error)(
        f"{error} ({why}{hint})",
        provider=getattr(error, "provider", ""),
        status_code=getattr(error, "status_code", None),
    )
    return new
