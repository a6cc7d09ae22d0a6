"""The shared base of the adapters built on an official SDK (``openai``, ``anthropic``)."""

from __future__ import annotations

import socket
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._threads import run_and_wait
from ..cancel import CancelToken
from ..errors import AuthenticationError
from ._common import KEY_PLACEHOLDER, sdk_call_kwargs
from .adapter import ProviderModel
from .base import ModelRequest, StreamEvent


class SDKModel(ProviderModel):
    """``prepare()`` for an SDK-backed adapter: build the body (raising on bad input
    before any I/O) and call the SDK method once per attempt. While a streamed response
    is open, cancelling the request's token shuts its connection down from the
    cancelling thread, so a read blocked on a server that sends only keep-alives (or
    nothing) ends at once. Each adapter implements the abstract methods.

    With a callable ``api_key`` (kept in ``_api_key``), the key is asked for before every
    attempt and sent in the auth header the SDK would send it in, so an expiring token is
    replaced between requests and between retries."""

    _client: Any
    _api_key: Callable[[], str] | None = None

    @abstractmethod
    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``request``; raises on bad input."""

    @abstractmethod
    def _create(self) -> Callable[..., Any]:
        """The SDK method that starts one attempt."""

    @abstractmethod
    def _events(self, response: Any, kwargs: dict[str, Any], cancel: CancelToken) -> Iterator[StreamEvent]:
        """Translate one SDK response into agentkit stream events."""

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        params = self.build_params(request)
        create = self._create()
        kwargs = sdk_call_kwargs(create, params)
        cancel = request.cancel

        def attempt() -> Iterator[StreamEvent]:
            response = self._open(create, kwargs, cancel)
            forget = cancel._on_cancel(_Interrupter(response))
            try:
                yield from self._events(response, kwargs, cancel)
            finally:
                forget()

        return attempt

    def _open(self, create: Callable[..., Any], kwargs: dict[str, Any], cancel: CancelToken) -> Any:
        """Send one request (with the key the ``api_key`` callable gives now): the SDK's
        response, or its stream once the server answered."""
        call_kwargs = kwargs if self._api_key is None else self._with_key(kwargs)
        return _call_until_cancelled(create, call_kwargs, cancel)

    def _with_key(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the auth header of the key the ``api_key`` callable gives now."""
        assert self._api_key is not None
        try:
            key = self._api_key()
        except Exception as exc:
            raise AuthenticationError(
                f"the api_key callable of {self.provider} model {self.model_name!r} raised "
                f"{type(exc).__name__}: {exc}; nothing was sent", provider=self.provider,
            ) from exc
        if not isinstance(key, str) or not key:
            raise AuthenticationError(
                f"the api_key callable of {self.provider} model {self.model_name!r} must return a "
                f"non-empty str, got {key!r}; nothing was sent", provider=self.provider,
            )
        auth = {name: value.replace(KEY_PLACEHOLDER, key) for name, value in self._client.auth_headers.items()
                if KEY_PLACEHOLDER in value}
        return {**kwargs, "extra_headers": {**(kwargs.get("extra_headers") or {}), **auth}}


def _call_until_cancelled(create: Callable[..., Any], kwargs: dict[str, Any], cancel: CancelToken) -> Any:
    """``create(**kwargs)``, ended by cancellation as well.

    Until the server has sent its response headers there is no response to shut down,
    so the SDK call runs on a helper thread while this one waits for it or for the
    cancel. A call left behind by a cancel is closed by its helper when it returns (the
    server answers, or the client's ``timeout`` passes); its errors are dropped.
    """
    # tracing spans and the like follow the call (run_and_wait copies the context);
    # cancelled meanwhile: nothing is sent
    return run_and_wait(lambda: create(**kwargs), cancel=cancel, name="agentkit-model-call", abandoned=_close)


def _close(result: Any) -> None:
    close = getattr(result, "close", None)
    if callable(close):
        close()


class _Interrupter:
    """Shuts down the connection under an SDK stream, from the cancelling thread. The
    reading thread's blocked ``recv`` returns at once and that thread closes the
    response itself (the HTTP client is not safe to close from a second thread).

    Never after the response was closed: its connection may then be back in the pool,
    serving another request. The response's ``close`` is wrapped to say so under the
    same lock (the SDK and the HTTP client close it, also when a stream ends)."""

    def __init__(self, response: Any) -> None:
        self._lock = threading.Lock()
        self._closed = False
        http: Any = getattr(response, "response", None)  # the SDK's Stream wraps the HTTP response
        extensions = getattr(http, "extensions", None)
        stream = extensions.get("network_stream") if isinstance(extensions, Mapping) else None
        get_extra_info = getattr(stream, "get_extra_info", None)
        sock = get_extra_info("socket") if callable(get_extra_info) else None
        self._sock = sock if isinstance(sock, socket.socket) else None
        if self._sock is not None:
            original = http.close

            def close() -> None:
                with self._lock:
                    self._closed = True
                original()

            http.close = close

    def __call__(self) -> None:
        with self._lock:
            if self._sock is None or self._closed:
                return
            try:
                # the plain socket's shutdown, also under TLS: it wakes the reader
                # without touching the TLS object that thread is using
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
