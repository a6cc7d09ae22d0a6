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


# -- PostgreSQL: one throwaway cluster per test session ----------------------------------


@pytest.fixture(scope="session")
def pg_cluster():
    """A running PostgreSQL server in a temp dir (tests/_pg.py), shared by the session's
    tests (each takes its own schema). Without the server binaries or psycopg the tests
    skip with how to run them; in CI (AGENTKIT_CI=1, exported by .ci/run) they fail."""
    from _pg import HOW_TO, Cluster, find_bin_dir

    missing = []
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        missing.append(f"the Python package {exc.name!r}")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        missing.append("the PostgreSQL server binaries")
    if missing:
        message = f"missing {' and '.join(missing)}: {HOW_TO}"
        if os.environ.get("AGENTKIT_CI"):
            pytest.fail(message)
        pytest.skip(message)
    cluster = Cluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_store(pg_cluster):
    """A migrated PostgresEventStore on a schema of its own."""
    from agentkit.stores.postgres import PostgresEventStore

    store = PostgresEventStore(pg_cluster.conninfo, schema=pg_cluster.fresh_schema(), connect_timeout=5)
    store.migrate()
    try:
        yield store
    finally:
        store.close()


# -- Chromium: the browser the browser tests drive ---------------------------------------


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary the browser tests drive (tests/_browser.py). Without one the
    tests skip saying how to install it; in CI (AGENTKIT_CI=1) they fail."""
    from _browser import HOW_TO, find_chromium

    found = find_chromium()
    if found is None:
        message = f"no Chromium found: {HOW_TO}"
        if os.environ.get("AGENTKIT_CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found
