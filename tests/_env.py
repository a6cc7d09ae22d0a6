"""Tests that need something besides Python and the ``[test]`` extra (a PostgreSQL
server, Chromium, the npm MCP reference servers, strace, root for tmpfs mounts).

Without it such a test skips, its reason saying what to install; in CI (``AGENTKIT_CI=1``,
exported by ``.ci/run``) it fails instead, since CI must run every test. A run in which
any of them skipped measures coverage without their lines, so ``tests/conftest.py`` does
not hold it to the coverage floor (it says so at the end of the run); CI always is.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

TAG = "not on this machine: "
"""Starts the reason of every skip for something the machine lacks."""


def in_ci() -> bool:
    """True under ``.ci/run`` (``AGENTKIT_CI=1``)."""
    return bool(os.environ.get("AGENTKIT_CI"))


def missing(problem: str) -> NoReturn:
    """Skip the current test for what the machine lacks (``problem`` says what to install),
    or fail it in CI."""
    if in_ci():
        pytest.fail(f"{problem} (AGENTKIT_CI=1: CI must run these tests)", pytrace=False)
    pytest.skip(TAG + problem)


def reason(problem: str) -> str:
    """The reason of a ``skipif`` for what the machine lacks."""
    return TAG + problem


def lacked(report: pytest.TestReport) -> bool:
    """True when ``report`` is a skip for something the machine lacks."""
    return bool(report.skipped) and TAG in str(report.longrepr)


MOUNT = reason("needs permission to mount a tmpfs (full and read-only disks): run the tests as root "
               "where mounting is allowed, as CI does")
"""The reason of the tests that mount a small tmpfs."""
