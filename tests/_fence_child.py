"""One worker process of a conversation shared through one FileEventStore
(tests/test_fencing_processes.py). Every mode prints JSON lines on stdout.

``decide <store> <notes> <sid> <approve|deny> <remember>``: open the session in a
SessionPool (as a web worker does), print ``{"ready": [pending ids]}``, wait for a line on
stdin, then decide the first pending request; print ``{"decided": true}`` or the error.
``push <store> <sid> <tag> <n>``: push ``n`` runtime events through a pooled session; print
how many failed and with what.
``scripted <store> <sid> <tag>``: ask once with a ScriptedModel whose reply is a tool call
without an id; print the call id it got.
``commit <store> <notes> <sid>``: ask (an approval request stays pending), then begin a
transactional generation; print what was made.
``crash <store> <sid>``: ask; the tool the model calls kills this process (SIGKILL).
``wait-ask <store> <sid> <text>``: ask ``text``; the answer's model call blocks until the
file ``<store>/release`` exists. Prints ``{"asked": text}`` once answered.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from _child import push_ticks, say
from _tools import calls_then_answers

from agentkit import (
    AgentkitError,
    ApprovalPolicy,
    FileEventStore,
    FunctionModel,
    ScriptedModel,
    SessionPool,
    ToolCall,
    tool,
)


def note_tools(notes: str) -> list[object]:
    @tool
    def write_note(text: str) -> str:
        """Append a line to the notes file."""
        with open(notes, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return f"wrote {text!r}"

    return [write_note]


note_reply = calls_then_answers("write_note")


def note_pool(store: str, notes: str) -> SessionPool:
    return SessionPool(FileEventStore(store), model=FunctionModel(note_reply), tools=note_tools(notes),
                       approval=ApprovalPolicy(mode="ask-writes"), idle_timeout=None)


def main(mode: str, *args: str) -> None:
    if mode == "decide":
        store, notes, sid, verb, remember = args
        with note_pool(store, notes) as pool:
            session = pool.get(sid)
            pending = [p.id for p in session.pending_approvals()]
            say(ready=pending)
            sys.stdin.readline()  # another process decides meanwhile: this one is stale now
            try:
                if verb == "approve":
                    session.approve(pending[0], remember=remember == "1", note="process B")
                else:
                    session.deny(pending[0], reason="no", remember=remember == "1", note="process B")
                say(decided=True)
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
    elif mode == "push":
        store, sid, tag, n = args
        push_ticks(FileEventStore(store), sid, tag, int(n))
    elif mode == "scripted":
        store, sid, tag = args
        model = ScriptedModel([ToolCall("write_note", {"text": tag}), "done"])
        with SessionPool(FileEventStore(store), model=model, tools=note_tools(os.devnull),
                         idle_timeout=None) as pool:
            result = pool.get(sid).ask(tag)
            say(call_ids=[c.id for c in result.tool_calls])
    elif mode == "commit":
        store, notes, sid = args
        with note_pool(store, notes) as pool:
            session = pool.get(sid)
            result = session.ask("approve me")
            txn = session.begin_generation("a transactional prompt")
            say(finish=result.finish_reason, pending=[p.id for p in session.pending_approvals()],
                generation_id=txn.generation_id, revision=session.revision)
    elif mode == "crash":
        store, sid = args

        @tool
        def charge(amount: int) -> str:
            """Charge a card (the process dies while it runs)."""
            os.kill(os.getpid(), signal.SIGKILL)
            return "unreachable"

        with SessionPool(FileEventStore(store), model=ScriptedModel([ToolCall("charge", {"amount": 42}), "ok"]),
                         tools=[charge], idle_timeout=None) as pool:
            pool.get(sid).ask("charge it")
    elif mode == "wait-ask":
        store, sid, text = args
        release = Path(store) / "release"

        def blocked(request: object) -> str:
            while not release.exists():
                time.sleep(0.02)
            return "answer to " + request.messages[-1].text  # type: ignore[attr-defined]

        with SessionPool(FileEventStore(store), model=FunctionModel(blocked), idle_timeout=None) as pool:
            pool.get(sid).ask(text)
            say(asked=text)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
