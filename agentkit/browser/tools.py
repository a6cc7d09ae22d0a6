"""Built-in browser tools over a :class:`~agentkit.browser.BrowserContext`:
browser_navigate, browser_snapshot, browser_click, browser_type, browser_screenshot.

Confinement, like the file tools' root: the tools reach only ``allowed_origins`` (scheme,
host and port; an explicit list, taken from the browser when not given). A URL outside
them is refused before the browser is asked, and after every action the page's address
is checked again: a click, a form, a redirect or a script that took the page elsewhere
makes the action an error result, and the page is taken back to the last allowed address
(or ``about:blank``). :class:`~agentkit.browser.ChromiumBrowser` also blocks every
request to another origin inside the browser, so such a page is never even fetched.

Approvals: ``browser_navigate``, ``browser_snapshot`` and ``browser_screenshot`` are
marked read-only; ``browser_click`` and ``browser_type`` are writes, so an
:class:`~agentkit.ApprovalPolicy` in ``ask-writes`` mode asks before them. With a
``context``, every call also asks ``context.request_permission`` first (operations
``browser-navigate``, ``browser-read``, ``browser-click``, ``browser-type``).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..context._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ..errors import AccessDenied, AgentkitError, CancelledError, ConfigurationError
from ..messages import ImagePart, TextPart, ToolOutput
from ..tools._common import check_limits, guarded, permission_gate, visible
from ..tools._netguard import check_http_url
from ..tools.base import Tool, ToolContext
from ._origins import BLANK, OriginPolicy
from .base import BrowserContext

_TARGET = {"type": "string", "description": "A ref from the page snapshot, such as e12 (preferred), or a CSS selector"}


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG image, or None when ``data`` is not one."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


class _Driver:
    """What the browser tools do, one action at a time: each action and the check of
    where it led run together under one lock, and a page outside the allowed origins
    is taken back to the last allowed one."""

    def __init__(self, browser: BrowserContext, policy: OriginPolicy, max_lines: int, max_bytes: int) -> None:
        self.browser = browser
        self.policy = policy
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.lock = threading.Lock()  # an action and the check of where it led, together
        self.last_allowed = BLANK

    def page(self, ctx: ToolContext, note: str = "") -> str:
        snap = self.browser.snapshot(cancel=ctx.cancel)
        return visible((note + "\n\n" if note else "") + snap.render(), self.max_lines, self.max_bytes)

    def confined(self, name: str, ctx: ToolContext, action: Callable[[], None]) -> str | ToolOutput:
        """Run ``action``; if the page is then outside the allowed origins (whether the
        action succeeded or failed), take it back and answer with an error."""
        with self.lock:
            failure: AgentkitError | None = None
            try:
                action()
            except CancelledError:
                raise
            except AgentkitError as exc:  # AccessDenied, BrowserError: checked below
                failure = exc
            url = self.browser.url
            refusal = self.policy.refusal(url)
            if refusal is None and not isinstance(failure, AccessDenied):
                if failure is not None:
                    raise failure
                self.last_allowed = url
                return self.page(ctx)
            back = self.last_allowed
            try:
                self.browser.navigate(back, cancel=ctx.cancel)
            except CancelledError:
                raise
            except AgentkitError:  # the last page no longer loads: fall back to the empty page
                back = BLANK
                self.browser.navigate(BLANK, cancel=ctx.cancel)
            why = str(failure) if failure is not None else f"the page went to {refusal}"
            return ToolOutput.error(f"{name}: refused: {why}; the browser was taken back to {back}")

    def browser_navigate(self, url: str, ctx: ToolContext) -> str | ToolOutput:
        if url != BLANK:
            check_http_url(url)
        refusal = self.policy.refusal(url)
        if refusal is not None:
            return ToolOutput.error(f"browser_navigate: refused: {refusal}")
        return self.confined("browser_navigate", ctx, lambda: self.browser.navigate(url, cancel=ctx.cancel))

    def browser_snapshot(self, ctx: ToolContext, format: str = "outline") -> str:
        with self.lock:
            snap = self.browser.snapshot(format="text" if format == "text" else "outline", cancel=ctx.cancel)
        return visible(snap.render(), self.max_lines, self.max_bytes)

    def browser_click(self, target: str, ctx: ToolContext) -> str | ToolOutput:
        return self.confined("browser_click", ctx, lambda: self.browser.click(target, cancel=ctx.cancel))

    def browser_type(self, target: str, text: str, ctx: ToolContext, submit: bool = False) -> str | ToolOutput:
        return self.confined("browser_type", ctx,
                             lambda: self.browser.type(target, text, submit=submit, cancel=ctx.cancel))

    def browser_screenshot(self, ctx: ToolContext) -> ToolOutput:
        with self.lock:
            url = self.browser.url
            data = self.browser.screenshot(cancel=ctx.cancel)
        size = png_size(data)
        if size is None:
            return ToolOutput.error("browser_screenshot: the browser returned something that is not a PNG image")
        caption = f"Screenshot of {url} ({size[0]}x{size[1]} pixels)"
        return ToolOutput(kind="content", value=(TextPart(text=caption), ImagePart(data=data, media_type="image/png")))


def browser_tools(
    browser: BrowserContext,
    *,
    allowed_origins: Iterable[str] | None = None,
    context: Any = None,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Tool]:
    """Tools driving ``browser``: ``browser_navigate {url}``, ``browser_snapshot
    {format}``, ``browser_click {target}``, ``browser_type {target, text, submit}`` and
    ``browser_screenshot {}``. Navigating, clicking and typing answer with the page's new
    outline, whose ``[ref=eN]`` marks name the elements to click or type into; the
    screenshot comes back as an image part.

    ``allowed_origins`` (e.g. ``["http://127.0.0.1:8123"]``) defaults to the browser's
    own ``allowed_origins``; one of the two must say it. ``context`` is an execution
    context whose ``request_permission`` is asked before every call. ``max_lines`` and
    ``max_bytes`` bound the text the model sees.
    """
    if not isinstance(browser, BrowserContext):
        raise ConfigurationError(
            f"browser_tools() needs a BrowserContext (such as agentkit.browser.ChromiumBrowser), "
            f"not {type(browser).__name__}"
        )
    if allowed_origins is None:
        allowed_origins = getattr(browser, "allowed_origins", None)
        if allowed_origins is None:
            raise ConfigurationError(
                "browser_tools() needs allowed_origins=['http://host:port', ...]: the browser "
                f"{type(browser).__name__} does not say which origins it may reach"
            )
    policy = OriginPolicy.from_option(allowed_origins)
    check_limits(max_lines, max_bytes)
    driver = _Driver(browser, policy, max_lines, max_bytes)

    def gate(operation: str, target_of: Callable[[dict[str, Any]], str]) -> Any:
        def permission_of(data: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
            details = {"chars": len(data["text"]), "submit": bool(data.get("submit"))} if operation == "type" else {}
            return f"browser-{operation}", target_of(data), details

        return permission_gate(context, f"browser_{operation}", permission_of)

    def schema(required: list[str], **props: Any) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    def current(_: dict[str, Any]) -> str:
        return "the current page"

    return [
        Tool(name="browser_navigate",
             description="Open a URL in the browser and return the page outline (elements to act on "
                         "carry a [ref=eN]). Only the allowed origins can be opened: " + policy.describe(),
             input_schema=schema(["url"], url={"type": "string", "description": "Absolute http(s) URL"}),
             fn=guarded("browser_navigate", driver.browser_navigate), context_param="ctx", read_only=True,
             before_call=gate("navigate", lambda d: str(d["url"]))),
        Tool(name="browser_snapshot",
             description="Read the current page: 'outline' (default) lists its elements with [ref=eN] "
                         "marks to click or type into; 'text' gives its visible text only.",
             input_schema=schema([], format={"type": "string", "enum": ["outline", "text"]}),
             fn=guarded("browser_snapshot", driver.browser_snapshot), context_param="ctx", read_only=True,
             before_call=gate("read", current)),
        Tool(name="browser_click",
             description="Click an element of the current page (a ref from the outline, such as e12) and "
                         "return the page outline afterwards.",
             input_schema=schema(["target"], target=_TARGET),
             fn=guarded("browser_click", driver.browser_click), context_param="ctx",
             before_call=gate("click", lambda d: str(d["target"]))),
        Tool(name="browser_type",
             description="Replace the text of an input of the current page (a ref from the outline); "
                         "submit=true presses Enter afterwards. Returns the page outline afterwards.",
             input_schema=schema(["target", "text"], target=_TARGET,
                                 text={"type": "string", "description": "The new text of the input"},
                                 submit={"type": "boolean", "description": "Press Enter after typing"}),
             fn=guarded("browser_type", driver.browser_type), context_param="ctx",
             before_call=gate("type", lambda d: str(d["target"]))),
        Tool(name="browser_screenshot",
             description="Take a screenshot of the visible part of the current page (a PNG image).",
             input_schema=schema([]),
             fn=guarded("browser_screenshot", driver.browser_screenshot), context_param="ctx", read_only=True,
             before_call=gate("read", current)),
    ]
