"""examples/background_jobs.py runs and prints what happened."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "background_jobs.py"


def test_background_jobs_example_runs():
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(EXAMPLE.parent.parent)
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "model: Started unit, lint and e2e tests in the background." in out
    assert out.count("'state': 'running'") == 3
    report = re.search(r"model: Job report: (job_\w+) exited (\d+); still running: (.+)", out)
    assert report, out
    unit = re.search(r"'execution_id': '(job_\w+)', 'state': 'running', 'command': \"bash -c 'echo unit", out)
    assert unit and report.group(1) == unit.group(1) and report.group(2) == "0"  # the first to finish
    assert "job-finished" in out and "job-output" in out
    final = re.search(r"after abort_session\(abort_jobs=True\): (.+)", out).group(1)
    states = dict(item.split("=") for item in final.split(", "))
    assert len(states) == 3 and states[report.group(1)] == "finished"
    assert "aborted" in states.values()  # the 30 s e2e suite was stopped, not waited for
    assert "stdout] e2e: done" not in out
