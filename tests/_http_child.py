"""Child process for the http_tools crash test: it is SIGKILLed while its POST waits.

    python tests/_http_child.py <store-root> <session-id> <url>
        a FileEventStore session whose model calls http_post {url, body: {"amount": 42}}
        (http_tools with allow_private_networks=True: the server is on 127.0.0.1); the
        parent's server records the request and stalls, and the parent kills this process.
"""

from __future__ import annotations

import sys

import _child  # noqa: F401 - puts this checkout's agentkit first on sys.path

from agentkit import FileEventStore, ScriptedModel, Session, ToolCall, http_tools


def main() -> None:
    root, sid, url = sys.argv[1:4]
    model = ScriptedModel([ToolCall(name="http_post", input={"url": url, "body": {"amount": 42}}), "never reached"])
    session = Session.open(sid, store=FileEventStore(root), model=model, tools=http_tools(allow_private_networks=True))
    session.push_user_message("charge the customer 42")
    session.generate()
    sys.exit("the POST was answered: the parent should have killed this process while it waited")


if __name__ == "__main__":
    main()
