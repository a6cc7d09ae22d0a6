"""MCP stdio servers that write things other than JSON-RPC to stdout.

* no argument: a banner, then a debug line every 50 ms, and never a message (stdin is
  read, so the only thing wrong is what it prints);
* ``--mid-session``: a real MCP server (the SDK's MCPServer) whose ``chatty`` tool also
  writes a debug line to stdout, as a careless tool author's print does (and blank
  lines come before its first message).
"""

import os
import sys
import threading
import time


def _garbage_forever() -> None:
    threading.Thread(target=lambda: [None for _ in sys.stdin], daemon=True).start()
    print("Starting notes server v1.2 ...", flush=True)
    for n in range(600):
        print(f"debug: tick {n} {{not json", flush=True)
        time.sleep(0.05)
    time.sleep(3600)


def _chatty_server() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("chatty")
    stdout = os.dup(1)  # the pipe to the client, whatever the SDK does with sys.stdout

    @server.tool()
    def chatty(text: str) -> str:
        """Echo the text (and write a debug line to stdout)."""
        os.write(stdout, f"DEBUG chatty called with {text}\n".encode())
        return f"ok: {text}"

    os.write(stdout, b"\n\n")  # blank lines before the first message: harmless, let pass
    server.run()


if __name__ == "__main__":
    if "--mid-session" in sys.argv:
        _chatty_server()
    else:
        _garbage_forever()
