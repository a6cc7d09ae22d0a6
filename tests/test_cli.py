"""The agentkit command, run as a real subprocess against a real file store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agentkit import FileEventStore, ScriptedModel, Session


def cli(*args, stdin="", env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "agentkit.cli", *args], input=stdin, capture_output=True, text=True, timeout=120, env=env
    )


def test_sessions_and_events_show_what_the_store_holds(tmp_path):
    store = FileEventStore(tmp_path)
    with Session.open("demo-1", store=store, model=ScriptedModel(["hi there"])) as s:
        s.push_user_message("hello")
        s.generate()
    out = cli("sessions", "--store", str(tmp_path))
    assert out.returncode == 0 and out.stdout.split() == ["demo-1"]
    out = cli("events", "demo-1", "--store", str(tmp_path))
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["type"] for d in lines] == ["user-message", "assistant-message"]
    assert lines[1]["content"][0]["text"] == "hi there"


def test_errors_are_clear(tmp_path):
    out = cli("events", "missing", "--store", str(tmp_path))
    assert out.returncode == 1 and "no session 'missing'" in out.stderr
    out = cli("run", "hello")
    assert out.returncode != 0 and "no model" in out.stderr
    out = cli("run", "hello", "--model", "bogus")
    assert out.returncode == 2 and "invalid model spec" in out.stderr
    out = cli("events", "../../etc", "--store", str(tmp_path))
    assert out.returncode == 2 and "invalid session id" in out.stderr
