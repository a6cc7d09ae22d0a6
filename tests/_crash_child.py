"""Child process that dies inside an approved tool call (tests/test_crash_recovery.py).

    python tests/_crash_child.py approve-and-die <store-root> <session-id> <marker-file>
        opens the session (its model asked for ``refund``, which needs approval), approves
        the pending request and generates: the tool appends ``<tool call id> <idempotency
        key>`` to the marker file (its side effect), then SIGKILLs its own process before
        returning, so no result is ever committed.
    python tests/_crash_child.py run-and-die <store-root> <session-id> <marker-file>
        the same without approvals: a new session whose model calls ``refund`` at once.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import _child  # noqa: F401 - puts the checkout first on sys.path

from agentkit import ApprovalPolicy, FileEventStore, ScriptedModel, Session, ToolCall, ToolContext, tool


def refund_tool(marker: Path, *, die: bool):
    """A ``refund`` tool whose side effect is a line in ``marker``; with ``die`` it kills
    its own process right after the side effect."""

    @tool
    def refund(order: str, ctx: ToolContext) -> str:
        """Refund an order."""
        with marker.open("a", encoding="utf-8") as f:
            f.write(f"{ctx.tool_call_id} {ctx.idempotency_key}\n")
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"refunded {order}"

    return refund


def main() -> None:
    mode, root, sid, marker = sys.argv[1:5]
    refund = refund_tool(Path(marker), die=True)
    if mode == "approve-and-die":
        with Session.open(sid, store=FileEventStore(root), model=ScriptedModel(["never reached"]),
                          tools=[refund], approval=ApprovalPolicy(mode="ask-writes")) as session:
            (request,) = session.pending_approvals()
            session.approve(request.id, note="process B")
            session.generate()
    elif mode == "run-and-die":
        # an id of its own: the test models number calls per process (call_1, ...)
        model = ScriptedModel([ToolCall(name="refund", input={"order": "o-1"}, id="refund-o-1"), "never reached"])
        with Session.open(sid, store=FileEventStore(root), model=model, tools=[refund]) as session:
            session.push_user_message("refund order o-1")
            session.generate()
    else:
        sys.exit(f"unknown mode {mode!r}")
    sys.exit("the tool returned: it should have killed this process")


if __name__ == "__main__":
    main()
