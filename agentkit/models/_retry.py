"""The retry loop of the provider adapters.

Retrying only: which errors exist and whether they are transient is decided by each
adapter's ``translate_error`` (see :mod:`agentkit.models.adapter`), which hands back a
:class:`TranslatedError`. The SDKs' own retries are switched off (``max_retries=0``) and
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
from ..errors import AgentkitError, CancelledError, ConfigurationError, ModelError, ProviderUnavailableError
from .base import StreamEvent

__all__ = ["RetryInfo", "RetryPolicy", "TranslatedError", "stream_with_retries"]

log = logging.getLogger("agentkit.models")

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


@dataclass(frozen=True, kw_only=True)
class TranslatedError:
    """What an adapter's ``translate_error`` makes of a foreign exception."""

    error: ModelError
    """The agentkit error to raise (most specific type; ``provider``/``status_code`` set)."""
    retryable: bool = False
    """Whether another attempt may succeed (only taken before any stream event was yielded)."""
    retry_after: float | None = None
    """Seconds the server asked to wait (``Retry-After``), if it said."""


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


def stream_with_retries(
    open_stream: Callable[[], Iterator[StreamEvent]],
    *,
    translate: Callable[[Exception], TranslatedError | None],
    policy: RetryPolicy,
    cancel: CancelToken,
    on_retry: Callable[[RetryInfo], Any] | None = None,
) -> Iterator[StreamEvent]:
    """Run ``open_stream()`` and yield its events, retrying transient failures that
    happen before the first event.

    A foreign exception goes through ``translate`` (the adapter's ``translate_error``);
    what it returns is raised, or retried when it says so. An exception it returns None
    for propagates unchanged, and so do agentkit's own errors, except that an adapter's
    :class:`~agentkit.errors.ProviderUnavailableError` (an empty stream, say) is retried.
    """
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
        except AgentkitError as exc:
            # agentkit errors raised by the adapter itself: only an unavailable server
            # (e.g. an empty stream) is worth another attempt
            if yielded or not isinstance(exc, ProviderUnavailableError):
                raise
            failure = TranslatedError(error=exc, retryable=True)
            cause: BaseException | None = None
        except Exception as exc:
            if cancel.cancelled:
                raise CancelledError(cancel.reason) from exc
            maybe = translate(exc)
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
            raise CancelledError(cancel.reason) from (cause or error)


def _exhausted(
    error: ModelError,
    attempts: int,
    *,
    waited: float | None = None,
    wanted: float | None = None,
    budget: float | None = None,
) -> ModelError:
    """``error`` with why retrying stopped added to its message. The error itself is
    amended (never rebuilt through its constructor, whose signature an adapter's own
    error type may not share), so its type and every attribute stay as they were."""
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
    error.args = (f"{error} ({why}{hint})", *error.args[1:])
    return error
