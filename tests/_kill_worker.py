"""The worker process of the kill loop (tests/test_kill_loop.py): it holds one
conversation and takes turns in it until it is SIGKILLed.

Every other turn asks for a refund, a tool that needs approval; the worker approves what
is pending and generates again. Each acknowledged event (a listener hears it only once
it is durable) is reported as ``E <event id>`` on the pipe; the refund tool appends
``<tool call id> <idempotency key>`` to the marker file (its side effect), reports
``T <tool call id>``, and with ``hold`` waits there to be killed.
"""

from __future__ import annotations

import os
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _tools import outputs

from agentkit import ApprovalPolicy, FileEventStore, FunctionModel, Retention, Session, ToolCall, ToolContext, tool
from agentkit.models import ModelRequest
from agentkit.stores import EventStore


def open_store(spec: dict[str, Any]) -> EventStore:
    """The store ``spec`` names: ``{"kind": "file", "root": ...}`` or ``{"kind":
    "postgres", "conninfo": ..., "schema": ...}`` (each process connects on its own)."""
    if spec["kind"] == "file":
        return FileEventStore(spec["root"])
    from agentkit.stores.postgres import PostgresEventStore

    return PostgresEventStore(spec["conninfo"], schema=spec["schema"], connect_timeout=10)


def session_options(spec: dict[str, Any]) -> dict[str, Any]:
    """``retention=Retention(max_events=spec["retention"])`` (with a compactor) when the
    spec asks for it."""
    if not spec.get("retention"):
        return {}
    return {"retention": Retention(max_events=spec["retention"], keep_last=4), "compactor": summary}


def summary(messages: list[Any], *, reason: str, cancel: Any) -> str:
    """A compactor that needs no model."""
    return f"{len(messages)} earlier messages"


def reply(request: ModelRequest) -> Any:
    """Refund when asked to (a call id of its own: the test models number calls per
    process, and several processes share this conversation), else answer."""
    last = request.messages[-1]
    if last.role == "user" and "refund" in last.text:
        return ToolCall(name="refund", input={"order": last.text.split()[-1]}, id=f"call-{uuid.uuid4().hex}")
    if last.role == "tool":
        return "the refund tool said: " + outputs(last)
    return "ok"


def refund_tool(marker: Path, say: Any = None, *, hold: bool = False) -> Any:
    """The ``refund`` tool: its side effect is a line in ``marker``."""

    @tool
    def refund(order: str, ctx: ToolContext) -> str:
        """Refund an order."""
        with marker.open("a", encoding="utf-8") as f:
            f.write(f"{ctx.tool_call_id} {ctx.idempotency_key}\n")
        if say is not None:
            say(f"T {ctx.tool_call_id}")
        if hold:
            time.sleep(600)  # killed here
        return f"refunded {order}"

    return refund


def run(spec: dict[str, Any], session_id: str, marker: str, pipe: Connection, hold: bool) -> None:
    """Take turns in ``session_id`` until killed (see the module docstring)."""

    def say(line: str) -> None:
        pipe.send_bytes(line.encode())  # one write below PIPE_BUF: a kill never tears it

    session = Session.open(session_id, store=open_store(spec), model=FunctionModel(reply),
                           tools=[refund_tool(Path(marker), say, hold=hold)],
                           approval=ApprovalPolicy(mode="ask-writes"), **session_options(spec))
    session.subscribe(lambda event: say(f"E {event.id}"))
    turn = 0
    while True:
        turn += 1
        prompt = f"refund order {os.getpid()}-{turn}" if turn % 2 else f"hello {turn}"
        result = session.ask(prompt)
        while result.finish_reason == "approval-required":
            for request in session.pending_approvals():
                session.approve(request.id, note="kill-loop worker")
            result = session.generate()
