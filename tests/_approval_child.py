"""One run of the approval round trip, as its own OS process (tests/test_approvals_processes.py).

``python tests/_approval_child.py <store dir> <notes file> ask <text>``: push a message whose
answer is a call of ``append_note``, generate, print the outcome as one JSON line.
``... approve <request id>`` / ``... deny <request id> <reason>``: decide, generate, print.
"""

from __future__ import annotations

import sys

from _child import say
from _tools import calls_then_answers

from agentkit import ApprovalPolicy, FileEventStore, FunctionModel, Session, tool


def main(store_dir: str, notes: str, mode: str, *args: str) -> None:
    @tool
    def append_note(text: str) -> str:
        """Append a line to the notes file."""
        with open(notes, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return f"appended {text!r}"

    model = FunctionModel(calls_then_answers("append_note"))
    with Session.open("round-trip", store=FileEventStore(store_dir), model=model, tools=[append_note],
                      approval=ApprovalPolicy(mode="ask-writes")) as session:
        if mode == "ask":
            session.push_user_message(args[0])
        elif mode == "approve":
            session.approve(args[0], note="process B")
        else:
            session.deny(args[0], reason=args[1], note="process C")
        result = session.generate()
        say(finish_reason=result.finish_reason, text=result.text,
            pending=[p.to_dict() for p in session.pending_approvals()], model_calls=len(result.steps))


if __name__ == "__main__":
    main(*sys.argv[1:])
