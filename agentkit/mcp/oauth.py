"""OAuth 2.1 for Streamable HTTP MCP servers, from synchronous code.

::

    from agentkit.mcp import FileTokenStore, McpOAuth, connect_mcp

    def authorize(url: str) -> str:
        print("Open this URL, approve, then paste the address you were sent to:", url)
        return input("> ")

    auth = McpOAuth(redirect_uri="http://127.0.0.1:8765/callback", on_authorize=authorize,
                    token_store=FileTokenStore("~/.config/myapp/mcp-tokens.json"))
    with connect_mcp({"docs": {"url": "https://mcp.example.com/mcp", "auth": auth}}) as mcp:
        ...

The mcp SDK runs the protocol (discovery, dynamic client registration, authorization
code with PKCE S256, refresh); agentkit bridges it to sync code: tokens go to a
:class:`~agentkit.mcp.TokenStore`, and the one step that needs a person — opening the
authorization URL and coming back with the code — is handed to ``on_authorize``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union
from urllib.parse import parse_qs, urlparse

from ..errors import ConfigurationError, McpError
from .tokens import MemoryTokenStore, TokenStore


@dataclass(frozen=True, kw_only=True)
class AuthorizationResponse:
    """What the authorization server sent back to the redirect URI."""

    code: str
    """The authorization code."""
    state: str | None
    """The ``state`` of the request it answers (checked against the request's own)."""
    iss: str | None = None
    """The issuer (RFC 9207), when the server sends it."""

    @classmethod
    def from_redirect(cls, redirect: str | Mapping[str, Any]) -> AuthorizationResponse:
        """Parse the URL the browser was redirected to (or its query parameters as a
        mapping, e.g. a web framework's ``request.args``). Raises
        :class:`~agentkit.errors.McpError` for an ``error=`` redirect (the user refused,
        say) or one without a code."""
        if isinstance(redirect, str):
            parsed = urlparse(redirect.strip())
            params: dict[str, Any] = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        elif isinstance(redirect, Mapping):
            params = {k: (v[0] if isinstance(v, (list, tuple)) and v else v) for k, v in redirect.items()}
        else:
            raise McpError(f"an authorization redirect is a URL or its query parameters, not "
                           f"{type(redirect).__name__}")
        if params.get("error"):
            detail = params.get("error_description")
            raise McpError(f"the authorization server refused: {params['error']}"
                           + (f" ({detail})" if detail else ""))
        code = params.get("code")
        if not isinstance(code, str) or not code:
            raise McpError("the authorization redirect carries no 'code' parameter; pass the full URL the "
                           "browser was sent to (with its ?code=...&state=... query)")
        state, iss = params.get("state"), params.get("iss")
        return cls(code=code, state=state if isinstance(state, str) else None,
                   iss=iss if isinstance(iss, str) else None)


OnAuthorize = Callable[[str], Union[AuthorizationResponse, str, Mapping[str, Any]]]
"""``on_authorize(authorization_url)``: send a person to the URL and return what came back to
the redirect URI: the redirect URL itself, its query parameters, or an
:class:`AuthorizationResponse`. It runs in a worker thread and may block (the connect
deadline is paused meanwhile, up to ``McpOAuth.authorize_timeout``)."""


@dataclass(frozen=True, kw_only=True)
class McpOAuth:
    """OAuth 2.1 for one Streamable HTTP server: pass it as the server's ``"auth"``.

    On the first connect the server answers 401; the mcp SDK discovers the authorization
    server, registers a client (RFC 7591) and builds an authorization URL with PKCE (S256)
    and a fresh ``state``; ``on_authorize`` gets that URL and returns the redirect. The
    ``state`` is checked, the code exchanged, and tokens and client saved in
    ``token_store``. Later connects reuse the saved tokens; an expired access token is
    refreshed; when the refresh token is refused too, ``on_authorize`` is asked again.
    """

    redirect_uri: str
    """Where the authorization server sends the browser back (registered with the client)."""
    on_authorize: OnAuthorize
    """The person's part; see :data:`OnAuthorize`."""
    token_store: TokenStore = field(default_factory=MemoryTokenStore)
    """Where tokens and the registered client are kept (default: memory, this process only)."""
    client_name: str = "agentkit"
    """The client name shown on the consent page."""
    scopes: Sequence[str] | None = None
    """Scopes to ask for in addition to those the server's challenge or metadata names
    (None: just those)."""
    authorize_timeout: float = 300.0
    """Seconds ``on_authorize`` may take before the connect fails."""

    def __post_init__(self) -> None:
        parsed = urlparse(self.redirect_uri) if isinstance(self.redirect_uri, str) else None
        if parsed is None or not parsed.scheme or not (parsed.netloc or parsed.scheme not in ("http", "https")):
            raise ConfigurationError(f"McpOAuth: redirect_uri must be an absolute URI such as "
                                     f"'http://127.0.0.1:8765/callback', not {self.redirect_uri!r}")
        if not callable(self.on_authorize):
            raise ConfigurationError("McpOAuth: on_authorize must be a callable (authorization_url) -> "
                                     "redirect URL | AuthorizationResponse")
        store = self.token_store
        if not (callable(getattr(store, "load", None)) and callable(getattr(store, "save", None))):
            raise ConfigurationError(f"McpOAuth: token_store must have load(key) and save(key, record) "
                                     f"(a FileTokenStore, MemoryTokenStore or your own), not "
                                     f"{type(store).__name__}")
        if not isinstance(self.client_name, str) or not self.client_name.strip():
            raise ConfigurationError(f"McpOAuth: client_name must be a non-empty string, not {self.client_name!r}")
        if self.scopes is not None and (isinstance(self.scopes, str) or
                                        not all(isinstance(s, str) and s and " " not in s for s in self.scopes)):
            raise ConfigurationError(f"McpOAuth: scopes must be a list of scope names without spaces, "
                                     f"not {self.scopes!r}")
        timeout = self.authorize_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ConfigurationError(f"McpOAuth: authorize_timeout must be a positive number of seconds, "
                                     f"not {timeout!r}")


class PendingAuthorizations:
    """``on_authorize`` for a web app: the agent's thread waits while the user's browser
    goes to the authorization server and comes back to the app's redirect route.

    ``on_url(url)`` is called with each authorization URL (send it to the user: a
    redirect response, a link over SSE, a row the page polls). The waiting thread blocks
    until the redirect route calls :meth:`complete` with the request's URL or query
    parameters; the pending request is found by its ``state``, so several users may
    authorize at once. An unknown ``state`` is refused. Thread-safe.
    """

    def __init__(self, on_url: Callable[[str], None], *, timeout: float = 300.0) -> None:
        if not callable(on_url):
            raise ConfigurationError("PendingAuthorizations needs on_url(authorization_url): how the URL "
                                     "reaches the user")
        self._on_url = on_url
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        self._waiting: dict[str, queue.SimpleQueue[AuthorizationResponse | BaseException]] = {}

    def __call__(self, authorization_url: str) -> AuthorizationResponse:
        """Publish ``authorization_url`` and wait for :meth:`complete` (the ``on_authorize``)."""
        state = _query(authorization_url).get("state")
        if not state:
            raise McpError("the authorization URL has no 'state' parameter to wait on")
        box: queue.SimpleQueue[AuthorizationResponse | BaseException] = queue.SimpleQueue()
        with self._lock:
            self._waiting[state] = box
        try:
            self._on_url(authorization_url)
            deadline = time.monotonic() + self._timeout
            try:
                answer = box.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise McpError(f"no authorization came back within {self._timeout:g}s") from None
        finally:
            with self._lock:
                self._waiting.pop(state, None)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def complete(self, redirect: str | Mapping[str, Any]) -> bool:
        """Hand the redirect (its URL or query parameters) to the thread waiting on its
        ``state``. Returns False (do nothing else with it) when no authorization with that
        state is pending: a stale, replayed or forged redirect. An ``error=`` redirect
        wakes the waiter with that error."""
        params = _query(redirect) if isinstance(redirect, str) else dict(redirect)
        state = params.get("state")
        state = state[0] if isinstance(state, (list, tuple)) and state else state
        with self._lock:
            box = self._waiting.get(state) if isinstance(state, str) else None
        if box is None:
            return False
        try:
            box.put(AuthorizationResponse.from_redirect(params))
        except McpError as exc:
            box.put(exc)
        return True

    @property
    def pending(self) -> int:
        """How many authorizations are waiting for their redirect."""
        with self._lock:
            return len(self._waiting)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
