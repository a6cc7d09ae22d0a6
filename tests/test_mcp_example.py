"""examples/mcp_stdio.py and examples/mcp_oauth.py run against their shipped servers and
leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp_servers.helpers import wait_for

ROOT = Path(__file__).resolve().parents[1]


def _processes_running(script: str) -> list[int]:
    """Live processes whose command line names ``script``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
            with open(f"/proc/{entry}/stat", encoding="ascii") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if script in args and state != "Z":
            found.append(int(entry))
    return found


def test_mcp_stdio_example_runs_as_documented(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_stdio.py")],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    server = str(ROOT / "examples" / "mcp_server_demo.py")
    wait_for(lambda: not _processes_running(server), what="the example's MCP server to exit")
    lines = out.stdout.splitlines()
    assert lines[0] == "server notes: connected, 4 tools"
    assert "  list_notes (read-only): The titles of all saved notes, one per line." in lines
    assert "  tool save_note({'title': 'groceries', 'text': 'eggs milk bread'}) -> saved 'groceries' (3 words)" in lines
    assert "  tool word_count({'text': 'the quick brown fox'}) -> 4" in lines
    assert "  tool list_notes({}) -> groceries" in lines
    denied = next(line for line in lines if line.startswith("  tool delete_all_notes"))
    assert "ERROR" in denied and "not allowed in this demo" in denied
    assert lines[-1].startswith(
        "answer: Done: groceries | tool call blocked: the call to tool 'delete_all_notes' was denied"
    )


def test_mcp_oauth_example_authorizes_once_and_reuses_the_saved_tokens(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_oauth.py")],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["authorize at", "first connect", "second connect"]
    assert lines[1].split(": ")[1] == lines[2].split(": ")[1]  # the same registered client
    assert "Traceback" not in out.stderr
    wait_for(lambda: not _processes_running(str(ROOT / "examples" / "mcp_oauth_server.py")),
             what="the example's server to exit")
