"""Every example runs as the README says."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's agentkit, whatever else is installed
    return env


def _without_sdk(tmp_path, package: str) -> dict[str, str]:
    """An environment where `import <package>` fails, as when its extra is not installed."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / f"{package}.py").write_text(f'raise ImportError("no module named {package} (test shim)")\n')
    env = _clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shim), str(ROOT)])
    return env


def _run(example: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )


@pytest.mark.parametrize(("key", "package", "spec"), [
    ("OPENAI_API_KEY", "openai", "openai:gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic", "anthropic:claude-sonnet-4-5"),
])
def test_quickstart_with_a_key_but_no_provider_extra_says_so_and_runs_scripted(tmp_path, key, package, spec):
    env = _without_sdk(tmp_path, package)
    env[key] = "sk-test-not-used"
    out = _run("quickstart.py", env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"model: ScriptedModel, not {spec}: ")
    assert f"pip install 'sync-agentkit[{package}]'" in first
    assert "answer: 7 + 35 = 42 and 6 x 9 = 54." in out.stdout


def test_background_jobs_picks_a_real_model_the_same_way(tmp_path):
    env = _without_sdk(tmp_path, "openai")
    env["OPENAI_API_KEY"] = "sk-test-not-used"
    out = _run("background_jobs.py", env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout.splitlines()[0].startswith("using ScriptedModel, not openai:gpt-4.1-mini: ")
    assert "model: Started unit, lint and e2e tests in the background." in out.stdout


def test_background_jobs_runs_on_a_configured_provider_over_the_real_wire_format():
    from fakes import openai_wire as w
    from fakes.server import FakeServer

    with FakeServer() as server:
        script = "echo unit: running; sleep 0.2; echo unit: done; exit 0"
        args = json.dumps({"command": "bash", "args": ["-c", script]})
        server.add(w.tool_stream([("call_u", "start_shell", [args])]), w.text_stream("Started the unit suite."))
        server.responder = lambda rec: w.text_stream("unit exited 0.")
        env = _clean_env()
        env["AGENTKIT_MODEL"] = f"openai-compatible:local-model@{server.url}/v1"
        out = _run("background_jobs.py", env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == f"using openai-compatible:local-model@{server.url}/v1"
        assert "model: Started the unit suite." in out.stdout
        assert "model: unit exited 0." in out.stdout  # the job's completion woke the model
        first = server.bodies[0]
        assert "The unit suite's script is" in first["messages"][0]["content"]  # how to run the suites
        assert {t["function"]["name"] for t in first["tools"]} >= {"start_shell"}
        assert any("job-finished" in json.dumps(b) for b in server.bodies[2:])


def test_the_examples_share_one_model_picker():
    for example in ("quickstart.py", "background_jobs.py"):
        tree = ast.parse((ROOT / "examples" / example).read_text())
        imports = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert ("_pick_model", "pick_model") in imports, example
        assert "API_KEY" not in (ROOT / "examples" / example).read_text().split('"""', 2)[2], example


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
