"""What the three web examples share: the conversation store and pool, the demo agent,
and the JSON they answer with. Each framework file is only its routes.

The agent runs on a real provider when one is configured (see ``_pick_model``), else on
an offline demo model: it answers ``You said: <message>``; a message starting with
``note:`` makes it call ``save_note``, a tool that needs a person's approval first, and
``slow:<seconds>`` makes it call ``look_up``, a slow tool that stops when cancelled.

The store is a directory (``$CHAT_STORE_DIR``, default ``./chat-store``) shared by the
worker processes of one host, or, with ``$CHAT_DATABASE_URL`` set (a libpq URL or
connection string), PostgreSQL, shared by every host (schema ``$CHAT_DB_SCHEMA``,
default ``agentkit``; the tables are created on start). ``$CHAT_NOTES_FILE``, when set,
is where ``save_note`` appends one JSON line per run (the tests count them).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from _pick_model import pick_model

from agentkit import (
    ApprovalError,
    ApprovalPolicy,
    FileEventStore,
    FunctionModel,
    Session,
    SessionPool,
    ToolCall,
    ToolContext,
    tool,
)
from agentkit.models import ModelRequest, Turn
from agentkit.stores import EventStore

# every tool runs without asking, except save_note: it waits for a person's answer
APPROVAL = ApprovalPolicy(mode="autopilot", rules={"save_note": "ask"})

CLIENT_ERRORS: tuple[type[Exception], ...] = (ValueError,)
"""What a request did wrong (a bad body or conversation id): a 400."""

CONFLICT_ERRORS: tuple[type[Exception], ...] = (ApprovalError,)
"""A decision the conversation's state refuses (an unknown id, or one decided already,
here or by another worker): a 409."""

NOTES: list[str] = []


@tool
def save_note(text: str, ctx: ToolContext) -> str:
    """Save a note for later.

    Args:
        text: What to write down.
    """
    NOTES.append(text)
    if os.environ.get("CHAT_NOTES_FILE"):
        line = {"session_id": ctx.session_id, "tool_call_id": ctx.tool_call_id, "text": text, "pid": os.getpid()}
        with open(os.environ["CHAT_NOTES_FILE"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
    return f"saved: {text}"


@tool
def look_up(seconds: float, ctx: ToolContext) -> str:
    """Take a while to look something up.

    Args:
        seconds: How long it takes.
    """
    if ctx.cancel.wait(seconds):  # the generation was cancelled (the client went away)
        return "stopped"
    return f"looked it up in {seconds:g}s"


def _demo_reply(request: ModelRequest) -> Turn | str:
    last = request.messages[-1]
    if last.role == "tool":
        return "Done. " + " ".join(part.output.as_text() for part in last.content)
    said = last.text
    if said.startswith("note:"):
        return Turn(tool_calls=(ToolCall(name="save_note", input={"text": said[5:].strip()}),))
    if said.startswith("slow:"):
        return Turn(tool_calls=(ToolCall(name="look_up", input={"seconds": float(said[5:])}),))
    return f"You said: {said}"


def make_store(store_dir: str | None = None) -> EventStore:
    """PostgreSQL when ``$CHAT_DATABASE_URL`` is set, else a FileEventStore directory."""
    url = os.environ.get("CHAT_DATABASE_URL")
    if url and store_dir is None:
        from agentkit.stores.postgres import PostgresEventStore

        store = PostgresEventStore(url, schema=os.environ.get("CHAT_DB_SCHEMA", "agentkit"))
        store.migrate()  # safe to repeat, from every process
        return store
    return FileEventStore(store_dir or os.environ.get("CHAT_STORE_DIR", "chat-store"))


def session_settings(session_id: str | None = None) -> dict[str, Any]:
    """The Session keyword arguments of every conversation (a pool factory's answer)."""
    model, _label = pick_model(FunctionModel(_demo_reply))
    return {"model": model, "tools": [save_note, look_up], "system": "You are a helpful assistant.",
            "approval": APPROVAL}


def make_pool(store_dir: str | None = None) -> SessionPool:
    """One SessionPool over the store: every request of a conversation shares one Session
    in this process; other processes (and hosts, on PostgreSQL) take turns with it."""
    store = make_store(store_dir)
    return SessionPool(store, max_open=1000, idle_timeout=600, **session_settings())


def command_line(doc: str | None) -> argparse.Namespace:
    """``--port`` and ``--store`` of an example server's command line."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default=None, help="store directory (default: $CHAT_STORE_DIR or ./chat-store)")
    return parser.parse_args()


def heartbeat() -> float:
    """Seconds between SSE keep-alive comments (``CHAT_SSE_HEARTBEAT``, default 15)."""
    return float(os.environ.get("CHAT_SSE_HEARTBEAT", "15"))


def answer(result: Any) -> dict[str, Any]:
    """A generation's result as the JSON a POST returns."""
    return {"answer": result.text, "finish_reason": result.finish_reason}


def history(session: Session) -> dict[str, Any]:
    """The conversation as ``[{"role", "text"}]``, in commit order."""
    return {"messages": [{"role": m.role, "text": m.text} for m in session.model_messages()
                         if m.role in ("user", "assistant") and m.text]}


def pending(session: Session) -> dict[str, Any]:
    """The tool calls waiting for approval."""
    return {"pending": [p.to_dict() for p in session.pending_approvals()]}


def approve(session: Session, approval_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Approve a pending call, then let the agent continue; returns its answer."""
    session.approve(approval_id, remember=bool(body.get("remember", False)), note=body.get("note"))
    return answer(session.generate())


def deny(session: Session, approval_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Deny a pending call (the model reads the reason), then let the agent continue."""
    session.deny(approval_id, reason=str(body.get("reason") or "denied by the reviewer"))
    return answer(session.generate())


def message_of(body: Any) -> str:
    """The ``message`` of a JSON body, or ValueError saying what to send."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), str) or not body["message"].strip():
        raise ValueError('send JSON {"message": "<text>"}')
    return str(body["message"])
