"""Shared test configuration: tests never reach beyond this machine."""

from __future__ import annotations

import faulthandler
import ipaddress
import logging
import os
import socket
import sys

import pytest
from _env import in_ci, lacked
from _env import missing as lacks

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


@pytest.fixture(autouse=True)
def _no_tracer_provider_left_behind():
    """A test (or a docs page) that sets OpenTelemetry's global tracer provider, or the
    level of an ``agentkit`` logger, does not leave it set for the tests after it (the API
    allows setting a provider once per process)."""
    levels = _agentkit_log_levels()
    yield
    for name, level in _agentkit_log_levels().items():
        if levels.get(name, logging.NOTSET) != level:
            logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))
    api = sys.modules.get("opentelemetry.trace")
    if api is not None and getattr(api, "_TRACER_PROVIDER", None) is not None:
        from opentelemetry.util._once import Once

        api._TRACER_PROVIDER_SET_ONCE = Once()
        api._TRACER_PROVIDER = None


def _agentkit_log_levels() -> dict[str, int]:
    loggers = logging.root.manager.loggerDict
    return {name: lg.level for name, lg in list(loggers.items())
            if name.split(".")[0] == "agentkit" and isinstance(lg, logging.Logger)}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("live") is None:
            continue
        has_endpoint = any(
            os.environ.get(k)
            for k in ("AGENTKIT_LIVE_OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                      "GOOGLE_API_KEY")
        )
        if not has_endpoint:
            item.add_marker(
                pytest.mark.skip(
                    reason="live test: set AGENTKIT_LIVE_OPENAI_BASE_URL, OPENAI_API_KEY, "
                    "ANTHROPIC_API_KEY or GEMINI_API_KEY to run it against a real model endpoint"
                )
            )


# -- the coverage floor holds only where every test ran ----------------------------------

_LACKED: list[str] = []  # tests skipped for what this machine lacks (tests/_env.py)
_FLOOR = pytest.StashKey[float]()
_CONFIG: list[pytest.Config] = []


def _real_stderr(config) -> int:
    """The file descriptor pytest's output capture saved for stderr (the terminal or tox's
    pipe), so the dump is printed even when the failure report itself breaks; stderr as
    captured when that is not at hand."""
    capture = getattr(config.pluginmanager.getplugin("capturemanager"), "_global_capturing", None)
    saved = getattr(getattr(capture, "err", None), "targetfd_save", None)
    return saved if isinstance(saved, int) else sys.stderr.fileno()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Dump every thread's stack (the main thread's too) shortly before pytest-timeout ends a
    test: its own report can lose the main thread's frames, so a hang under load would not
    name its test and line."""
    marker = item.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(item.config.getini("timeout") or 0)
    if limit > 0:
        faulthandler.dump_traceback_later(max(limit - 5.0, limit * 0.9), exit=False, file=_real_stderr(item.config))
    try:
        yield
    finally:
        if limit > 0:
            faulthandler.cancel_dump_traceback_later()


def pytest_configure(config):
    _CONFIG[:] = [config]


def pytest_runtest_logreport(report):
    """A test skipped for what the machine lacks (no PostgreSQL, Chromium, MCP reference
    servers...) takes its lines out of the coverage total, so the floor of ``fail_under``
    (pyproject.toml) is not applied to this run: pytest-cov reads it after the tests. CI,
    where these tests fail instead of skipping, always applies it."""
    if not lacked(report) or report.nodeid in _LACKED:
        return
    _LACKED.append(report.nodeid)
    config = _CONFIG[0]
    cov = config.pluginmanager.getplugin("_cov")
    options = getattr(cov, "options", None)
    if not in_ci() and getattr(options, "cov_fail_under", None):
        config.stash[_FLOOR] = options.cov_fail_under
        options.cov_fail_under = None


def pytest_terminal_summary(terminalreporter, config):
    floor = config.stash.get(_FLOOR, None)
    if floor is not None:
        terminalreporter.write_sep("=", "coverage floor not applied")
        terminalreporter.write_line(
            f"{len(_LACKED)} tests skipped for what this machine lacks (their reasons, above, say what to "
            f"install), so the coverage total leaves out their lines and is not held to the floor of "
            f"{floor:g}%. CI (.ci/run, AGENTKIT_CI=1) runs them all and applies it.")


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
        lacks(f"missing {' and '.join(missing)}: {HOW_TO}")
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


# -- Celery: a real redis-server and real celery workers (tests/_celery.py) ---------------


@pytest.fixture
def redis_server():
    """A redis-server of its own on 127.0.0.1 (tests/_celery.py). Without redis-server or
    the celery extra the test skips saying what to install; in CI it fails."""
    from _celery import Redis, what_is_missing

    problem = what_is_missing()
    if problem:
        lacks(problem)
    server = Redis()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def celery_rig(redis_server, pg_cluster):
    """A Redis, a PostgreSQL schema and the workers a test starts on them (tests/_celery.py's
    Rig); every worker is stopped (its process group killed) afterwards."""
    from _celery import Rig

    rig = Rig(redis_server, pg_cluster)
    try:
        yield rig
    finally:
        rig.close()


# -- the provider fakes: real HTTP on 127.0.0.1 speaking the providers' wire formats ------


@pytest.fixture
def openai_server():
    """A FakeServer (tests/fakes/server.py) that rejects what the OpenAI API rejects."""
    from fakes import openai_wire
    from fakes.server import FakeServer

    with FakeServer(check=openai_wire.validate) as server:
        yield server


@pytest.fixture
def anthropic_server():
    """A FakeServer (tests/fakes/server.py) that rejects what the Anthropic Messages API
    rejects."""
    from fakes import anthropic_wire
    from fakes.server import FakeServer

    with FakeServer(check=anthropic_wire.validate) as server:
        yield server


@pytest.fixture
def bedrock_server(monkeypatch):
    """A FakeServer (tests/fakes/server.py) that speaks Bedrock's Converse wire format and
    rejects what the Converse API rejects; boto3's credential chain finds dummy keys and a
    region in the environment (and no profile or config file of the machine's)."""
    from fakes import bedrock_wire
    from fakes.server import FakeServer

    bedrock_wire.fake_credentials(monkeypatch)
    with FakeServer(check=bedrock_wire.validate) as server:
        yield server


@pytest.fixture
def gemini_server():
    """A FakeServer (tests/fakes/server.py) that rejects what the Gemini API rejects
    (tests/fakes/gemini_wire.py), accepting the API key ``gemini-test-key``."""
    from fakes import gemini_wire
    from fakes.server import FakeServer

    with FakeServer(check=gemini_wire.validator(key="gemini-test-key")) as server:
        yield server


# -- Chromium: the browser the browser tests drive ---------------------------------------


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary the browser tests drive (tests/_browser.py). Without one the
    tests skip saying how to install it; in CI (AGENTKIT_CI=1) they fail."""
    from _browser import HOW_TO, find_chromium

    found = find_chromium()
    if found is None:
        lacks(f"no Chromium found: {HOW_TO}")
    return found
