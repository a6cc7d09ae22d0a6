"""Every example runs as the README says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return env


def test_quickstart_runs_on_the_scripted_model_without_a_provider():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "model: ScriptedModel" in out.stdout
    assert "tool add({'a': 7, 'b': 35}) -> 42" in out.stdout
    assert "tool multiply({'a': 6, 'b': 9}) -> 54" in out.stdout
    assert "answer: 7 + 35 = 42 and 6 x 9 = 54." in out.stdout


def test_quickstart_reports_a_configured_provider_it_cannot_use():
    env = _clean_env()
    env["AGENTKIT_MODEL"] = "nosuch:model"
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode != 0
    assert "unknown model provider 'nosuch'" in out.stderr


def test_quickstart_uses_a_configured_provider_over_the_real_wire_format():
    from fakes import openai_wire as w
    from fakes.server import FakeServer

    with FakeServer() as server:
        server.add(
            w.tool_stream(
                [("call_a", "add", ['{"a": 7,', ' "b": 35}']), ("call_m", "multiply", ['{"a": 6, "b": 9}'])]
            ),
            w.text_stream("7 + 35 = 42 ", "and 6 x 9 = 54."),
        )
        env = _clean_env()
        env["AGENTKIT_MODEL"] = f"openai-compatible:local-model@{server.url}/v1"
        out = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "quickstart.py")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr
        assert f"model: openai-compatible:local-model@{server.url}/v1" in out.stdout
        assert "tool multiply({'a': 6, 'b': 9}) -> 54" in out.stdout
        assert "answer: 7 + 35 = 42 and 6 x 9 = 54." in out.stdout
        first, second = server.bodies
        assert first["model"] == "local-model"
        assert {t["function"]["name"] for t in first["tools"]} == {"add", "multiply"}
        results = [m for m in second["messages"] if m["role"] == "tool"]
        assert [r["content"] for r in results] == ["42", "54"]
