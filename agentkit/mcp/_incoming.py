"""What a connected MCP server sends unasked, on the loop thread: tool and resource
list changes followed over a ``subscriptions/listen`` stream (2026-era connections),
resource subscriptions (renewed after a reconnect), notifications forwarded to the
toolset's listeners, and output that is not JSON-RPC (private)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from ._failures import NotConnected, ResourceSubscriptionUnsupported, answered, describe_error, offending_line
from .config import StdioServer

if TYPE_CHECKING:
    from ._server import ServerConnection

log = logging.getLogger("agentkit.mcp")

_RELISTEN_AFTER = 2.0
"""Pause before listening again after a stream dropped while the server still answers."""
_MAX_QUICK_RELISTENS = 5
"""Streams that drop soon after opening, in a row, before agentkit stops re-listening."""


async def listen(conn: ServerConnection) -> None:
    """On 2026-era connections, change notifications ride a subscriptions/listen
    stream; open one for tool and resource list changes when the server offers them."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    client = conn.client
    if client.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return
    caps = client.session.server_capabilities
    want_tools = bool(caps and caps.tools and caps.tools.list_changed)
    want_resources = bool(caps and caps.resources and caps.resources.list_changed)
    if not (want_tools or want_resources):
        return
    quick_failures = 0
    while True:
        opened = anyio.current_time()
        try:
            async with client.listen(tools_list_changed=want_tools,
                                     resources_list_changed=want_resources) as sub:
                async for _event in sub:
                    # Listen-stream events are also teed to the message handler, which
                    # refreshes and forwards them; here they only need consuming.
                    pass
            return  # the server closed the stream on purpose
        except Exception as exc:  # noqa: BLE001 - decided below
            log.debug("MCP server %r: subscriptions/listen ended: %s", conn.name, describe_error(exc))
        # The stream dropped. A dead server is reported now, not at the next call; a
        # live one (an HTTP stream cut by a proxy or a read timeout) is listened to again.
        # (2026-era servers have no ping: listing the tools again is the probe, and it
        # catches changes missed while no stream was open.)
        await anyio.sleep(_RELISTEN_AFTER)
        try:
            await conn.refresh()
        except Exception as exc:  # noqa: BLE001 - decided here
            if answered(exc):
                conn.warn(f"refreshing the tool list failed: {describe_error(exc)}")
            else:
                if not conn._stop_requested:
                    conn.lost(exc)
                return
        quick_failures = quick_failures + 1 if anyio.current_time() - opened < _RELISTEN_AFTER * 5 else 0
        if quick_failures > _MAX_QUICK_RELISTENS:
            conn.warn("the subscriptions/listen stream keeps failing; tools/list_changed is no "
                      "longer followed (call refresh() to list the tools again)")
            return

async def subscribe_resource(conn: ServerConnection, uri: str) -> None:
    """Ask the server for ``notifications/resources/updated`` about ``uri`` (loop
    thread): a ``subscriptions/listen`` stream on 2026-era connections,
    ``resources/subscribe`` on handshake-era ones. Subscribing twice is a no-op."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    await conn.usable_client()
    client, tg = conn.client, conn._tg
    if client is None or tg is None or conn.status != "connected":
        raise NotConnected(conn.error or f"status is {conn.status!r}")
    if uri in conn._resource_uris:
        return
    caps = client.session.server_capabilities
    if not (caps and caps.resources and caps.resources.subscribe):
        raise ResourceSubscriptionUnsupported(
            f"MCP server {conn.name!r} does not offer resource subscriptions "
            f"(no resources.subscribe capability)"
        )
    conn._resource_uris.add(uri)  # before awaiting: a concurrent subscribe is a no-op
    conn._wanted_uris.add(uri)  # renewed after every reconnect
    try:
        if client.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await tg.start(listen_resource, conn, uri)
        else:  # the request itself: the SDK's wrapper warns that 2026-era servers dropped it
            import mcp_types as types

            await client.session.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
            )
    except BaseException:
        conn._resource_uris.discard(uri)
        conn._wanted_uris.discard(uri)
        raise

async def resubscribe(conn: ServerConnection, uri: str) -> None:
    """After a reconnect: subscribe to ``uri`` again."""
    try:
        await subscribe_resource(conn, uri)
    except Exception as exc:  # noqa: BLE001 - reported as a warning
        conn.warn(f"renewing the subscription to resource {uri!r} after reconnecting failed: "
                  f"{describe_error(exc)}")

async def listen_resource(conn: ServerConnection, uri: str, *, task_status: Any) -> None:
    """Hold one listen stream for ``uri``; its events reach ``ServerConnection._on_message``."""
    started = False
    try:
        async with conn.client.listen(resource_subscriptions=[uri]) as sub:
            task_status.started()
            started = True
            async for _event in sub:
                pass  # each event is also teed to the message handler
    except Exception as exc:
        if not started:
            raise  # to the subscriber, through tg.start()
        if conn.status == "connected":
            conn.warn(f"the subscription to resource {uri!r} ended: {describe_error(exc)}; "
                      f"subscribe again to keep receiving its updates")
    conn._resource_uris.discard(uri)  # the stream ended: a new subscribe opens another

def invalid_output(conn: ServerConnection, exc: ValueError) -> None:
    """The server wrote something that is not a JSON-RPC message. While connecting,
    that ends the connect at once (it would otherwise wait out ``connect_timeout``);
    once connected, it is a warning, given once (the messages around it still work).
    A blank line is let pass."""
    line = offending_line(exc)
    if line is not None and not line.strip():
        return
    shown = describe_error(exc)[:200] if line is None else repr(line[:120]) + (" ..." if len(line) > 120 else "")
    what = f"server wrote invalid output (not a JSON-RPC message): {shown}"
    if isinstance(conn.spec, StdioServer):
        what += ("; an MCP stdio server must write only MCP messages to stdout (its logs and "
                 "prints belong on stderr)")
    if conn.status == "connecting":
        conn.fail(what)
        if conn._scope is not None:
            conn._scope.cancel()
    elif not conn._invalid_output_seen:
        conn._invalid_output_seen = True
        conn.warn(f"{what}; such lines are ignored")

def forward(conn: ServerConnection, notification: Any) -> None:
    method = getattr(notification, "method", None)
    if not isinstance(method, str) or method == "notifications/progress":
        return
    params = getattr(notification, "params", None)
    data: dict[str, Any] = {}
    if params is not None:
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        data.pop("_meta", None)
    try:
        conn._notify({"server": conn.name, "method": method, "params": data})
    except Exception:  # noqa: BLE001 - a sink must not break the connection
        log.exception("forwarding an MCP notification failed")

