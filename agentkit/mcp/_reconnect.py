"""What reconnecting needs to know: did a lost call reach the server?

A tool call that met a dead connection may be sent again after reconnecting only when
it provably never reached the server; otherwise its outcome is unknown and it is not
repeated (a side effect must not happen twice). Two facts prove "never sent":

* the session had already seen its transport close before the call was written (a
  stdio server that died: the SDK refuses the write), checked by :func:`session_closed`;
* over Streamable HTTP, the call's POST failed to open a TCP connection (connection
  refused, connect timeout), seen by :class:`TrackingTransport`. The SDK sends each
  request in the context of the task that issued it, so a context variable set around
  one call identifies that call's POSTs.
"""

from __future__ import annotations

import contextvars
from typing import Any

import httpx2

__all__: list[str] = []


class Attempt:
    """One try at sending a call. ``reached``: it may have reached the server. Over HTTP it
    starts False and turns True once a POST to the MCP endpoint may have been delivered;
    over stdio nothing is tracked, so it starts True (unknown)."""

    __slots__ = ("reached",)

    def __init__(self, *, tracked: bool) -> None:
        self.reached = not tracked


ATTEMPT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar("agentkit_mcp_attempt", default=None)


class TrackingTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that marks the current :class:`Attempt` when a POST to ``url`` was
    (or may have been) delivered; a connect failure leaves it unmarked."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, url: str) -> None:
        self._inner = inner
        self._url = httpx2.URL(url)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = ATTEMPT.get()
        if attempt is None or request.method != "POST" or request.url.copy_with(query=None) != self._url:
            return await self._inner.handle_async_request(request)
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            raise  # no connection was made: nothing was delivered
        except BaseException:
            attempt.reached = True
            raise
        if response.status_code != 404:  # 404: a restarted server that does not know the session
            attempt.reached = True
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def track_deliveries(http: httpx2.AsyncClient, url: str) -> bool:
    """Wrap the client's own transports (the default one and any proxy mounts from the
    environment) in :class:`TrackingTransport`. Passing ``transport=`` to the client would
    switch off ``HTTP(S)_PROXY`` from the environment, so the built client is wrapped
    instead. Returns False, tracking nothing, when the client does not look as expected
    (calls then count as possibly delivered: never repeated)."""
    transport = getattr(http, "_transport", None)
    mounts = getattr(http, "_mounts", None)
    if not isinstance(transport, httpx2.AsyncBaseTransport) or not isinstance(mounts, dict):
        return False
    http._transport = TrackingTransport(transport, url)
    for pattern, mounted in list(mounts.items()):
        if isinstance(mounted, httpx2.AsyncBaseTransport):
            mounts[pattern] = TrackingTransport(mounted, url)
    return True


def session_closed(client: Any) -> bool:
    """True when the client's session has already seen its transport close (so a request
    written now would be refused before it is sent). False when it cannot tell."""
    dispatcher = getattr(getattr(client, "session", None), "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))
