"""Browser tools against a real headless Chromium and real pages served on 127.0.0.1.

One browser serves the module (starting one costs about a second); tests that need their
own (a short timeout, the process-leak check) start one. A second server on another port
plays the disallowed origin and counts what reaches it: confinement means zero requests.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import pytest
from _procs import alive, wait_for
from _servers import ThreadedHTTP

from agentkit import (
    AccessDenied,
    ApprovalPolicy,
    BrowserError,
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    run_agent,
)
from agentkit.browser import BrowserContext, ChromiumBrowser, browser_tools
from agentkit.browser._origins import OriginPolicy, origin_of
from agentkit.browser._snapshot import render_outline
from agentkit.messages import ImagePart, ToolCallPart
from agentkit.tools.runner import run_tool_call

VIEWPORT = (640, 480)


class Site:
    """A real HTTP server on 127.0.0.1 serving ``pages`` (path -> handler)."""

    def __init__(self, pages: dict[str, object]) -> None:
        site = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                site.hits.append(self.path)
                path = urlsplit(self.path).path
                page = pages.get(path)
                if page is None:
                    self.send_error(404)
                    return
                status, headers, body = page(self) if callable(page) else (200, {}, page)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                for k, v in headers.items():
                    self.send_header(k, v)
                data = body.encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        # a browser that stopped loading hangs up mid-answer: expected here
        self._http = ThreadedHTTP(Handler, quiet=(BaseException,)).start()
        self.origin = f"http://127.0.0.1:{self._http.port}"

    def close(self) -> None:
        self._http.stop()


# connections the browser's request filter does not see: a WebSocket from the page, from a
# frame and from a worker (the other server would log their handshakes as GET /ws...)
_SOCKETS = """<script>
try { new WebSocket('OTHER/ws-page'); } catch (e) {}
try { const f = document.createElement('iframe'); document.body.append(f);
      new f.contentWindow.WebSocket('OTHER/ws-frame'); } catch (e) {}
new Worker(URL.createObjectURL(new Blob(["try { new WebSocket('OTHER/ws-worker') } catch (e) {}"])));
fetch('OTHER/fetch'.replace('ws:', 'http:')).catch(() => 0);
</script>"""


def _html(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    other = Site({"/": _html("Elsewhere", "<h1>Other origin</h1>"), "/pixel.png": "x"})

    def hello(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], str]:
        name = parse_qs(urlsplit(handler.path).query).get("name", ["nobody"])[0]
        return 200, {}, _html("Hello", f"<h1>Hello, {name}!</h1>")

    def slow(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], str]:
        time.sleep(3)
        return 200, {}, _html("Slow", "<p>finally</p>")

    home = Site({
        "/": _html("Form page", """<h1>Welcome</h1><p>Some text here.</p>
            <form action="/hello" method="get"><label>Name <input name="name"></label>
            <button type="submit">Send</button></form>
            <a href="/counter">Counter</a>"""),
        "/hello": hello,
        "/counter": _html("Counter", """<p id="out">Count: 0</p>
            <button onclick="n=(window.n||0)+1; window.n=n; document.getElementById('out').textContent='Count: '+n">
            Add one</button>"""),
        "/away": _html("Away", f'<a href="{other.origin}/">Leave</a>'
                               f'<button onclick="location.href=\'{other.origin}/\'">Script away</button>'
                               f'<a href="{other.origin}/" target="_blank">Pop up</a>'),
        "/redirect": lambda h: (302, {"Location": f"{other.origin}/"}, ""),
        "/embeds": _html("Embeds", f'<p>with an image</p><img src="{other.origin}/pixel.png">'
                                   + _SOCKETS.replace("OTHER", other.origin.replace("http:", "ws:"))),
        "/alert": _html("Alert", "<script>alert('hi'); confirm('sure?')</script><p>after the dialogs</p>"),
        "/slow": slow,
        "/spin": _html("Spin", "<p>spinning</p><script>setTimeout(() => { for (;;) {} }, 50)</script>"),
    })
    try:
        yield home, other
    finally:
        home.close()
        other.close()


@pytest.fixture(scope="module")
def browser(sites: tuple[Site, Site], chromium: str) -> Iterator[ChromiumBrowser]:
    home, _ = sites
    with ChromiumBrowser(allowed_origins=[home.origin], executable=chromium, timeout=10,
                         viewport=VIEWPORT) as b:
        yield b


@pytest.fixture
def tools(browser: ChromiumBrowser, sites: tuple[Site, Site]) -> dict[str, object]:
    sites[1].hits.clear()
    browser.navigate("about:blank")
    return {t.name: t for t in browser_tools(browser)}


def call(tool: object, cancel: CancelToken | None = None, **data: object):
    """Run one tool call the way the loop does (schema, gate, runner)."""
    part = ToolCallPart(tool_call_id="c1", tool_name=tool.name, input=data)  # type: ignore[attr-defined]
    ctx = ToolContext(tool_call_id="c1", tool_name=tool.name, cancel=cancel or CancelToken())  # type: ignore[attr-defined]
    return run_tool_call(tool, part, ctx)  # type: ignore[arg-type]


def ref(outline: str, role: str, name: str) -> str:
    found = re.search(rf'{role} "{re.escape(name)}" \[ref=(e\d+)\]', outline)
    assert found, f"no {role} {name!r} in:\n{outline}"
    return found.group(1)


# -- reading, typing, clicking ------------------------------------------------------------


def test_navigate_returns_the_page_outline_with_refs_and_the_text_view(tools, sites):
    home, _ = sites
    out = call(tools["browser_navigate"], url=f"{home.origin}/")
    assert not out.is_error, out.value
    text = out.as_text()
    assert text.startswith(f"Page: Form page\nURL: {home.origin}/")
    assert '- heading "Welcome" (level=1)' in text and "- text: Some text here." in text
    ref(text, "textbox", "Name"), ref(text, "button", "Send"), ref(text, "link", "Counter")
    plain = call(tools["browser_snapshot"], format="text").as_text()
    assert "Welcome\n\nSome text here." in plain and "[ref=" not in plain


def test_type_and_click_submit_the_form_and_change_the_page(tools, browser, sites):
    home, _ = sites
    page = call(tools["browser_navigate"], url=f"{home.origin}/").as_text()
    typed = call(tools["browser_type"], target=ref(page, "textbox", "Name"), text="Ada")
    assert 'textbox "Name"' in typed.as_text() and 'value="Ada"' in typed.as_text()
    out = call(tools["browser_click"], target=ref(page, "button", "Send"))
    assert not out.is_error, out.value
    assert '- heading "Hello, Ada!"' in out.as_text()
    assert browser.url == f"{home.origin}/hello?name=Ada"


def test_typing_replaces_the_value_and_submit_presses_enter(tools, browser, sites):
    home, _ = sites
    page = call(tools["browser_navigate"], url=f"{home.origin}/").as_text()
    box = ref(page, "textbox", "Name")
    call(tools["browser_type"], target=box, text="first")
    out = call(tools["browser_type"], target=box, text="Grace", submit=True)
    assert '- heading "Hello, Grace!"' in out.as_text(), out.value


def test_a_click_that_only_runs_script_changes_the_page_in_place(tools, sites):
    home, _ = sites
    page = call(tools["browser_navigate"], url=f"{home.origin}/counter").as_text()
    button = ref(page, "button", "Add one")
    call(tools["browser_click"], target=button)
    out = call(tools["browser_click"], target=button)
    assert "Count: 2" in out.as_text()


def test_a_css_selector_also_names_a_target_and_bad_targets_are_error_results(tools, sites):
    home, _ = sites
    call(tools["browser_navigate"], url=f"{home.origin}/")
    assert "Hello, Lin!" in call(tools["browser_type"], target="input[name=name]", text="Lin", submit=True).as_text()
    for target, message in (("e999999", "no element e999999 on this page"),
                            ("#missing", "no element matches the CSS selector"),
                            ("[[", "nor a valid CSS selector")):
        out = call(tools["browser_click"], target=target)
        assert out.is_error and message in out.value, out.value


def test_javascript_dialogs_are_dismissed_instead_of_wedging_the_browser(tools, sites):
    home, _ = sites
    out = call(tools["browser_navigate"], url=f"{home.origin}/alert")
    assert "after the dialogs" in out.as_text()


# -- screenshots ----------------------------------------------------------------------------


def test_a_screenshot_is_a_real_png_of_the_viewport_given_to_the_model_as_an_image(browser, sites):
    home, _ = sites
    seen: list[ImagePart] = []

    def model(request):
        if len(request.messages) == 1:
            return [ToolCall(name="browser_navigate", input={"url": f"{home.origin}/"}),
                    ToolCall(name="browser_screenshot", input={})]
        last = request.messages[-1]
        for part in last.content:
            for p in part.output.value if part.output.kind == "content" else ():
                if isinstance(p, ImagePart):
                    seen.append(p)
        return "I see a form"

    result = run_agent(FunctionModel(model), "look", tools=browser_tools(browser))
    assert result.text == "I see a form"
    (image,) = seen
    data = image.data
    assert image.media_type == "image/png" and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR" and struct.unpack(">II", data[16:24]) == VIEWPORT
    shot = result.tool_calls[1].output
    assert shot.value[0].text == f"Screenshot of {home.origin}/ ({VIEWPORT[0]}x{VIEWPORT[1]} pixels)"


# -- confinement ----------------------------------------------------------------------------


def test_a_url_outside_the_allowed_origins_is_refused_before_the_browser_goes_there(tools, browser, sites):
    home, other = sites
    for url in (f"{other.origin}/", "file:///etc/passwd", "javascript:alert(1)",
                f"https://{home.origin[len('http://'):]}/", "data:text/html,<p>x</p>"):
        out = call(tools["browser_navigate"], url=url)
        assert out.is_error, url
    assert "outside the allowed origins" in call(tools["browser_navigate"], url=f"{other.origin}/").value
    with pytest.raises(AccessDenied, match="outside the allowed origins"):
        browser.navigate(f"{other.origin}/")
    assert other.hits == [] and browser.url == "about:blank"


@pytest.mark.parametrize("how", ["link", "script"])
def test_a_click_that_leads_elsewhere_is_an_error_and_the_page_is_taken_back(tools, browser, sites, how):
    home, other = sites
    page = call(tools["browser_navigate"], url=f"{home.origin}/away").as_text()
    target = ref(page, "link", "Leave") if how == "link" else ref(page, "button", "Script away")
    out = call(tools["browser_click"], target=target)
    assert out.is_error and f"{other.origin}/ is outside the allowed origins" in out.value, out.value
    assert out.value.endswith(f"taken back to {home.origin}/away")
    assert browser.url == f"{home.origin}/away"
    assert other.hits == []  # blocked inside the browser: the request never left it


def test_a_redirect_to_another_origin_is_refused_and_never_followed(tools, browser, sites):
    home, other = sites
    call(tools["browser_navigate"], url=f"{home.origin}/")
    out = call(tools["browser_navigate"], url=f"{home.origin}/redirect")
    assert out.is_error and f"redirected to {other.origin}/" in out.value, out.value
    assert browser.url == f"{home.origin}/" and other.hits == []


def test_resources_sockets_and_pop_ups_of_other_origins_are_blocked_too(tools, browser, sites):
    home, other = sites
    assert "with an image" in call(tools["browser_navigate"], url=f"{home.origin}/embeds").as_text()
    time.sleep(0.5)
    page = call(tools["browser_navigate"], url=f"{home.origin}/away").as_text()
    call(tools["browser_click"], target=ref(page, "link", "Pop up"))
    time.sleep(0.3)
    assert other.hits == []
    targets = browser._cdp.call("Target.getTargets", timeout=5)["targetInfos"]
    assert [t["targetId"] for t in targets if t["type"] == "page"] == [browser._target]  # the pop-up was closed
    assert browser.url == f"{home.origin}/away"


def test_the_tools_check_where_an_action_led_even_when_the_browser_allows_it(sites, chromium):
    # a browser allowing both origins, tools allowing one: the tools' own check catches it
    home, other = sites
    with ChromiumBrowser(allowed_origins=[home.origin, other.origin], executable=chromium,
                         timeout=10, viewport=VIEWPORT) as wide:
        tools = {t.name: t for t in browser_tools(wide, allowed_origins=[home.origin])}
        page = call(tools["browser_navigate"], url=f"{home.origin}/away").as_text()
        out = call(tools["browser_click"], target=ref(page, "link", "Leave"))
        assert out.is_error and "the page went to" in out.value and "outside the allowed origins" in out.value
        assert wide.url == f"{home.origin}/away"
        assert other.hits[0] == "/"  # this browser did fetch it; the tools took it back


def test_click_and_type_wait_for_approval_under_ask_writes_while_reads_run(browser, sites):
    home, _ = sites
    browser.navigate(f"{home.origin}/counter")
    page = browser.snapshot().content
    model = ScriptedModel([[ToolCall(name="browser_snapshot", input={}),
                            ToolCall(name="browser_click", input={"target": ref(page, "button", "Add one")})],
                           "done"])
    with Session(model, tools=browser_tools(browser), approval=ApprovalPolicy(mode="ask-writes")) as s:
        s.push_user_message("add one")
        result = s.generate()
        assert result.finish_reason == "approval-required"
        (pending,) = s.pending_approvals()
        assert pending.tool_name == "browser_click"
        assert "Count: 0" in browser.snapshot(format="text").content  # the click did not run
        s.deny(pending.id, reason="no clicking")
        assert s.generate().text == "done"
    assert "Count: 0" in browser.snapshot(format="text").content


def test_the_execution_contexts_permission_handler_is_asked_for_every_action(browser, sites):
    home, _ = sites
    asked = []

    class Context:
        def request_permission(self, request):
            asked.append((request.operation, request.target))
            if request.operation == "browser-type":
                raise AccessDenied("no typing here")

    tools = {t.name: t for t in browser_tools(browser, context=Context())}
    call(tools["browser_navigate"], url=f"{home.origin}/")
    out = call(tools["browser_type"], target="input", text="x")
    assert out.is_error and "no typing here" in out.value
    assert asked == [("browser-navigate", f"{home.origin}/"), ("browser-type", "input")]


# -- an agent, threads, time limits, processes -------------------------------------------------


def test_a_scripted_agent_fills_the_form_through_the_tools(browser, sites):
    home, _ = sites
    browser.navigate("about:blank")

    def model(request):
        last = request.messages[-1]
        step = len(request.messages)
        if step == 1:
            return ToolCall(name="browser_navigate", input={"url": f"{home.origin}/"})
        outline = last.content[0].output.as_text()
        if step == 3:
            return ToolCall(name="browser_type", input={"target": ref(outline, "textbox", "Name"),
                                                        "text": "Turing", "submit": True})
        return "The page says: " + re.search(r'heading "([^"]+)"', outline).group(1)

    result = run_agent(FunctionModel(model), "greet Turing", tools=browser_tools(browser),
                       approval=ApprovalPolicy(mode="autopilot"))
    assert result.text == "The page says: Hello, Turing!"
    assert [c.tool_name for c in result.tool_calls] == ["browser_navigate", "browser_type"]


def test_parallel_tool_calls_and_threads_share_one_browser_safely(browser, sites):
    home, _ = sites
    browser.navigate(f"{home.origin}/counter")
    calls = [ToolCall(name=n, input={}) for n in ("browser_snapshot", "browser_screenshot") * 4]
    result = run_agent(ScriptedModel([calls, "ok"]), "look", tools=browser_tools(browser))
    assert all(not c.is_error for c in result.tool_calls)
    assert all("Count: 0" in c.output.as_text() for c in result.tool_calls if c.tool_name == "browser_snapshot")

    def hammer(i: int) -> str:
        if i % 3 == 0:
            browser.navigate(f"{home.origin}/counter")
        elif i % 3 == 1:
            assert browser.screenshot()[:4] == b"\x89PNG"
        return browser.snapshot(format="text").content

    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(hammer, range(24)))
    assert all("Count: 0" in t for t in texts)


def test_slow_pages_time_out_cancels_stop_waiting_and_a_wedged_page_is_replaced(sites, chromium):
    home, _ = sites
    with ChromiumBrowser(allowed_origins=[home.origin], executable=chromium, timeout=1) as b:
        with pytest.raises(BrowserError, match="did not finish loading within 1s"):
            b.navigate(f"{home.origin}/slow")  # the page takes 3 s
        cancel = CancelToken()
        threading.Timer(0.2, cancel.cancel).start()
        with pytest.raises(CancelledError):  # not the timeout's BrowserError: the cancel came first
            b.navigate(f"{home.origin}/slow", cancel=cancel)
        b.navigate(f"{home.origin}/counter")  # still usable
        assert "Count: 0" in b.snapshot(format="text").content
        b.navigate(f"{home.origin}/spin")  # a script that never ends wedges its page:
        time.sleep(0.2)
        with pytest.raises(BrowserError, match="stopped responding.*replaced by an empty page"):
            b.snapshot()
        assert b.url == "about:blank"  # a fresh page took its place
        b.navigate(f"{home.origin}/counter")
        assert "Count: 0" in b.snapshot(format="text").content


def _group(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                members.append(int(entry))
    return members


def test_closing_ends_every_browser_process_and_removes_the_profile(sites, chromium):
    home, _ = sites
    b = ChromiumBrowser(allowed_origins=[home.origin], executable=chromium)
    b.navigate(f"{home.origin}/")
    members = _group(b.pid)
    profile = b._process.dir
    assert b.pid in members and len(members) > 2 and os.path.isdir(profile)  # zygotes, renderer...
    slow = threading.Thread(target=lambda: pytest.raises(BrowserError, b.navigate, f"{home.origin}/slow"))
    slow.start()
    time.sleep(0.3)
    b.close()  # while another thread waits for a page
    slow.join(5)
    assert not slow.is_alive()
    wait_for(lambda: not any(alive(p) for p in members), 5, "the browser's processes to end")
    assert not os.path.exists(profile)
    b.close()  # idempotent
    with pytest.raises(BrowserError, match="closed"):
        b.snapshot()


def test_a_browser_that_dies_fails_its_actions_clearly_and_still_closes(chromium):
    b = ChromiumBrowser(allowed_origins=["http://127.0.0.1:1"], executable=chromium)
    os.kill(b.pid, 9)
    wait_for(lambda: b._cdp.closed, 5, "the pipe to close")
    with pytest.raises(BrowserError, match="exited"):
        b.snapshot()
    b.close()
    assert not alive(b.pid)


@pytest.mark.parametrize("ci", [False, True], ids=["developer-machine", "ci"])
def test_without_chromium_the_tests_skip_saying_how_to_install_it_but_fail_in_ci(tmp_path, ci):
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_CI"}
    env["AGENTKIT_CHROMIUM"] = str(tmp_path / "no-chromium-here")
    if ci:
        env["AGENTKIT_CI"] = "1"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--no-header",
         f"{__file__}::test_chromium_browser_implements_the_port"],
        cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, timeout=120,
    )
    assert "apt-get install -y chromium" in res.stdout, res.stdout
    if ci:
        assert res.returncode != 0 and "1 error" in res.stdout
    else:
        assert res.returncode == 0 and "1 skipped" in res.stdout


# -- configuration ------------------------------------------------------------------------


def test_bad_configuration_is_refused_before_a_browser_starts(tmp_path):
    for origins, message in (([], "allowed_origins is empty"), ("http://a", "must be a list"),
                             (["http://a/path"], "is not an origin"), (["ftp://a"], "is not an origin"),
                             (["http://user@a"], "is not an origin"), (["http://*.a"], "is not an origin")):
        with pytest.raises(ConfigurationError, match=message):
            ChromiumBrowser(allowed_origins=origins)
    with pytest.raises(ConfigurationError, match="is not an executable"):
        ChromiumBrowser(allowed_origins=["http://127.0.0.1:1"], executable=str(tmp_path / "nothing"))
    for kwargs in ({"timeout": 0}, {"viewport": (0, 10)}, {"args": "--x"}):
        with pytest.raises(ConfigurationError):
            ChromiumBrowser(allowed_origins=["http://127.0.0.1:1"], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a BrowserContext"):
        browser_tools(object())  # type: ignore[arg-type]


def test_the_origin_policy_compares_canonical_scheme_host_and_port():
    policy = OriginPolicy.from_option(["http://LOCALHOST", "https://127.0.0.1:8443/"])
    assert policy.allows("http://localhost:80/x?y") and policy.allows("http://localhost./")
    assert policy.allows("https://127.0.0.1:8443/a") and policy.allows("about:blank")
    for url in ("https://localhost/", "http://localhost:8080/", "http://127.0.0.1:8443/", "http://evil.localhost/",
                "http://localhost\\@evil/", "data:text/html,x", "chrome-error://chromewebdata/", "http://localhost:99999/"):
        assert not policy.allows(url), url
    assert origin_of("HTTP://[::1]:81/") == ("http", "::1", 81)
    assert policy.describe() == "http://localhost:80, https://127.0.0.1:8443"


def test_the_outline_skips_wrappers_and_deep_pages_do_not_exhaust_the_stack():
    def node(i: int, role: str, name: str = "", children: tuple[int, ...] = (), **props: object) -> dict:
        return {"nodeId": str(i), "role": {"value": role}, "name": {"value": name}, "backendDOMNodeId": i,
                "childIds": [str(c) for c in children],
                "properties": [{"name": k, "value": {"value": v}} for k, v in props.items()]}

    nodes = [node(1, "RootWebArea", "t", (2,)), node(2, "generic", "", (3, 5)), node(3, "button", "Go", (4,)),
             node(4, "StaticText", "Go"), node(5, "checkbox", "", (), checked="true", focusable=True)]
    assert render_outline(nodes) == '- button "Go" [ref=e3]\n- checkbox [ref=e5] (checked)'
    deep = [node(i, "generic", "", (i + 1,)) for i in range(1, 5000)] + [node(5000, "link", "x")]
    assert render_outline(deep) == '- link "x" [ref=e5000]'


def test_chromium_browser_implements_the_port(browser):
    assert isinstance(browser, BrowserContext)
