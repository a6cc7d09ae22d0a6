"""The approval round trip across OS processes on one FileEventStore: process A stops with
``approval-required``; process B opens the session, approves and generates (the tool runs
exactly once and the model reads its output); a third run asks again and a fourth denies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).resolve().parent / "_approval_child.py"


def run(tmp_path: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(CHILD), str(tmp_path / "store"), str(tmp_path / "notes.txt"), *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_approve_in_another_process_then_deny_in_a_third_run(tmp_path):
    notes = tmp_path / "notes.txt"
    a = run(tmp_path, "ask", "buy milk")
    assert a["finish_reason"] == "approval-required" and a["model_calls"] == 1
    (pending,) = a["pending"]
    assert pending["tool_name"] == "append_note" and pending["input"] == {"text": "buy milk"}
    assert not notes.exists()  # nothing ran before the answer

    b = run(tmp_path, "approve", pending["id"])
    assert b["finish_reason"] == "stop" and b["pending"] == []
    assert b["text"] == "the tool said: appended 'buy milk'"  # the model saw the output
    assert notes.read_text() == "buy milk\n"  # it ran exactly once

    c = run(tmp_path, "ask", "sell the car")
    assert c["finish_reason"] == "approval-required"
    (second,) = c["pending"]
    assert second["id"] != pending["id"]

    d = run(tmp_path, "deny", second["id"], "ask me tomorrow")
    assert d["finish_reason"] == "stop"
    assert d["text"] == "the tool said: denied: ask me tomorrow"
    assert notes.read_text() == "buy milk\n"  # the denied call never ran


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
