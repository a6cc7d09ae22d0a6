"""MCP over OAuth 2.1 from a plain script: authorize once, then reuse the saved tokens.

    python examples/mcp_oauth.py

Starts examples/mcp_oauth_server.py (an OAuth-protected MCP server whose authorization
server approves at once), connects to it with McpOAuth and a FileTokenStore, and
connects a second time to show that the saved tokens are reused without asking. A real
CLI would print the authorization URL and read the redirect back with input(); here the
"browser" is urllib, following the authorization server's redirect by one hop.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from agentkit.mcp import FileTokenStore, McpOAuth, connect_mcp

REDIRECT_URI = "http://127.0.0.1:8765/callback"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # hand the 302 back instead of following it


def browser(authorization_url: str) -> str:
    """The person's part: open the URL, approve, and come back with the redirect URL."""
    print("authorize at:", authorization_url.split("?")[0], "...")
    try:
        urllib.request.build_opener(_NoRedirects).open(authorization_url, timeout=30)
    except urllib.error.HTTPError as redirect:  # the 302 to REDIRECT_URI?code=...&state=...
        return str(redirect.headers["Location"])
    raise RuntimeError("the authorization server did not redirect back")


def main() -> None:
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("mcp_oauth_server.py"))],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as home:
            store = FileTokenStore(Path(home) / "mcp-tokens.json")
            for attempt in ("first", "second"):
                auth = McpOAuth(redirect_uri=REDIRECT_URI, on_authorize=browser, token_store=store,
                                client_name="agentkit example")
                with connect_mcp({"protected": {"url": url, "auth": auth}}) as mcp:
                    whoami = {t.name: t for t in mcp.tools}["whoami"]
                    print(f"{attempt} connect:", whoami().as_text())
    finally:
        server.terminate()
        server.wait(20)


if __name__ == "__main__":
    main()
