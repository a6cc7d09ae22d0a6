"""Child processes of tests/test_loop_calls_processes.py (exactly once across processes).

:func:`fulfil_in` is the kill loop's child (started from a forkserver, so it costs a fork
rather than an interpreter start): open session ``sid`` on a FileEventStore, push
``fulfil order <order>`` unless the session has a user message, then ``generate()``; the
model calls ``fulfil(order)``, a tool of three steps (charge, reserve, email: each a line
in a file of ``<ledger-dir>``) with a reconcile probe. At each point of the run (after
every append to the store, after every effect) it sends ``{"point": name}`` on its pipe
and waits for a word back: the parent SIGKILLs it there or lets it go on. At the end it
sends ``{"finished": <the session's last answer>, "finish": reason}``.

The other modes run as ``python tests/_calls_child.py <mode> ...`` and print JSON lines:
``answer <store-dir> <sid> <value>``: print ``{"ready": [pending input ids]}``, wait for a
line on stdin, answer the first with ``value``; print ``{"answered": true}`` or the error.
``stall <store> <sid> <ledger-dir>``: ``<store>`` as ``_child.open_store`` reads it. Ask
once; the model calls ``charge``, whose one step writes ``started`` to
``<ledger-dir>/marker`` and waits for ``<ledger-dir>/release`` (then the marker says whether
the step was committed: ``step-committed``, or ``step-<error class>``); print the answer
or the error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _child import open_store, say

from agentkit import AgentkitError, FileEventStore, FunctionModel, Session, ToolCall, ToolContext, tool
from agentkit.events import AssistantMessageEvent, ControlEvent, UserMessageEvent
from agentkit.transactions._journal import STEP

_parent: Connection | None = None
"""The kill loop child's pipe to the parent (set by :func:`fulfil_in`)."""


def point(name: str) -> None:
    """Say where this process is and wait for the parent's go (it may SIGKILL us here)."""
    assert _parent is not None
    _parent.send({"point": name})
    _parent.recv()


class PointedStore(FileEventStore):
    """A FileEventStore whose every append is a point (after it is durable)."""

    def append(self, session_id: str, events: Any, *, expected_revision: int, lease: Any = None) -> int:
        revision = super().append(session_id, events, expected_revision=expected_revision, lease=lease)
        point("appended " + ",".join(map(_kind, events)))
        return revision


def _kind(event: Any) -> str:
    """An appended event, for a point's name: its type or action, a step's name, and
    whether an assistant message calls tools."""
    if isinstance(event, ControlEvent):
        return event.action + (f":{event.data['name']}" if event.action == STEP else "")
    if isinstance(event, AssistantMessageEvent):
        return "assistant-message" + (":call" if event.tool_calls else ":answer")
    return str(event.type)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _append(path: Path, line: str) -> None:
    """One write(2) with O_APPEND: a SIGKILL never leaves half a line."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def keyed(ledger: Path, step: str, order: str, key: str) -> str:
    """What an API with idempotency keys does (Stripe's): the first request with ``key``
    makes the effect (a ledger line), a repeated one returns the first one's answer."""
    for line in _lines(ledger):
        what, line_order, line_key, ref = line.split()
        if (what, line_key) == (step, key):
            point(f"{step} repeated")
            return ref
    ref = f"{step}-{order}-{os.getpid()}"
    _append(ledger, f"{step} {order} {key} {ref}")
    point(f"{step} done")
    return ref


def fulfil_tool(ledger_dir: Path) -> Any:
    ledger, emails = ledger_dir / "ledger", ledger_dir / "emails"

    def sent(args: dict[str, Any], ctx: ToolContext) -> str:
        """The probe: the email (the one effect without a key) went out for this call?"""
        found = any(line.split()[2] == ctx.idempotency_key for line in _lines(emails))
        return "executed" if found else "not-executed"

    @tool(reconcile=sent)
    def fulfil(order: str, ctx: ToolContext) -> str:
        """Charge, reserve and email for an order."""
        assert ctx.idempotency_key
        key = ctx.idempotency_key
        charge = ctx.step("charge", lambda: keyed(ledger, "charge", order, key))
        reserve = ctx.step("reserve", lambda: keyed(ledger, "reserve", order, key))

        def email() -> str:  # a plain append: sending twice sends two emails
            _append(emails, f"email {order} {key} {charge}")
            point("email done")
            return f"mail-{order}"

        mail = ctx.step("email", email)
        return f"{charge} {reserve} {mail}"

    return fulfil


def fulfil_reply(order: str) -> Any:
    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall("fulfil", {"order": order})
        (result,) = [p for p in last.content if hasattr(p, "output")]
        if result.output.is_error:
            # the one error a call of this tool can get: a kill between the assistant
            # message and its intent (the call never started) closes it as interrupted (a
            # call that started is settled by the probe, which always answers)
            return ToolCall("fulfil", {"order": order})
        return "done: " + result.output.as_text()

    return reply


def fulfil_in(parent: Connection, root: str, sid: str, ledger_dir: str, order: str) -> None:
    """The kill loop's child (see the module docstring)."""
    global _parent
    _parent = parent
    model = FunctionModel(fulfil_reply(order))
    with Session.open(sid, store=PointedStore(root), model=model, tools=[fulfil_tool(Path(ledger_dir))]) as s:
        if not any(isinstance(e, UserMessageEvent) for e in s.events):
            s.push_user_message(f"fulfil order {order}")
        result = s.generate()
        answers = [e for e in s.events if isinstance(e, AssistantMessageEvent) and not e.tool_calls]
    parent.send({"finished": answers[-1].content[0].text if answers else None, "finish": result.finish_reason})


def main(mode: str, *args: str) -> None:
    if mode == "answer":
        root, sid, value = args
        with Session.open(sid, store=FileEventStore(root)) as s:
            pending = [r.id for r in s.pending_inputs()]
            say(ready=pending)
            sys.stdin.readline()
            try:
                s.answer_input(pending[0], json.loads(value))
                say(answered=True)
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
    elif mode == "stall":
        spec, sid, ledger_dir = args
        marker, release = Path(ledger_dir) / "marker", Path(ledger_dir) / "release"

        @tool(reconcile=lambda args, ctx: "not-executed")
        def charge(amount: int, ctx: ToolContext) -> str:
            """Charge (its step waits for the release file)."""
            def run() -> dict[str, Any]:
                _append(marker, "started")
                while not release.exists():
                    time.sleep(0.02)
                return {"charged": amount, "by": os.getpid()}

            try:
                result = ctx.step("charge", run)
            except AgentkitError as exc:
                _append(marker, f"step-{type(exc).__name__}")
                raise
            _append(marker, "step-committed")
            return json.dumps(result)

        def reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "user":
                return ToolCall("charge", {"amount": 7})
            return "answer: " + last.content[0].output.as_text()

        store = open_store(spec)
        try:
            with Session.open(sid, store=store, model=FunctionModel(reply), tools=[charge]) as s:
                try:
                    say(text=s.ask("charge 7").text)
                except AgentkitError as exc:
                    say(error=type(exc).__name__, message=str(exc))
        finally:
            getattr(store, "close", lambda: None)()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
