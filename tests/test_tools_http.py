"""http_tools against real HTTP(S) servers on 127.0.0.1.

Reaching 127.0.0.1 needs the documented opt-in, ``allow_private_networks``; the tests
without it show what is refused by default.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Union

import pytest
import requests
from _procs import free_port, spawn, wait_for
from _servers import ThreadedHTTP

from agentkit import (
    CancelToken,
    ConfigurationError,
    FileEventStore,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    http_tools,
)
from agentkit.events import ControlEvent, ToolResultEvent
from agentkit.execution import LocalExecutionContext
from agentkit.messages import ToolCallPart, ToolOutput
from agentkit.tools._netguard import NetworkPolicy
from agentkit.tools.http import _Http
from agentkit.tools.runner import run_tool_call

OPEN = {"allow_private_networks": True}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Answer = tuple[int, dict[str, str], bytes]
Route = Union[Answer, Callable[[Seen], Answer]]


class Site:
    """A real threaded HTTP server on 127.0.0.1: ``routes`` map a path to ``(status, headers,
    body)`` or to a function of the request returning one; ``seen`` records every request."""

    def __init__(self, tls: ssl.SSLContext | None = None, quiet: tuple[type[BaseException], ...] = ()) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                seen = Seen(self.command, self.path, dict(self.headers.items()),
                            self.rfile.read(length) if length else b"")
                site.seen.append(seen)
                route = site.routes.get(self.path.split("?")[0], (404, {}, b"no such page"))
                status, headers, body = route(seen) if callable(route) else route
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

        self._http = ThreadedHTTP(Handler, tls=tls, quiet=quiet).start()
        self.port = self._http.port
        self.scheme = "https" if tls is not None else "http"

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def close(self) -> None:
        self._http.stop()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def call(tools, name: str, **args) -> ToolOutput:
    tool = {t.name: t for t in tools}[name]
    ctx = ToolContext(tool_call_id="h1", tool_name=name, cancel=CancelToken())
    return run_tool_call(tool, ToolCallPart(tool_call_id="h1", tool_name=name, input=args), ctx)


def test_get_returns_status_headers_and_body_and_sends_headers(site):
    site.routes["/status"] = (200, {"Content-Type": "application/json"}, b'{"ok": true}')
    out = call(http_tools(**OPEN), "http_get", url=site.url("/status"), headers={"X-Token": "abc"})
    assert not out.is_error
    assert out.value.startswith("HTTP 200 OK")
    assert "content-type: application/json" in out.value
    assert out.value.rstrip().endswith('{"ok": true}')
    assert site.seen[0].headers["X-Token"] == "abc"
    assert site.seen[0].headers["Host"] == f"127.0.0.1:{site.port}"


def test_post_json_body_and_text_body(site):
    site.routes["/items"] = (201, {}, b"created")
    out = call(http_tools(**OPEN), "http_post", url=site.url("/items"), body={"name": "x"})
    assert not out.is_error and "HTTP 201" in out.value and out.value.endswith("created")
    assert json.loads(site.seen[0].body) == {"name": "x"}
    assert site.seen[0].headers["Content-Type"] == "application/json"
    site.routes["/raw"] = (200, {}, b"thanks")
    call(http_tools(**OPEN), "http_post", url=site.url("/raw"), body="plain text")
    assert site.seen[-1].method == "POST" and site.seen[-1].body == b"plain text"


def test_error_status_is_an_error_result(site):
    out = call(http_tools(**OPEN), "http_get", url=site.url("/missing"))
    assert out.is_error and "HTTP 404" in out.value and "no such page" in out.value


def test_large_body_is_cut_at_the_size_limit(site):
    site.routes["/big"] = (200, {}, b"x" * 10_000)
    out = call(http_tools(max_response_bytes=1000, **OPEN), "http_get", url=site.url("/big"))
    assert "[response body cut at 1000 bytes]" in out.value
    assert out.value.split("\n\n", 1)[1] == "x" * 1000


def test_connection_failure_and_timeout_are_error_results(site):
    closed_port = free_port()  # a port nobody listens on
    out = call(http_tools(**OPEN), "http_get", url=f"http://127.0.0.1:{closed_port}/down")
    assert out.is_error and "ConnectionError" in out.value

    def slow(seen: Seen) -> Answer:
        time.sleep(3)
        return 200, {}, b"late"

    site.routes["/slow"] = slow
    out = call(http_tools(timeout=0.5, **OPEN), "http_get", url=site.url("/slow"))
    assert out.is_error and "timed out after 0.5s" in out.value


@pytest.mark.parametrize("url", ["ftp://example.test/x", "example.test/x", "file:///etc/passwd"])
def test_bad_urls_are_refused_before_any_request(url):
    out = call(http_tools(**OPEN), "http_get", url=url)
    assert out.is_error and "http:// or https://" in out.value


def test_urls_whose_host_parsers_disagree_on_are_refused(site):
    # urllib.parse reads the host of the first as evil.example, urllib3 as 127.0.0.1
    allowed = http_tools(allowed_hosts=["evil.example"], **OPEN)
    for url in (f"http://127.0.0.1:{site.port}\\@evil.example/", f"http://evil.example\\@127.0.0.1:{site.port}/"):
        out = call(allowed, "http_get", url=url)
        assert out.is_error and "makes the host ambiguous" in out.value
    assert site.seen == []


def test_context_permission_is_asked_with_the_url(tmp_path, site):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target, request.tool_call_id))
        return request.operation == "http-get"

    site.routes["/a"] = (200, {}, b"A")
    with LocalExecutionContext(tmp_path, permission=permission) as c:
        tools = http_tools(c, **OPEN)
        assert call(tools, "http_get", url=site.url("/a")).value.endswith("A")
        out = call(tools, "http_post", url=site.url("/a"), body="x")
    assert out.is_error and "permission denied" in out.value
    assert asked == [("http-get", site.url("/a"), "h1"), ("http-post", site.url("/a"), "h1")]
    assert [s.method for s in site.seen] == ["GET"]


def test_bad_factory_options():
    with pytest.raises(ConfigurationError):
        http_tools(timeout=0)
    with pytest.raises(ConfigurationError):
        http_tools(max_response_bytes=0)
    assert json.dumps([t.input_schema for t in http_tools()])


@pytest.mark.parametrize("option", ["allowed_hosts", "allow_private_networks"])
@pytest.mark.parametrize("bad", ["api.example.com", ["https://api.example.com"], ["a.example.com/x"],
                                 ["*example.com"], ["a.*.example.com"], ["host:99999"], ["host:x"], [""], [3]])
def test_bad_host_patterns_are_configuration_errors_naming_the_option(option, bad):
    with pytest.raises(ConfigurationError, match=option):
        http_tools(**{option: bad})


def test_every_redirect_hop_is_checked_and_asked_for(tmp_path, site):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target))
        return "169.254.169.254" not in request.target

    site.routes["/moved"] = (302, {"Location": "/new"}, b"")
    site.routes["/new"] = (200, {}, b"here")
    site.routes["/sneaky"] = (302, {"Location": "http://169.254.169.254/latest/meta-data"}, b"")
    site.routes["/local"] = (301, {"Location": "file:///etc/passwd"}, b"")
    with LocalExecutionContext(tmp_path, permission=permission) as c:
        tools = http_tools(c, **OPEN)
        out = call(tools, "http_get", url=site.url("/moved"))
        assert not out.is_error and f"(redirected to {site.url('/new')})" in out.value
        assert out.value.endswith("here")
        out = call(tools, "http_get", url=site.url("/sneaky"))
        assert out.is_error and "permission denied" in out.value
        out = call(tools, "http_get", url=site.url("/local"))
        assert out.is_error and "http:// or https://" in out.value
    assert ("http-get", site.url("/new")) in asked
    assert ("http-get", "http://169.254.169.254/latest/meta-data") in asked


def test_redirects_drop_credentials_across_hosts_and_turn_a_post_into_a_get_on_303(site):
    # 127.0.0.1 and localhost are two hosts to the tool, one server here
    site.routes["/submit"] = (303, {"Location": site.url("/result", host="localhost")}, b"")
    site.routes["/result"] = (200, {}, b"done")
    out = call(http_tools(**OPEN), "http_post", url=site.url("/submit"), body={"a": 1},
               headers={"Authorization": "Bearer s3cret", "X-Trace": "t1"})
    assert not out.is_error and out.value.endswith("done")
    first, follow = site.seen
    assert first.method == "POST" and first.headers["Authorization"] == "Bearer s3cret"
    assert follow.method == "GET" and not follow.body and follow.headers["Host"] == f"localhost:{site.port}"
    assert "Authorization" not in follow.headers and follow.headers["X-Trace"] == "t1"


def test_redirect_loops_stop_at_the_limit(site):
    site.routes["/loop"] = (302, {"Location": "/loop"}, b"")
    out = call(http_tools(max_redirects=3, **OPEN), "http_get", url=site.url("/loop"))
    assert out.is_error and "more than 3 redirects" in out.value
    assert len(site.seen) == 4


def test_a_body_without_a_charset_is_read_as_utf8(site):
    site.routes["/text"] = (200, {"Content-Type": "text/plain"}, "héllo €".encode())
    site.routes["/latin"] = (200, {"Content-Type": "text/plain; charset=ISO-8859-1"}, "héllo".encode("latin-1"))
    assert call(http_tools(**OPEN), "http_get", url=site.url("/text")).value.endswith("héllo €")
    assert call(http_tools(**OPEN), "http_get", url=site.url("/latin")).value.endswith("héllo")


def test_a_binary_body_is_described_not_dumped(site):
    site.routes["/logo.png"] = (200, {"Content-Type": "image/png"}, b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(4000))
    out = call(http_tools(**OPEN), "http_get", url=site.url("/logo.png"))
    assert not out.is_error and "content-type: image/png" in out.value
    assert out.value.endswith("[binary body of 4010 bytes, not shown]")


# -- safe by default: where the tools may connect ---------------------------------------


def test_loopback_is_refused_by_default_by_address_and_by_a_name_that_resolves_to_it(site):
    site.routes["/admin"] = (200, {}, b"admin console")
    for url in (site.url("/admin"), site.url("/admin", host="localhost")):
        out = call(http_tools(), "http_get", url=url)
        assert out.is_error and "admin console" not in out.value
        assert f"GET {url} refused:" in out.value
        assert "loopback address" in out.value and "allow_private_networks=True" in out.value
        out = call(http_tools(), "http_post", url=url, body="x")
        assert out.is_error and "refused" in out.value
    assert "localhost resolves to 127.0.0.1" in out.value
    assert f"allow_private_networks=['localhost:{site.port}']" in out.value
    assert site.seen == []


def test_the_opt_in_allows_private_addresses_for_every_host_or_for_the_hosts_listed(site):
    site.routes["/x"] = (200, {}, b"internal")
    assert call(http_tools(**OPEN), "http_get", url=site.url("/x", host="localhost")).value.endswith("internal")
    only_localhost = http_tools(allow_private_networks=[f"localhost:{site.port}"])
    assert call(only_localhost, "http_get", url=site.url("/x", host="localhost")).value.endswith("internal")
    assert call(only_localhost, "http_get", url=site.url("/x", host="LOCALHOST")).value.endswith("internal")
    out = call(only_localhost, "http_get", url=site.url("/x"))
    assert out.is_error and "127.0.0.1 is a loopback address" in out.value
    other_port = http_tools(allow_private_networks=["localhost:1"])
    assert call(other_port, "http_get", url=site.url("/x", host="localhost")).is_error
    assert len(site.seen) == 3


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "127.0.0.1.",
                                  "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "0.0.0.0", "0"])
def test_every_spelling_of_this_machine_is_refused(site, host):
    site.routes["/x"] = (200, {}, b"secret")
    out = call(http_tools(), "http_get", url=f"http://{host}:{site.port}/x")
    assert out.is_error and "refused" in out.value and "secret" not in out.value
    assert "allow_private_networks" in out.value
    assert site.seen == []


def test_a_redirect_to_a_private_address_is_refused_even_from_an_allowed_host(site):
    site.routes["/go"] = (302, {"Location": site.url("/secret", host="localhost")}, b"")
    site.routes["/meta"] = (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b"")
    site.routes["/secret"] = (200, {}, b"the secret")
    tools = http_tools(allow_private_networks=[f"127.0.0.1:{site.port}"])
    out = call(tools, "http_get", url=site.url("/go"))
    assert out.is_error and "the secret" not in out.value
    assert f"GET {site.url('/secret', host='localhost')} refused: localhost resolves to 127.0.0.1" in out.value
    out = call(tools, "http_get", url=site.url("/meta"))
    assert out.is_error and "169.254.169.254 is the cloud instance metadata address" in out.value
    assert [s.path for s in site.seen] == ["/go", "/meta"]
    # allowed_hosts narrows what is reachable, on every hop too
    narrowed = http_tools(allowed_hosts=[f"127.0.0.1:{site.port}"], **OPEN)
    out = call(narrowed, "http_get", url=site.url("/go"))
    assert out.is_error and f"localhost:{site.port} is not in allowed_hosts (127.0.0.1:{site.port})" in out.value
    assert [s.path for s in site.seen] == ["/go", "/meta", "/go"]


def test_allowed_hosts_with_globs_and_ports(site):
    site.routes["/x"] = (200, {}, b"ok")
    tools = http_tools(allowed_hosts=["localhost", "*.example.test:443"], **OPEN)
    assert call(tools, "http_get", url=site.url("/x", host="localhost")).value.endswith("ok")
    for url in (site.url("/x"), "http://example.test/", "http://api.example.test/", "https://evil.test/"):
        out = call(tools, "http_get", url=url)
        assert out.is_error and "is not in allowed_hosts (localhost, *.example.test:443)" in out.value
    assert len(site.seen) == 1


def test_the_name_is_resolved_once_and_the_address_checked_is_the_one_connected_to(site, monkeypatch):
    # a rebinding DNS answer: public for the first lookup, 127.0.0.1 afterwards
    real = socket.getaddrinfo
    lookups = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.example.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        address = "93.184.216.34" if len(lookups) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    site.routes["/x"] = (200, {}, b"internal")
    out = call(http_tools(), "http_get", url=site.url("/x", host="rebind.example.test"))
    # the public address passed the check and was the one dialled (the test guard blocks it)
    assert out.is_error and "tests may not reach the network" in out.value and "93.184.216.34" in out.value
    assert lookups == ["rebind.example.test"] and site.seen == []
    out = call(http_tools(), "http_get", url=site.url("/x", host="rebind.example.test"))
    assert out.is_error and "rebind.example.test resolves to 127.0.0.1" in out.value and site.seen == []


def test_environment_proxies_are_not_used(site, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    site.routes["/x"] = (200, {}, b"direct")
    assert call(http_tools(**OPEN), "http_get", url=site.url("/x")).value.endswith("direct")


def test_a_session_lends_headers_and_cookies(site):
    site.routes["/login"] = (200, {"Set-Cookie": "sid=abc; Path=/"}, b"in")
    site.routes["/me"] = (200, {}, b"me")
    with requests.Session() as session:
        session.headers["X-App"] = "agent"
        tools = http_tools(session=session, **OPEN)
        call(tools, "http_get", url=site.url("/login"))
        assert session.cookies.get("sid") == "abc"
        assert call(tools, "http_get", url=site.url("/me")).value.endswith("me")
    assert site.seen[1].headers["X-App"] == "agent" and site.seen[1].headers["Cookie"] == "sid=abc"


@pytest.fixture
def tls_site(tmp_path: Path) -> Iterator[tuple[Site, Path]]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    s = Site(tls)
    yield s, cert
    s.close()


def test_tls_keeps_the_name_for_sni_and_certificate_checks_while_connecting_to_the_checked_address(tls_site):
    site, cert = tls_site
    site.routes["/x"] = (200, {}, b"secure")
    with requests.Session() as session:
        session.verify = str(cert)
        tools = http_tools(session=session, **OPEN)
        out = call(tools, "http_get", url=site.url("/x", host="localhost"))
        assert not out.is_error and out.value.endswith("secure")
        assert site.seen[0].headers["Host"] == f"localhost:{site.port}"
        # the certificate names localhost only: by address it does not verify
        out = call(tools, "http_get", url=site.url("/x"))
        assert out.is_error and "SSLError" in out.value
        assert call(http_tools(session=session), "http_get", url=site.url("/x", host="localhost")).is_error
    assert len(site.seen) == 1


# -- idempotency keys ----------------------------------------------------------------------


def intent_ids(events, tool_name: str) -> list[str]:
    """The ids of the tool-execution-intent events of ``tool_name``'s calls."""
    return [e.id for e in events if isinstance(e, ControlEvent) and e.action == "tool-execution-intent"
            and e.data["tool_name"] == tool_name]


def test_a_post_in_a_generation_carries_the_calls_idempotency_key_and_a_get_none(site):
    site.routes["/charges"] = (201, {}, b'{"id": "ch_1"}')
    model = ScriptedModel([ToolCall(name="http_post", input={"url": site.url("/charges"), "body": {"amount": 42}}),
                           ToolCall(name="http_get", input={"url": site.url("/charges")}),
                           ToolCall(name="http_post", input={"url": site.url("/charges"), "body": {"amount": 7}}),
                           "done"])
    with Session.open("k", store=InMemoryEventStore(), model=model, tools=http_tools(**OPEN)) as s:
        s.push_user_message("charge twice")
        assert s.generate().text == "done"
        posts = intent_ids(s.events, "http_post")
    first, get, second = site.seen
    assert get.method == "GET" and "Idempotency-Key" not in get.headers
    assert [first.method, second.method] == ["POST", "POST"]
    assert [first.headers["Idempotency-Key"], second.headers["Idempotency-Key"]] == posts
    assert posts[0] != posts[1]  # one key per call


def test_outside_a_generation_a_post_has_no_key_to_send(site):
    site.routes["/charges"] = (201, {}, b"created")
    assert not call(http_tools(**OPEN), "http_post", url=site.url("/charges"), body="x").is_error
    assert "Idempotency-Key" not in site.seen[0].headers


@pytest.mark.parametrize(("method", "sent"), [("POST", True), ("PUT", True), ("PATCH", True), ("DELETE", True),
                                              ("GET", False), ("HEAD", False), ("OPTIONS", False)])
def test_the_key_goes_with_post_put_patch_and_delete_only(site, method, sent):
    # the tools send GET and POST; the rule is the client's, for every method it sends
    site.routes["/r"] = (200, {}, b"ok")
    client = _Http(None, NetworkPolicy.from_options(None, True), None, 30.0, 1000, 0, 100, 10_000)
    ctx = ToolContext(tool_call_id="c1", tool_name="t", cancel=CancelToken(), idempotency_key="key-1")
    assert not client.send(method, site.url("/r"), ctx, headers={}).is_error
    (seen,) = site.seen
    assert seen.method == method
    assert seen.headers.get("Idempotency-Key") == ("key-1" if sent else None)


def test_the_runtimes_key_replaces_the_models_and_a_lent_sessions_header_is_the_users_choice(site):
    site.routes["/charges"] = (201, {}, b"created")
    model_made = {"url": site.url("/charges"), "body": "x", "headers": {"idempotency-key": "made-up"}}
    model = ScriptedModel([ToolCall(name="http_post", input=model_made), "done"])
    with Session.open("m", store=InMemoryEventStore(), model=model, tools=http_tools(**OPEN)) as s:
        s.push_user_message("charge")
        s.generate()
        (key,) = intent_ids(s.events, "http_post")
        # what the model sent is recorded as it was (a key is no credential: not redacted)
        assert s.events[1].tool_calls[0].input["headers"] == {"idempotency-key": "made-up"}
    assert [v for k, v in site.seen[0].headers.items() if k.lower() == "idempotency-key"] == [key]
    for configured, expected in (("user-own", "user-own"), (None, None)):
        with requests.Session() as lent:
            lent.headers["Idempotency-Key"] = configured
            model = ScriptedModel([ToolCall(name="http_post", input={"url": site.url("/charges"), "body": "x"}),
                                   "done"])
            with Session.open(f"u{configured}", store=InMemoryEventStore(), model=model,
                              tools=http_tools(session=lent, **OPEN)) as s:
                s.push_user_message("charge")
                s.generate()
        assert site.seen[-1].headers.get("Idempotency-Key") == expected


def test_a_redirected_post_keeps_its_key_and_a_get_it_turns_into_drops_it(site):
    site.routes["/v1/charges"] = (307, {"Location": "/v2/charges"}, b"")
    site.routes["/v2/charges"] = (201, {}, b"created")
    site.routes["/form"] = (303, {"Location": "/thanks"}, b"")
    site.routes["/thanks"] = (200, {}, b"thanks")
    model = ScriptedModel([ToolCall(name="http_post", input={"url": site.url("/v1/charges"), "body": "x"}),
                           ToolCall(name="http_post", input={"url": site.url("/form"), "body": "y"}), "done"])
    with Session.open("r", store=InMemoryEventStore(), model=model, tools=http_tools(**OPEN)) as s:
        s.push_user_message("go")
        s.generate()
        keys = intent_ids(s.events, "http_post")
    assert [(x.method, x.path, x.headers.get("Idempotency-Key")) for x in site.seen] == [
        ("POST", "/v1/charges", keys[0]), ("POST", "/v2/charges", keys[0]),
        ("POST", "/form", keys[1]), ("GET", "/thanks", None)]


HTTP_CHILD = Path(__file__).resolve().parent / "_http_child.py"


def test_a_post_resent_after_a_crash_carries_the_same_idempotency_key(tmp_path):
    """An http_tools POST resent after a crash carries the same Idempotency-Key (a loopback
    server records it): the child is SIGKILLed while the server holds its first POST; the
    reopened session's probe says not-executed, and generate() sends the POST again."""
    release = threading.Event()
    keys: list[str | None] = []

    def charges(seen: Seen) -> Answer:
        keys.append(seen.headers.get("Idempotency-Key"))
        if len(keys) == 1:
            release.wait(300)  # stall: the child is killed while it waits for this answer
        return 201, {"Content-Type": "application/json"}, json.dumps({"id": "ch_1", "amount": 42}).encode()

    site = Site(quiet=(BrokenPipeError, ConnectionResetError))
    site.routes["/charges"] = charges
    store = tmp_path / "store"
    child = spawn(str(HTTP_CHILD), str(store), "pay", site.url("/charges"))
    try:
        wait_for(lambda: keys or child.poll() is not None, 120, "the child's POST")
        assert keys, f"the child exited ({child.returncode}) before its POST: {child.communicate()[1]}"
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
        child.communicate()
        release.set()

        probed: list[tuple[dict, str | None]] = []

        def probe(args: dict, ctx: ToolContext) -> str:
            probed.append((args, ctx.idempotency_key))
            return "not-executed"  # say, the payments API has no charge under that key

        get, post = http_tools(**OPEN)
        model = ScriptedModel(["Charged 42 once."])
        with Session.open("pay", store=FileEventStore(store), model=model,
                          tools=[get, dataclasses.replace(post, reconcile=probe)]) as s:
            assert s.generate().text == "Charged 42 once."  # no new message
            (key, *_) = intent_ids(s.events, "http_post")
            result = [e for e in s.events if isinstance(e, ToolResultEvent)][-1]
            assert s.uncertain_tool_executions() == []
    finally:
        release.set()
        if child.poll() is None:
            child.kill()
            child.communicate()
        site.close()
    assert [x.method for x in site.seen] == ["POST", "POST"]
    assert keys == [key, key]
    assert probed == [({"url": site.url("/charges"), "body": {"amount": 42}}, key)]
    assert not result.output.is_error and result.output.value.startswith("HTTP 201")
    assert result.output.value.endswith('{"id": "ch_1", "amount": 42}')
