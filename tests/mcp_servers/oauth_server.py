"""An OAuth-protected Streamable HTTP MCP server for agentkit's tests, on 127.0.0.1: the
one of ``examples/mcp_oauth_server.py``, run in a thread of the test process.

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

import importlib.util
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _procs import free_port, wait_for


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("_agentkit_mcp_oauth_example", _EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_oauth_server.py"
_example = _load_example()
protected_server = _example.protected_server


class MemoryAuthProvider(_example.DemoAuthProvider):  # type: ignore[misc,name-defined]
    """The example's authorization server, counting what it did and with levers for tests."""

    def __init__(self, access_ttl: int = 3600) -> None:
        super().__init__(access_ttl)
        self.authorizations = 0
        """How many times ``/authorize`` was asked (one per user consent)."""
        self.refreshes = 0
        """How many ``refresh_token`` grants were served."""

    async def authorize(self, client: Any, params: Any) -> str:
        self.authorizations += 1
        return str(await super().authorize(client, params))

    async def exchange_refresh_token(self, client: Any, refresh_token: Any, scopes: list[str]) -> Any:
        self.refreshes += 1
        return await super().exchange_refresh_token(client, refresh_token, scopes)

    def expire_access_tokens(self) -> None:
        """Every access token issued so far stops working (the refresh tokens still do)."""
        for key, token in list(self.access.items()):
            self.access[key] = token.model_copy(update={"expires_at": int(time.time()) - 10})

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token (and access token) issued so far is revoked."""
        self.refresh.clear()
        self.access.clear()


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
        thread, server = self._thread, self._server

        def up() -> bool:
            if not thread.is_alive():
                raise RuntimeError(f"the test server did not start on port {self.port}")
            return bool(server.started)

        wait_for(up, timeout=30, what=f"the test server to start on port {self.port}")
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
