"""An OAuth-protected Streamable HTTP MCP server for agentkit's tests, on 127.0.0.1.

The mcp SDK's own server-side auth serves every endpoint: authorization server metadata
(``/.well-known/oauth-authorization-server``), protected resource metadata
(``/.well-known/oauth-protected-resource/mcp``), dynamic client registration
(``/register``), ``/authorize`` (a 302 to the redirect URI with a code, no login page:
the test's "browser" follows it by hand), ``/token`` (the SDK checks the PKCE S256
verifier and serves the ``refresh_token`` grant) and bearer-token checks on ``/mcp``.
The provider below keeps clients, codes and tokens in memory, so a test can expire an
access token or revoke a refresh token and watch the client cope.

``ServerThread`` runs any Starlette app under uvicorn in a thread of the test process,
on a port that stays the same across :meth:`ServerThread.restart` (a restarted server
has forgotten every MCP session, like a redeployed one).
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class MemoryAuthProvider:
    """An authorization server that approves every request at once (no login page)."""

    def __init__(self, access_ttl: int = 3600) -> None:
        self.access_ttl = access_ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.authorizations = 0
        """How many times ``/authorize`` was asked (one per user consent)."""
        self.refreshes = 0
        """How many ``refresh_token`` grants were served."""

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.authorizations += 1
        code = secrets.token_urlsafe(32)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str
                                      ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        self.refreshes += 1
        self.refresh.pop(refresh_token.token, None)  # rotated
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.access_ttl, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.access_ttl,
                          refresh_token=refresh, scope=" ".join(scopes) or None)

    # -- what tests do to the server --------------------------------------------------

    def expire_access_tokens(self) -> None:
        """Every access token issued so far stops working (the refresh tokens still do)."""
        for key, token in list(self.access.items()):
            self.access[key] = token.model_copy(update={"expires_at": int(time.time()) - 10})

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token (and access token) issued so far is revoked."""
        self.refresh.clear()
        self.access.clear()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def protected_server(port: int, provider: MemoryAuthProvider) -> MCPServer:
    """An MCP server whose endpoint and authorization server live on ``port``."""
    base = f"http://127.0.0.1:{port}"
    server = MCPServer(
        "protected",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["tools"],
                                                                  default_scopes=["tools"]),
            required_scopes=["tools"],
            validate_token_resource=False,
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Say who is calling."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        return f"client {token.client_id}" if token else "anonymous"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server


class ServerThread:
    """A Starlette app (built by ``make_app``) under uvicorn on a fixed 127.0.0.1 port, in a
    thread. :meth:`stop` and :meth:`start` (or :meth:`restart`) keep the port."""

    def __init__(self, make_app: Callable[[], Any], port: int | None = None) -> None:
        self.port = port or free_port()
        self._make_app = make_app
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        import uvicorn

        config = uvicorn.Config(self._make_app(), host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="test-uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the test server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(30)
            self._server = self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def oauth_server(provider: MemoryAuthProvider | None = None) -> tuple[ServerThread, MemoryAuthProvider]:
    """An un-started :class:`ServerThread` serving :func:`protected_server` and its provider."""
    provider = provider or MemoryAuthProvider()
    port = free_port()
    server = protected_server(port, provider)
    return ServerThread(lambda: server.streamable_http_app(host="127.0.0.1"), port), provider
