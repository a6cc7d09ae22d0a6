"""The bridge from :class:`~agentkit.mcp.McpOAuth` to the mcp SDK's ``OAuthClientProvider``
(an ``httpx2.Auth``), on the toolset's event-loop thread.

* The host's sync :class:`~agentkit.mcp.TokenStore` becomes the SDK's async
  ``TokenStorage``; its calls run in worker threads. One JSON record per server keeps
  the tokens, their absolute expiry, the registered client and the authorization
  server's metadata. The SDK does not persist the last two facts itself, so a new
  process would take a stored, expired token for a valid one and refresh at the
  resource server's origin; :class:`_Provider` restores them when it loads.
* ``on_authorize`` runs in a worker thread under ``authorize_timeout`` while the connect
  deadline is paused; its answer's ``state`` is checked against the request's own before
  the SDK sees it (the SDK checks again).
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlparse

import anyio
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from pydantic import BaseModel

from ..errors import McpError
from .oauth import AuthorizationResponse, McpOAuth

__all__: list[str] = []

log = logging.getLogger("agentkit.mcp")

_TIMED_OUT = object()
_M = TypeVar("_M", bound=BaseModel)

Hold = Callable[[], AbstractAsyncContextManager[None]]
"""Pauses the connect deadline while a person authorizes."""


class _Storage:
    """The SDK's ``TokenStorage`` over a sync host store; one record per server URL."""

    def __init__(self, store: Any, key: str) -> None:
        self._store = store
        self._key = key
        self._record: dict[str, Any] | None = None
        self.provider: _Provider | None = None

    async def record(self) -> dict[str, Any]:
        if self._record is None:
            loaded = await anyio.to_thread.run_sync(self._store.load, self._key)
            self._record = dict(loaded) if isinstance(loaded, dict) or hasattr(loaded, "items") else {}
        return self._record

    async def _save(self, **fields: Any) -> None:
        record = dict(await self.record())
        record.update(fields)
        metadata = self.provider.context.oauth_metadata if self.provider is not None else None
        if metadata is not None:
            record["auth_server"] = metadata.model_dump(mode="json", exclude_none=True)
        self._record = record
        await anyio.to_thread.run_sync(self._store.save, self._key, record)

    async def get_tokens(self) -> OAuthToken | None:
        raw = (await self.record()).get("tokens")
        return _parse(OAuthToken, raw, "tokens")

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = None if tokens.expires_in is None else time.time() + int(tokens.expires_in)
        await self._save(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return _parse(OAuthClientInformationFull, (await self.record()).get("client"), "client")

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._save(client=client_info.model_dump(mode="json", exclude_none=True))


def _parse(model: type[_M], raw: Any, what: str) -> _M | None:
    if raw is None:
        return None
    try:
        return model.model_validate(raw)
    except ValueError:
        log.warning("the saved MCP OAuth %s could not be read and were ignored (authorizing again)", what)
        return None


class _Provider(OAuthClientProvider):
    """The SDK's provider, restoring the expiry and the authorization server from storage."""

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if not isinstance(storage, _Storage):  # pragma: no cover - always ours
            return
        record = await storage.record()
        expires_at = record.get("expires_at")
        if self.context.current_tokens is not None and isinstance(expires_at, (int, float)):
            self.context.token_expiry_time = float(expires_at)
        if self.context.oauth_metadata is None and record.get("auth_server"):
            self.context.oauth_metadata = _parse(OAuthMetadata, record["auth_server"], "authorization server")


    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # The SDK picks the scopes from the server's challenge and metadata and drops the
        # client's own; the configured ones are asked for in addition.
        wanted = self._agentkit_scopes
        if wanted:
            have = (self.context.client_metadata.scope or "").split()
            self.context.client_metadata.scope = " ".join(have + [s for s in wanted if s not in have])
        return await super()._perform_authorization_code_grant()

    _agentkit_scopes: tuple[str, ...] = ()


def build_auth(oauth: McpOAuth, server_url: str, hold: Hold) -> OAuthClientProvider:
    """The ``httpx2.Auth`` for one connection to ``server_url``."""
    storage = _Storage(oauth.token_store, server_url)
    asked: list[str] = []

    async def redirect_handler(url: str) -> None:
        asked.append(url)

    async def callback_handler() -> AuthorizationCodeResult:
        url = asked.pop()
        answer: Any = _TIMED_OUT
        async with hold():
            with anyio.move_on_after(oauth.authorize_timeout):
                answer = await anyio.to_thread.run_sync(oauth.on_authorize, url, abandon_on_cancel=True)
        if answer is _TIMED_OUT:
            raise McpError(f"on_authorize did not return within {oauth.authorize_timeout:g}s "
                           f"(McpOAuth.authorize_timeout)")
        response = answer if isinstance(answer, AuthorizationResponse) else AuthorizationResponse.from_redirect(answer)
        expected = _state_of(url)
        if response.state is None or expected is None or not hmac.compare_digest(response.state, expected):
            raise McpError("the authorization response's state does not match the request's; it was "
                           "refused (a stale, replayed or forged redirect). Authorize again from the "
                           "latest authorization URL")
        return AuthorizationCodeResult(code=response.code, state=response.state, iss=response.iss)

    metadata = OAuthClientMetadata(
        client_name=oauth.client_name,
        redirect_uris=[oauth.redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(oauth.scopes) if oauth.scopes else None,
        token_endpoint_auth_method="none",
    )
    provider = _Provider(server_url, metadata, storage, redirect_handler=redirect_handler,
                         callback_handler=callback_handler)
    provider._agentkit_scopes = tuple(oauth.scopes or ())
    storage.provider = provider
    return provider


def _state_of(url: str) -> str | None:
    values = parse_qs(urlparse(url).query).get("state")
    return values[0] if values else None
