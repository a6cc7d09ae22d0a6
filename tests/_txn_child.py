"""Child process for the transaction and intent tests: it is SIGKILLed mid-work.

    python tests/_txn_child.py charge <store-root> <session-id> <marker-file>
        a durable session whose model calls charge(amount=42); the tool appends a line to
        the marker file, prints "tool-running" and sleeps until killed.
    python tests/_txn_child.py txn-charge <store-root> <session-id> <marker-file>
        the same, inside a transactional generation.
    python tests/_txn_child.py begin <store-root> <session-id>
        begins a transactional generation, prints its generation id and claim token, and
        sleeps until killed (the transaction is left open).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _child import tell

from agentkit import FileEventStore, ScriptedModel, Session, ToolCall, ToolContext, tool


def main() -> None:
    mode, root, sid = sys.argv[1:4]
    store = FileEventStore(root)
    if mode in ("charge", "txn-charge"):
        marker = Path(sys.argv[4])

        @tool
        def charge(amount: int, ctx: ToolContext) -> str:
            """Charge the customer."""
            with marker.open("a") as f:
                f.write(f"{ctx.idempotency_key}\n")
            tell("tool-running", ctx.idempotency_key)
            time.sleep(600)
            return "charged"

        model = ScriptedModel([ToolCall(name="charge", input={"amount": 42}), "never reached"])
        session = Session.open(sid, store=store, model=model, tools=[charge])
        if mode == "charge":
            session.push_user_message("charge the customer 42")
            session.generate()
        else:
            txn = session.begin_generation("charge the customer 42")
            session.generate(transaction=txn)
    elif mode == "begin":
        session = Session.open(sid, store=store, model=ScriptedModel(["never reached"]))
        txn = session.begin_generation("draft the change")
        tell("begun", txn.generation_id, txn.claim_token)
        time.sleep(600)
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
