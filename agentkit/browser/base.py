"""The ``BrowserContext`` port: one page a tool can navigate, read, click, type into and
photograph. :class:`~agentkit.browser.ChromiumBrowser` implements it on the Chromium
this machine has; a host may implement it on a remote or pooled browser and give it to
:func:`~agentkit.browser.browser_tools` the same way.

The contract, for implementers:

* every method may be called from any thread (agentkit runs tools on worker threads,
  several at once); an implementation serialises what its browser cannot do in parallel;
* ``cancel`` is the calling tool's :class:`~agentkit.cancel.CancelToken`: when it is
  cancelled, a waiting method stops and raises :class:`~agentkit.errors.CancelledError`;
* a failure the model could act on (a page that did not load, an unknown element) is a
  :class:`~agentkit.errors.BrowserError` with a message saying what happened;
* ``url`` is the address of the page shown now, after redirects and script navigations:
  the tools check it against their allowed origins after every action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..cancel import CancelToken

SnapshotFormat = Literal["outline", "text"]
"""``outline``: the page's accessibility tree, one element per line, interactive elements
with a ``[ref=eN]`` to click or type into. ``text``: the page's visible text only."""


@dataclass(frozen=True, kw_only=True)
class PageSnapshot:
    """What a page shows, as text a model can read."""

    url: str
    """The page's address."""
    title: str
    """The page's title."""
    content: str
    """The outline (with element refs) or the visible text, as asked."""

    def render(self) -> str:
        """The snapshot as the browser tools show it: title and URL, then the content."""
        head = f"Page: {self.title}\nURL: {self.url}" if self.title else f"URL: {self.url}"
        return f"{head}\n\n{self.content}" if self.content else head


@runtime_checkable
class BrowserContext(Protocol):
    """One browser page, driven from any thread (see the module docstring)."""

    @property
    def url(self) -> str:
        """The address of the page shown now (``about:blank`` before any navigation)."""
        ...

    def navigate(self, url: str, *, cancel: CancelToken | None = None) -> None:
        """Load ``url`` and wait until it has loaded (or the implementation's page-load
        timeout passed: :class:`~agentkit.errors.BrowserError`)."""
        ...

    def snapshot(self, *, format: SnapshotFormat = "outline",
                 cancel: CancelToken | None = None) -> PageSnapshot:
        """The page as text: its outline with element refs, or its visible text."""
        ...

    def click(self, target: str, *, cancel: CancelToken | None = None) -> None:
        """Click the element ``target`` names (a ref from :meth:`snapshot` such as
        ``e12``, or a CSS selector) and wait for a navigation it started."""
        ...

    def type(self, target: str, text: str, *, submit: bool = False,
             cancel: CancelToken | None = None) -> None:
        """Replace the value of the input ``target`` names with ``text``; with
        ``submit``, press Enter afterwards and wait for a navigation it started."""
        ...

    def screenshot(self, *, cancel: CancelToken | None = None) -> bytes:
        """A PNG image of the visible part of the page."""
        ...

    def close(self) -> None:
        """Release the browser. Idempotent."""
        ...
