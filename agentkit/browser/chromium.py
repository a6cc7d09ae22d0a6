"""``ChromiumBrowser``: the :class:`~agentkit.browser.BrowserContext` port on the Chromium
installed on this machine, driven over the Chrome DevTools Protocol.

Why this driver: agentkit runs tools on worker threads, several at once, so the driver
must work from any thread. Playwright's sync API is bound to the thread that started it;
Selenium would need the matching chromedriver and cannot see or stop requests as they
leave the browser. The DevTools Protocol over the browser's debugging pipe needs no
package, no driver binary and no open port, is thread-agnostic (commands are matched to
answers by id), and lets the browser itself enforce the allowed origins: every request
it makes -- pages, frames, scripts, images, form posts, each redirect hop, requests of
pop-ups -- is paused (``Fetch`` domain) and let through only when its origin is allowed.
Nothing is downloaded at run time.

One page (tab) per browser; pop-ups and new tabs are closed as they open, downloads are
refused, and JavaScript dialogs are dismissed, so a page cannot wedge the browser.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..cancel import CancelToken
from ..errors import AccessDenied, BrowserError, CancelledError, ConfigurationError
from ._cdp import CdpConnection, CdpTimeout
from ._launch import BrowserProcess
from ._origins import BLANK, OriginPolicy
from ._snapshot import render_outline
from .base import PageSnapshot, SnapshotFormat

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_START_TIMEOUT = 60.0  # seconds a starting browser may take to answer (a busy CI machine)
_DETACHED = "Not attached to an active page"
_REF = re.compile(r"^e(\d+)$")
_SELECT_ALL = """function () {
  if (typeof this.select === 'function') { this.select(); return; }
  if (this.isContentEditable) {
    const range = document.createRange(); range.selectNodeContents(this);
    const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
  }
}"""
# Connections the request filter (the Fetch domain) does not see: WebSockets, WebTransport
# and WebRTC. Their constructors are removed from every document before its scripts run.
_NO_SOCKETS = """(() => {
  for (const name of ['WebSocket', 'WebTransport', 'RTCPeerConnection', 'webkitRTCPeerConnection']) {
    if (!(name in globalThis)) continue;
    const refuse = function () {
      throw new DOMException(name + ' is disabled in this browser (agentkit allows only its origins)', 'SecurityError');
    };
    Object.defineProperty(globalThis, name, {value: refuse, writable: false, configurable: false});
  }
})();"""
_CLEAR = """function () {
  if ('value' in this) this.value = ''; else if (this.isContentEditable) this.textContent = '';
  this.dispatchEvent(new Event('input', {bubbles: true}));
}"""


def _find_executable(executable: str | None) -> str:
    if executable is not None:
        found = shutil.which(executable)
        if found is None:
            raise ConfigurationError(
                f"executable {executable!r} is not an executable file; give the path of a Chromium "
                f"or Chrome binary (Debian/Ubuntu: `apt-get install chromium` installs /usr/bin/chromium)"
            )
        return found
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise ConfigurationError(
        "no Chromium found on PATH (looked for " + ", ".join(_CANDIDATES) + "); install it "
        "(Debian/Ubuntu: `apt-get install chromium`) or pass executable='/path/to/chromium'"
    )


class ChromiumBrowser:
    """A headless Chromium with one page, confined to ``allowed_origins``.

    ``allowed_origins`` (required, e.g. ``["http://127.0.0.1:8123"]``) lists the only
    origins (scheme, host, port) the browser may request anything from; every other
    request is blocked inside the browser before it is sent. ``executable`` is the
    browser binary (default: ``chromium`` or ``google-chrome`` on PATH). ``timeout``
    (seconds) bounds each action, page loads included. ``viewport`` is the page size in
    CSS pixels, which is also the screenshot size. ``args`` are extra command-line flags.

    The browser starts at construction. Use it as a context manager or call
    :meth:`close`: the browser's whole process tree ends and its temporary profile is
    removed (also at interpreter exit, for a browser never closed). Every method may be
    called from any thread; actions run one at a time.
    """

    def __init__(
        self,
        *,
        allowed_origins: Iterable[str],
        executable: str | None = None,
        headless: bool = True,
        timeout: float = 30.0,
        viewport: tuple[int, int] = (1280, 800),
        args: Sequence[str] = (),
    ) -> None:
        self.policy = OriginPolicy.from_option(allowed_origins)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if (not isinstance(viewport, tuple) or len(viewport) != 2
                or not all(isinstance(v, int) and 16 <= v <= 8192 for v in viewport)):
            raise ConfigurationError(f"viewport must be (width, height) in pixels, 16-8192 each; got {viewport!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ConfigurationError("args must be a list of command-line flags (strings)")
        self.executable = _find_executable(executable)
        self.timeout = float(timeout)
        self.viewport = viewport
        self._action = threading.Lock()
        self._state = threading.Lock()
        self._loading = threading.Condition()
        self._main_frame: str | None = None
        self._is_loading = False
        self._navigations = 0
        self._blocked: list[str] = []
        self._target: str | None = None
        self._closed = False
        self._process = BrowserProcess(self.executable, headless=headless, args=args)
        self._cdp = CdpConnection(self._process.read_fd, self._process.write_fd)
        self._finalizer = weakref.finalize(self, _shut_down, self._cdp, self._process)
        try:
            self._session = self._open_page()
        except BaseException as exc:
            self._finalizer()
            if isinstance(exc, BrowserError):
                tail = self._process.log_tail()
                raise BrowserError(f"{self.executable} did not start: {exc}"
                                   + (f"\nits last output:\n{tail}" if tail else "")) from None
            raise

    # -- lifecycle -------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The browser's main process id (its child processes share it as group id)."""
        return self._process.pid

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """The allowed origins, normalised (``http://127.0.0.1:8123``)."""
        return self.policy.names()

    def close(self) -> None:
        """Close the browser: end its process tree and remove its profile. Idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        self._finalizer()

    def __enter__(self) -> ChromiumBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"pid={self.pid}"
        return f"ChromiumBrowser({state}, allowed_origins={list(self.allowed_origins)})"

    def _open_page(self) -> str:
        """Set the browser up (request filter, no downloads, pop-ups closed) and open the page."""
        cdp, t = self._cdp, max(self.timeout, _START_TIMEOUT)
        cdp.call("Browser.getVersion", timeout=t)
        for method, handler in (("Fetch.requestPaused", self._on_request),
                                ("Target.targetCreated", self._on_target),
                                ("Target.attachedToTarget", self._on_attached),
                                ("Page.frameStartedLoading", self._on_started),
                                ("Page.frameStoppedLoading", self._on_stopped),
                                ("Page.javascriptDialogOpening", self._on_dialog)):
            cdp.on(method, handler)
        cdp.call("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}, timeout=t)
        cdp.call("Browser.setDownloadBehavior", {"behavior": "deny"}, timeout=t)
        target = cdp.call("Target.createTarget", {"url": BLANK}, timeout=t)["targetId"]
        self._target = target
        cdp.call("Target.setDiscoverTargets", {"discover": True}, timeout=t)
        return self._attach(target, t)

    def _attach(self, target: str, t: float) -> str:
        """Attach to the page ``target`` and prepare it (``t``: seconds per command);
        returns the session id."""
        cdp = self._cdp
        session: str = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                timeout=t)["sessionId"]
        cdp.call("Page.enable", session=session, timeout=t)
        cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": _NO_SOCKETS, "runImmediately": True},
                 session=session, timeout=t)
        cdp.call("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                 session=session, timeout=t)
        width, height = self.viewport
        cdp.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                 session=session, timeout=t)
        tree = cdp.call("Page.getFrameTree", session=session, timeout=t)
        self._main_frame = tree["frameTree"]["frame"]["id"]
        return session

    def _replace_page(self) -> None:
        """Close a page that stopped answering (a script in an endless loop) and open a
        new, empty one in its place."""
        old, self._target = self._target, None  # while None, the new page is not taken for a pop-up
        try:
            self._cdp.call("Target.closeTarget", {"targetId": old}, timeout=self.timeout)
        except BrowserError:  # the browser ends it with the renderer anyway
            pass
        target = self._cdp.call("Target.createTarget", {"url": BLANK}, timeout=self.timeout)["targetId"]
        self._session = self._attach(target, self.timeout)
        self._target = target
        with self._loading:
            self._is_loading = False
            self._loading.notify_all()

    # -- what the browser tells us (reader thread: never wait for an answer here) ------

    def _on_request(self, params: dict[str, Any], session: str | None) -> None:
        url = params["request"]["url"]
        if self.policy.allows(url):
            self._cdp.send("Fetch.continueRequest", {"requestId": params["requestId"]}, session=session)
        else:
            with self._state:
                self._blocked = [*self._blocked[-9:], url]
            self._cdp.send("Fetch.failRequest", {"requestId": params["requestId"],
                                                 "errorReason": "BlockedByClient"}, session=session)

    def _on_target(self, params: dict[str, Any], session: str | None) -> None:
        info = params["targetInfo"]
        if info.get("type") == "page" and self._target is not None and info["targetId"] != self._target:
            self._cdp.send("Target.closeTarget", {"targetId": info["targetId"]})  # pop-ups, new tabs

    def _on_attached(self, params: dict[str, Any], session: str | None) -> None:
        """A worker or frame of the page, paused before its first script: disarm its
        sockets, then let it run."""
        child = params["sessionId"]
        kind = params["targetInfo"].get("type")
        if kind == "iframe":
            self._cdp.send("Page.addScriptToEvaluateOnNewDocument",
                           {"source": _NO_SOCKETS, "runImmediately": True}, session=child)
        else:
            self._cdp.send("Runtime.evaluate", {"expression": _NO_SOCKETS}, session=child)
        self._cdp.send("Runtime.runIfWaitingForDebugger", session=child)

    def _on_started(self, params: dict[str, Any], session: str | None) -> None:
        if params.get("frameId") == self._main_frame:
            with self._loading:
                self._is_loading = True
                self._navigations += 1
                self._loading.notify_all()

    def _on_stopped(self, params: dict[str, Any], session: str | None) -> None:
        if params.get("frameId") == self._main_frame:
            with self._loading:
                self._is_loading = False
                self._loading.notify_all()

    def _on_dialog(self, params: dict[str, Any], session: str | None) -> None:
        self._cdp.send("Page.handleJavaScriptDialog", {"accept": False}, session=session)

    # -- helpers -----------------------------------------------------------------------

    @contextmanager
    def _acting(self, cancel: CancelToken | None) -> Iterator[float]:
        """Hold the action lock (waiting at most ``timeout``); yields the deadline."""
        deadline = time.monotonic() + self.timeout
        while not self._action.acquire(timeout=0.05):
            if cancel is not None and cancel.cancelled:
                raise CancelledError(cancel.reason)
            if time.monotonic() >= deadline:
                raise BrowserError(f"the browser stayed busy with another action for {self.timeout:g}s")
        try:
            if self._closed:
                raise BrowserError("the browser is closed; start a new ChromiumBrowser")
            if self._cdp.closed:
                raise BrowserError("the browser exited (crashed or was killed); start a new ChromiumBrowser")
            try:
                yield time.monotonic() + self.timeout
            except CdpTimeout as exc:
                self._replace_page()
                raise BrowserError(f"the page stopped responding ({exc}); it was replaced by an empty "
                                   f"page (about:blank)") from None
        finally:
            self._action.release()

    def _call(self, method: str, params: dict[str, Any] | None = None, *, deadline: float,
              cancel: CancelToken | None) -> dict[str, Any]:
        while True:
            try:
                return self._cdp.call(method, params, session=self._session, cancel=cancel,
                                      timeout=max(deadline - time.monotonic(), 0.05))
            except BrowserError as exc:
                # between a failed navigation and its error page the page has no document
                # for a moment: ask again until it has one
                if _DETACHED not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def _wait_loaded(self, what: str, deadline: float, cancel: CancelToken | None,
                     since: int | None = None, settle: float = 0.0) -> None:
        """Wait until the main frame stopped loading. With ``since`` (a navigation count),
        first wait up to ``settle`` seconds for a navigation to start, and return at once
        when none does."""
        with self._loading:
            if since is not None:
                settle_until = min(time.monotonic() + settle, deadline)
                while self._navigations == since and not self._cdp.closed:
                    left = settle_until - time.monotonic()
                    if left <= 0:
                        return
                    self._loading.wait(min(left, 0.05))
            while self._is_loading and not self._cdp.closed:
                if cancel is not None and cancel.cancelled:
                    self._cdp.send("Page.stopLoading", session=self._session)
                    raise CancelledError(cancel.reason)
                left = deadline - time.monotonic()
                if left <= 0:
                    self._cdp.send("Page.stopLoading", session=self._session)
                    raise BrowserError(f"{what} did not finish loading within {self.timeout:g}s; "
                                       f"loading was stopped")
                self._loading.wait(min(left, 0.05))

    def _node(self, target: str, deadline: float, cancel: CancelToken | None) -> int:
        """The backend node id ``target`` (a snapshot ref or a CSS selector) names."""
        if not isinstance(target, str) or not target.strip():
            raise BrowserError("target is empty; give a ref from the snapshot (e12) or a CSS selector")
        ref = _REF.match(target.strip())
        if ref is not None:
            node = int(ref.group(1))
            try:
                self._call("DOM.describeNode", {"backendNodeId": node}, deadline=deadline, cancel=cancel)
            except BrowserError:
                raise BrowserError(f"no element {target} on this page; refs change when the page "
                                   f"changes: take a new snapshot") from None
            return node
        found = self._call("Runtime.evaluate", {"expression": f"document.querySelector({json.dumps(target)})"},
                           deadline=deadline, cancel=cancel)
        if "exceptionDetails" in found:
            raise BrowserError(f"{target!r} is neither a ref from the snapshot (e12) nor a valid CSS selector")
        object_id = found["result"].get("objectId")
        if object_id is None:
            raise BrowserError(f"no element matches the CSS selector {target!r}")
        described = self._call("DOM.describeNode", {"objectId": object_id}, deadline=deadline, cancel=cancel)
        return int(described["node"]["backendNodeId"])

    def _call_on(self, node: int, function: str, deadline: float, cancel: CancelToken | None) -> None:
        obj = self._call("DOM.resolveNode", {"backendNodeId": node}, deadline=deadline, cancel=cancel)
        self._call("Runtime.callFunctionOn", {"objectId": obj["object"]["objectId"],
                                              "functionDeclaration": function},
                   deadline=deadline, cancel=cancel)

    def _press(self, key: str, code: int, text: str | None, deadline: float, cancel: CancelToken | None) -> None:
        down: dict[str, Any] = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": key,
                                "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code}
        if text:
            down["text"] = text
        self._call("Input.dispatchKeyEvent", down, deadline=deadline, cancel=cancel)
        self._call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": key,
                                              "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code},
                   deadline=deadline, cancel=cancel)

    # -- the port ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The address of the page shown now; for a page that failed to load, the
        address that was asked for."""
        history = self._call("Page.getNavigationHistory", deadline=time.monotonic() + self.timeout, cancel=None)
        return str(history["entries"][history["currentIndex"]]["url"])

    def navigate(self, url: str, *, cancel: CancelToken | None = None) -> None:
        """Load ``url`` (an allowed origin's http(s) URL, or ``about:blank``) and wait
        for it to load. AccessDenied for another origin; BrowserError when it fails or
        does not load within ``timeout``."""
        if not isinstance(url, str) or not self.policy.allows(url):
            raise AccessDenied(f"navigate: {self.policy.refusal(str(url))}")
        with self._acting(cancel) as deadline:
            with self._state:
                self._blocked = []
            with self._loading:
                before = self._navigations
            try:
                result = self._call("Page.navigate", {"url": url}, deadline=deadline, cancel=cancel)
            except (CdpTimeout, CancelledError) as exc:  # no answer from the server yet
                self._cdp.send("Page.stopLoading", session=self._session)
                if isinstance(exc, CancelledError):
                    raise
                raise BrowserError(f"{url} did not finish loading within {self.timeout:g}s; "
                                   f"loading was stopped") from None
            error = result.get("errorText")
            if error:
                with self._state:
                    blocked = list(self._blocked)
                if error == "net::ERR_BLOCKED_BY_CLIENT" and blocked:
                    raise AccessDenied(f"navigate: {url} was redirected to {blocked[-1]}, "
                                       f"{self.policy.refusal(blocked[-1])}")
                raise BrowserError(f"{url} could not be loaded: {error}")
            if result.get("loaderId"):
                self._wait_loaded(url, deadline, cancel, since=before, settle=self.timeout)

    def snapshot(self, *, format: SnapshotFormat = "outline",
                 cancel: CancelToken | None = None) -> PageSnapshot:
        """The page as text: its accessibility outline with ``[ref=eN]`` on the elements
        that can be clicked or typed into, or (``format="text"``) its visible text."""
        if format not in ("outline", "text"):
            raise BrowserError(f"format must be 'outline' or 'text', not {format!r}")
        with self._acting(cancel) as deadline:
            history = self._call("Page.getNavigationHistory", deadline=deadline, cancel=cancel)
            entry = history["entries"][history["currentIndex"]]
            if format == "text":
                found = self._call("Runtime.evaluate", {
                    "expression": "document.body ? document.body.innerText : ''", "returnByValue": True},
                    deadline=deadline, cancel=cancel)
                content = str(found["result"].get("value") or "")
            else:
                tree = self._call("Accessibility.getFullAXTree", deadline=deadline, cancel=cancel)
                content = render_outline(tree.get("nodes", []))
            return PageSnapshot(url=str(entry["url"]), title=str(entry.get("title") or ""), content=content)

    def click(self, target: str, *, cancel: CancelToken | None = None) -> None:
        """Click the middle of the element ``target`` names, as a mouse would, and wait
        for a page load it starts."""
        with self._acting(cancel) as deadline:
            node = self._node(target, deadline, cancel)
            try:
                self._call("DOM.scrollIntoViewIfNeeded", {"backendNodeId": node}, deadline=deadline, cancel=cancel)
                quads = self._call("DOM.getContentQuads", {"backendNodeId": node},
                                   deadline=deadline, cancel=cancel).get("quads") or []
            except BrowserError as exc:
                raise BrowserError(f"cannot click {target}: {exc}") from None
            if not quads:
                raise BrowserError(f"cannot click {target}: it is not visible on the page")
            q = quads[0]
            x, y = sum(q[0::2]) / 4, sum(q[1::2]) / 4
            with self._loading:
                before = self._navigations
            for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
                self._call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                        "clickCount": 1}, deadline=deadline, cancel=cancel)
            self._wait_loaded(f"the page opened by clicking {target}", deadline, cancel,
                              since=before, settle=0.25)

    def type(self, target: str, text: str, *, submit: bool = False,
             cancel: CancelToken | None = None) -> None:
        """Focus the element ``target`` names, replace its value with ``text`` (input
        events fire as for typing), and with ``submit`` press Enter and wait for a page
        load it starts."""
        with self._acting(cancel) as deadline:
            node = self._node(target, deadline, cancel)
            try:
                self._call("DOM.focus", {"backendNodeId": node}, deadline=deadline, cancel=cancel)
            except BrowserError as exc:
                raise BrowserError(f"cannot type into {target}: {exc}") from None
            if text:
                self._call_on(node, _SELECT_ALL, deadline, cancel)
                self._call("Input.insertText", {"text": text}, deadline=deadline, cancel=cancel)
            else:
                self._call_on(node, _CLEAR, deadline, cancel)
            if submit:
                with self._loading:
                    before = self._navigations
                self._press("Enter", 13, "\r", deadline, cancel)
                self._wait_loaded(f"the page opened by submitting {target}", deadline, cancel,
                                  since=before, settle=0.25)

    def screenshot(self, *, cancel: CancelToken | None = None) -> bytes:
        """A PNG of the viewport (``viewport`` pixels)."""
        with self._acting(cancel) as deadline:
            shot = self._call("Page.captureScreenshot", {"format": "png"}, deadline=deadline, cancel=cancel)
            return base64.b64decode(shot["data"])


def _shut_down(cdp: CdpConnection, process: BrowserProcess) -> None:
    """Ask the browser to close, then end its process group and remove its profile."""
    if not cdp.closed:
        try:
            cdp.call("Browser.close", timeout=2.0)
        except BrowserError:  # it is gone or hung: the group is killed below either way
            pass
    process.stop(grace=3.0)
    cdp.close()
