"""A ``requests`` transport that connects only where a :class:`NetworkPolicy` allows (private).

The check is made on the address actually connected to: each new connection resolves its
host once (:func:`resolve_checked`), keeps only the addresses the policy allows and
connects to one of those. The connection's ``host`` is untouched, so the ``Host`` header,
the TLS server name (SNI) and certificate verification still use the name from the URL.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util.connection import allowed_gai_family

from ._netguard import AddressRefused, NetworkPolicy, resolve_checked


def _pinned_socket(conn: HTTPConnection, policy: NetworkPolicy) -> socket.socket:
    """What ``HTTPConnection._new_conn`` returns: a socket connected to an address of
    ``conn``'s host that ``policy`` allows (``AddressRefused`` when there is none)."""
    host = conn._dns_host  # the name from the URL; conn.host stays what Host and SNI use
    try:
        infos = resolve_checked(host, conn.port or 80, policy, allowed_gai_family())
    except socket.gaierror as exc:
        raise NewConnectionError(conn, f"Failed to resolve {host!r} ({exc})") from exc
    timeout = conn.timeout if isinstance(conn.timeout, (int, float)) else None
    err: OSError | None = None
    for family, socktype, proto, _name, address in infos:
        sock = socket.socket(family, socktype, proto)
        try:
            for option in conn.socket_options or ():
                sock.setsockopt(*option)
            if timeout is not None:
                sock.settimeout(timeout)
            if conn.source_address:
                sock.bind(conn.source_address)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            err = exc
            continue
        sys.audit("http.client.connect", conn, conn.host, conn.port)
        return sock
    if isinstance(err, TimeoutError):
        raise ConnectTimeoutError(
            conn, f"Connection to {conn.host} timed out. (connect timeout={timeout})"
        ) from err
    raise NewConnectionError(conn, f"Failed to establish a new connection: {err}") from err


def _pool_classes(policy: NetworkPolicy) -> dict[str, type[HTTPConnectionPool]]:
    class _Connection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _pinned_socket(self, policy)

    class _TLSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _pinned_socket(self, policy)

    class _Pool(HTTPConnectionPool):
        ConnectionCls = _Connection

    class _TLSPool(HTTPSConnectionPool):
        ConnectionCls = _TLSConnection

    return {"http": _Pool, "https": _TLSPool}


class GuardedAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` whose connections go only where ``policy`` allows. Send through
    it with ``proxies={}``: a proxy would resolve the name itself, beyond the check."""

    def __init__(self, policy: NetworkPolicy, **kwargs: Any) -> None:
        self._pool_classes = _pool_classes(policy)
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pool_classes

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        raise AddressRefused(f"refusing to send through the proxy {proxy}: the address check needs "
                             f"a direct connection")
