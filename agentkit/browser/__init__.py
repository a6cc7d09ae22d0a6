"""Browser tools: the :class:`BrowserContext` port, :class:`ChromiumBrowser` (headless
Chromium from this machine's packages, driven over the DevTools pipe) and
:func:`browser_tools` (navigate, read, click, type, screenshot), confined to an explicit
list of allowed origins. See docs/browser.md.
"""

from __future__ import annotations

from .base import BrowserContext, PageSnapshot, SnapshotFormat
from .chromium import ChromiumBrowser
from .tools import browser_tools

__all__ = ["BrowserContext", "ChromiumBrowser", "PageSnapshot", "SnapshotFormat", "browser_tools"]
