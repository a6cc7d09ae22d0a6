"""The coverage floor (pyproject.toml ``fail_under``) holds only for a run in which every
test ran: a test skipped for what the machine lacks (tests/_env.py) takes its lines out
of the total, so such a run says so instead of failing; CI (``AGENTKIT_CI=1``) makes
those tests fail instead of skipping, and always applies the floor. Each case runs pytest
with coverage in a subprocess, as ``tox -e py311`` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NEEDS_POSTGRES = "tests/test_store_postgres.py::test_a_store_whose_schema_was_not_migrated_says_what_to_do"


# tox runs the suite on pytest-xdist workers (tox.ini); the floor's rule holds either way
WORKERS = pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one-process", "xdist"])


def pytest_with_coverage(tmp_path: Path, *tests: str, ci: bool = False,
                         workers: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_CI"}
    env["AGENTKIT_PG_BIN"] = "/nonexistent"  # a machine without PostgreSQL
    env["COVERAGE_FILE"] = str(tmp_path / ".coverage")
    if ci:
        env["AGENTKIT_CI"] = "1"
    # test_cancel.py alone covers far less of agentkit than the floor of 99 asked here
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--cov=agentkit",
         "--cov-fail-under=99", *(workers or []), "tests/test_cancel.py", *tests],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@WORKERS
def test_a_run_where_every_test_ran_is_held_to_the_floor(tmp_path, workers):
    proc = pytest_with_coverage(tmp_path, workers=workers)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "Coverage failure: total of" in proc.stdout and "less than fail-under=99" in proc.stdout
    assert "coverage floor not applied" not in proc.stdout


@WORKERS
def test_a_run_with_a_test_skipped_for_what_the_machine_lacks_says_so_instead_of_failing(tmp_path, workers):
    proc = pytest_with_coverage(tmp_path, NEEDS_POSTGRES, workers=workers)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 skipped" in proc.stdout and "Coverage failure" not in proc.stdout
    # the skip says what to install ...
    assert "not on this machine: missing the PostgreSQL server binaries" in proc.stdout
    assert "apt-get install -y postgresql" in proc.stdout
    # ... and the end of the run why the floor was not applied
    assert "coverage floor not applied" in proc.stdout
    assert "1 tests skipped for what this machine lacks" in proc.stdout and "floor of 99%" in proc.stdout


@WORKERS
def test_in_ci_such_a_test_fails_and_the_floor_still_holds(tmp_path, workers):
    proc = pytest_with_coverage(tmp_path, NEEDS_POSTGRES, ci=True, workers=workers)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "AGENTKIT_CI=1: CI must run these tests" in proc.stdout
    assert "Coverage failure: total of" in proc.stdout and "coverage floor not applied" not in proc.stdout


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
