"""Process B of tests/test_session_follow.py: commits to a session another process listens to.

``python tests/_follow_child.py <store> <session id>`` where ``<store>`` is ``file:<dir>``
or ``pg:<schema>:<conninfo>``. It reads one command per line on stdin and answers each
with one JSON line on stdout, ``{"ids": [...]}``, the ids of the events it committed:

- ``push <type>``: a runtime event of that type;
- ``approve <request id>``: approve the pending request, then generate (the approved
  call runs and the model answers);
- ``quit``.

Each command opens the session afresh from the store (a process with no state of its own).
"""

from __future__ import annotations

import json
import sys

import _child

from agentkit import ApprovalPolicy, FunctionModel, Session, ToolCall, tool
from agentkit.stores import EventStore


@tool
def save_note(text: str) -> str:
    """Save a note."""
    return f"saved {text}"


def reply(request):  # type: ignore[no-untyped-def]
    """One save_note call for the first message, then an answer (runtime events reach the
    model as user messages too: they get no call of their own)."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return ToolCall("save_note", {"text": request.messages[-1].text})
    return "done: " + results[-1].content[0].output.as_text()


def open_store(spec: str) -> EventStore:
    """The store ``spec`` names (a PostgreSQL store gives up connecting after 5 s)."""
    store: EventStore = _child.open_store(spec, connect_timeout=5)
    return store


def session_of(store: EventStore, session_id: str) -> Session:
    return Session.open(session_id, store=store, model=FunctionModel(reply), tools=[save_note],
                        approval=ApprovalPolicy(mode="ask-writes"))


def main(spec: str, session_id: str) -> None:
    store = open_store(spec)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "quit":
            break
        with session_of(store, session_id) as session:
            before = session.revision
            if command == "push":
                session.push_runtime_event(arg, {"from": "process B"})
            elif command == "approve":
                session.approve(arg, note="process B")
                session.generate()
            else:
                raise SystemExit(f"unknown command {command!r}")
            ids = [e.id for e in session.events][before - session.revision:]  # an append: one per event
        print(json.dumps({"ids": ids}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
