"""Shared test configuration: tests never reach beyond this machine."""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: object) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return False


def _guarded(real):
    def connect(self, address):  # type: ignore[no-untyped-def]
        if not _is_local(address):
            raise OSError(f"tests may not reach the network: connection to {address!r} blocked")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def _block_network(request, monkeypatch):
    """Block connections to anything but loopback, except in tests marked live."""
    if request.node.get_closest_marker("live") is None:
        monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
        monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
    yield


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("live") is None:
            continue
        has_endpoint = any(
            os.environ.get(k)
            for k in ("AGENTKIT_LIVE_OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
        )
        if not has_endpoint:
            item.add_marker(
                pytest.mark.skip(
                    reason="live test: set AGENTKIT_LIVE_OPENAI_BASE_URL, OPENAI_API_KEY or "
                    "ANTHROPIC_API_KEY to run it against a real model endpoint"
                )
            )
