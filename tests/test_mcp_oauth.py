"""OAuth 2.1 against a real authorization server and OAuth-protected MCP server on
127.0.0.1 (the mcp SDK's server-side auth: discovery metadata, dynamic registration,
/authorize, /token with PKCE S256 and refresh_token grants, bearer checks on /mcp)."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import threading

import pytest
import requests
from mcp_servers.oauth_server import oauth_server

from agentkit import ConfigurationError, StoreCorruptionError
from agentkit.mcp import (
    AuthorizationResponse,
    FileTokenStore,
    McpOAuth,
    MemoryTokenStore,
    PendingAuthorizations,
    connect_mcp,
)

REDIRECT = "http://127.0.0.1:8765/callback"


class Browser:
    """The person's part: GET the authorization URL, do not follow the redirect, hand back
    the Location the authorization server sent the browser to."""

    def __init__(self, tamper=None):
        self.urls: list[str] = []
        self.tamper = tamper

    def __call__(self, url: str) -> str:
        self.urls.append(url)
        response = requests.get(url, allow_redirects=False, timeout=30)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT)
        return self.tamper(location) if self.tamper else location


def whoami(toolset) -> str:
    tool = {t.name: t for t in toolset.tools}["whoami"]
    return tool().as_text()


@pytest.fixture
def server():
    srv, provider = oauth_server()
    with srv:
        yield srv, provider


def test_first_connect_authorizes_and_a_new_client_reuses_the_file_tokens(server, tmp_path):
    srv, provider = server
    path = tmp_path / "tokens" / "mcp.json"
    browser = Browser()
    auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=browser, token_store=FileTokenStore(path),
                    client_name="agentkit-test")
    url = srv.base + "/mcp"
    # (the test server runs in this process, so its threads would confuse no_leaks())
    with connect_mcp({"p": {"url": url, "auth": auth}}) as toolset:
        assert toolset.servers["p"].connected, toolset.servers["p"].error
        assert whoami(toolset).startswith("client ")
    assert len(browser.urls) == 1 and provider.authorizations == 1
    assert "code_challenge_method=S256" in browser.urls[0]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    saved = json.loads(path.read_text())["servers"][url]
    assert saved["tokens"]["access_token"] in provider.access and saved["client"]["client_id"] in provider.clients
    client_id = saved["client"]["client_id"]

    # a second toolset (a new process would do the same): no person asked again
    again = McpOAuth(redirect_uri=REDIRECT, on_authorize=Browser(), token_store=FileTokenStore(path))
    with connect_mcp({"p": {"url": url, "auth": again}}) as toolset:
        assert whoami(toolset) == f"client {client_id}"
    assert again.on_authorize.urls == [] and provider.authorizations == 1
    assert len(provider.clients) == 1  # the registered client was reused too


def test_an_expired_access_token_is_refreshed_without_asking(server, tmp_path):
    srv, provider = server
    store = FileTokenStore(tmp_path / "t.json")
    url = srv.base + "/mcp"
    browser = Browser()
    with connect_mcp({"p": {"url": url, "auth": McpOAuth(redirect_uri=REDIRECT, on_authorize=browser,
                                                         token_store=store)}}):
        pass
    old = store.load(url)["tokens"]
    provider.expire_access_tokens()
    # the saved expiry says so too: the client refreshes before sending (a new process)
    record = dict(store.load(url))
    record["expires_at"] = 1.0
    store.save(url, record)
    with connect_mcp({"p": {"url": url, "auth": McpOAuth(redirect_uri=REDIRECT, on_authorize=browser,
                                                         token_store=store)}}) as toolset:
        assert toolset.servers["p"].connected, toolset.servers["p"].error
        assert whoami(toolset).startswith("client ")
    new = store.load(url)["tokens"]
    assert provider.refreshes == 1 and len(browser.urls) == 1
    assert new["access_token"] != old["access_token"] and new["refresh_token"] != old["refresh_token"]


def test_a_revoked_refresh_token_leads_to_authorizing_again(server):
    srv, provider = server
    store = MemoryTokenStore()
    url = srv.base + "/mcp"
    browser = Browser()
    auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=browser, token_store=store)
    with connect_mcp({"p": {"url": url, "auth": auth}}):
        pass
    provider.revoke_refresh_tokens()
    record = dict(store.load(url))
    record["expires_at"] = 1.0
    store.save(url, record)
    with connect_mcp({"p": {"url": url, "auth": auth}}) as toolset:
        assert whoami(toolset).startswith("client ")
    assert len(browser.urls) == 2 and provider.authorizations == 2


def test_a_wrong_state_is_refused_and_nothing_is_stored(server):
    srv, provider = server
    store = MemoryTokenStore()
    url = srv.base + "/mcp"
    forged = Browser(tamper=lambda loc: loc.replace("state=", "state=forged"))
    with connect_mcp({"p": {"url": url, "auth": McpOAuth(redirect_uri=REDIRECT, on_authorize=forged,
                                                         token_store=store)}}) as toolset:
        status = toolset.servers["p"]
        assert status.status == "failed" and "state does not match" in status.error
        assert toolset.tools == ()
    assert "tokens" not in (store.load(url) or {})
    assert provider.access == {}  # the code was never exchanged


def test_an_error_redirect_and_a_slow_person_fail_the_connect_clearly(server):
    srv, _ = server
    url = srv.base + "/mcp"
    denied = McpOAuth(redirect_uri=REDIRECT, on_authorize=lambda u: REDIRECT + "?error=access_denied")
    with connect_mcp({"p": {"url": url, "auth": denied}}) as toolset:
        assert "refused: access_denied" in toolset.servers["p"].error
    gate = threading.Event()
    slow = McpOAuth(redirect_uri=REDIRECT, on_authorize=lambda u: gate.wait(5) and "", authorize_timeout=0.5)
    with connect_mcp({"p": {"url": url, "auth": slow}}, connect_timeout=20) as toolset:
        assert "did not return within 0.5s" in toolset.servers["p"].error
    gate.set()


def test_the_connect_deadline_waits_for_the_person(server):
    srv, _ = server
    browser = Browser()

    def slow_person(url: str) -> str:
        threading.Event().wait(2.5)  # longer than connect_timeout
        return browser(url)

    auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=slow_person)
    with connect_mcp({"p": {"url": srv.base + "/mcp", "auth": auth}}, connect_timeout=2.0) as toolset:
        assert toolset.servers["p"].connected, toolset.servers["p"].error


def test_the_web_app_flow_completes_from_the_redirect_route(server):
    srv, _ = server
    published: list[str] = []
    pending = PendingAuthorizations(on_url=published.append, timeout=30)
    results: list[object] = []

    def redirect_route():  # the web app: the user's browser comes back with ?code&state
        while not published:
            threading.Event().wait(0.02)
        assert pending.complete(REDIRECT + "?code=x&state=someone-else") is False  # unknown state
        location = requests.get(published[0], allow_redirects=False, timeout=30).headers["location"]
        results.append(pending.complete(location))

    user = threading.Thread(target=redirect_route)
    user.start()
    auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=pending)
    with connect_mcp({"p": {"url": srv.base + "/mcp", "auth": auth}}) as toolset:
        assert whoami(toolset).startswith("client ")
    user.join(30)
    assert results == [True] and pending.pending == 0


def test_authorization_response_parsing_and_config_errors():
    r = AuthorizationResponse.from_redirect("http://127.0.0.1/cb?code=abc&state=s1&iss=http%3A%2F%2Fas")
    assert (r.code, r.state, r.iss) == ("abc", "s1", "http://as")
    assert AuthorizationResponse.from_redirect({"code": ["c"], "state": ["s"]}).state == "s"
    with pytest.raises(Exception, match="no 'code'"):
        AuthorizationResponse.from_redirect("http://127.0.0.1/cb?state=s")
    with pytest.raises(ConfigurationError, match="redirect_uri"):
        McpOAuth(redirect_uri="callback", on_authorize=lambda u: u)
    with pytest.raises(ConfigurationError, match="token_store"):
        McpOAuth(redirect_uri=REDIRECT, on_authorize=lambda u: u, token_store=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'auth' must be"):
        connect_mcp({"p": {"url": "http://127.0.0.1:1/mcp", "auth": "token"}})


def _writer(path: str, worker: int, rounds: int) -> None:
    store = FileTokenStore(path)
    for i in range(rounds):
        store.save(f"http://server-{worker}/mcp", {"tokens": {"access_token": f"{worker}-{i}"}})


def test_concurrent_writers_never_corrupt_the_token_file_or_lose_a_server(tmp_path):
    path = str(tmp_path / "shared.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(3)]
    threads = [threading.Thread(target=_writer, args=(path, 10 + w, 40)) for w in range(2)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    reader = FileTokenStore(path)
    for _ in range(200):  # readers never see a torn file
        if os.path.exists(path):
            reader.keys()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for t in threads:
        t.join(60)
    store = FileTokenStore(path)
    assert store.keys() == sorted(f"http://server-{w}/mcp" for w in (0, 1, 2, 10, 11))
    assert all(store.load(k)["tokens"]["access_token"].endswith("-39") for k in store.keys())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [n for n in os.listdir(tmp_path) if n.startswith(".mcp-tokens-")] == []


def test_a_damaged_token_file_is_reported(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("not json")
    with pytest.raises(StoreCorruptionError, match="not a token file"):
        FileTokenStore(path).load("x")
    with pytest.raises(ConfigurationError, match="is a directory"):
        FileTokenStore(tmp_path)


def test_an_on_authorize_that_raises_or_returns_nonsense_fails_the_connect(server):
    srv, provider = server

    def broken(url: str) -> str:
        raise RuntimeError("the browser could not be opened")

    for handler, expected in ((broken, "the browser could not be opened"), (lambda u: 42, "not int")):
        auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=handler)
        with connect_mcp({"p": {"url": srv.base + "/mcp", "auth": auth}}) as toolset:
            status = toolset.servers["p"]
            assert status.status == "failed" and expected in status.error
    assert provider.access == {}


def test_a_long_lived_toolset_refreshes_its_access_token_when_it_expires():
    from mcp_servers.oauth_server import MemoryAuthProvider

    srv, provider = oauth_server(MemoryAuthProvider(access_ttl=2))
    browser = Browser()
    with srv, connect_mcp({"p": {"url": srv.base + "/mcp", "auth": McpOAuth(redirect_uri=REDIRECT,
                                                                            on_authorize=browser)}}) as toolset:
        assert whoami(toolset).startswith("client ")
        threading.Event().wait(3.2)  # the access token has expired, on both sides
        assert whoami(toolset).startswith("client ")
    assert provider.refreshes >= 1 and len(browser.urls) == 1


def test_configured_scopes_are_asked_for_in_addition_to_the_servers(server):
    srv, _ = server
    browser = Browser()

    def person(url: str) -> str:
        browser.urls.append(url)
        return requests.get(url, allow_redirects=False, timeout=30).headers["location"]

    auth = McpOAuth(redirect_uri=REDIRECT, on_authorize=person, scopes=["tools", "admin"])
    with connect_mcp({"p": {"url": srv.base + "/mcp", "auth": auth}}) as toolset:
        # the demo server offers only "tools": it refuses, and says so in the redirect
        assert "refused: invalid_scope" in toolset.servers["p"].error
    assert "scope=tools+admin" in browser.urls[0]
