"""The MCP reference servers (``@modelcontextprotocol/server-everything``, ``-filesystem``,
``-memory``) installed from the npm registry at the versions pinned in
``tests/mcp_servers/node/package-lock.json``.

``npm ci --prefix tests/mcp_servers/node`` installs them (``.ci/run`` does). When they are
missing, tests that need them skip with that command, except in CI (``AGENTKIT_CI=1``),
where they fail: CI must never pass without running them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from _env import missing

NODE_DIR = Path(__file__).resolve().parent / "node"
INSTALL = "npm ci --prefix tests/mcp_servers/node"


def reference_server(package: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """A stdio config running the reference server ``package`` (``everything``,
    ``filesystem``, ``memory``); skips (or fails in CI) when it is not installed."""
    exe = NODE_DIR / "node_modules" / ".bin" / f"mcp-server-{package}"
    problem = None
    if shutil.which("node") is None:
        problem = (f"node is not on PATH: the MCP reference servers need Node.js 20+ and npm "
                   f"(Debian/Ubuntu: `apt-get install -y nodejs npm`), then run: {INSTALL}")
    elif not exe.exists():
        problem = f"the MCP reference server {package!r} is not installed; run: {INSTALL}"
    if problem is not None:
        missing(problem)
    cfg: dict = {"command": str(exe), "args": list(args)}
    if env is not None:
        cfg["env"] = env
    return cfg
