"""Finding the Chromium the browser tests drive (tests/test_browser.py, docs/browser.md)."""

from __future__ import annotations

import os
import shutil

HOW_TO = (
    "the browser tests drive a headless Chromium from the system's packages: on Debian/Ubuntu "
    "`apt-get install -y chromium` (or set AGENTKIT_CHROMIUM to a Chromium or Chrome binary). "
    "In CI (AGENTKIT_CI=1) they fail instead of skipping."
)


def find_chromium() -> str | None:
    """The Chromium binary to test with, or None."""
    explicit = os.environ.get("AGENTKIT_CHROMIUM")
    if explicit:  # only that one
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None
