"""What the three web examples share: the conversation store and pool, the demo agent,
and the JSON they answer with. Each framework file is only its routes.

The agent runs on a real provider when one is configured (see ``_pick_model``), else on
an offline demo model: it answers ``You said: <message>``; a message starting with
``note:`` makes it call ``save_note``, a tool that needs a person's approval first, and
``slow:<seconds>`` makes it call ``look_up``, a slow tool that stops when cancelled, and
``refund: <amount> to <name>`` makes it call ``refund``, a tool that asks a person
("Refund 25 to alice?", a yes/no answer) in the middle of its work and goes on once
answered.

The store is a directory (``$CHAT_STORE_DIR``, default ``./chat-store``) shared by the
worker processes of one host, or, with ``$CHAT_DATABASE_URL`` set (a libpq URL or
connection string), PostgreSQL, shared by every host (schema ``$CHAT_DB_SCHEMA``,
default ``agentkit``; the tables are created on start). ``$CHAT_NOTES_FILE``, when set,
is where ``save_note`` appends one JSON line per run, and ``$CHAT_REFUNDS_FILE`` where
``refund`` appends one per step it runs (the tests count them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any

from _pick_model import pick_model

from agentkit import (
    ApprovalError,
    ApprovalPolicy,
    FileEventStore,
    FunctionModel,
    InputError,
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


class InputRefused(Exception):  # noqa: N818 - an HTTP answer, not a failure of the app
    """An answer or cancellation of a question the conversation refuses, with its HTTP
    status (see :func:`answer_input`)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


HANDLED_ERRORS: tuple[type[Exception], ...] = (*CLIENT_ERRORS, *CONFLICT_ERRORS, InputRefused)
"""Every error a route answers as ``{"error": "<what was wrong>"}`` with :func:`status_of`."""


def status_of(exc: Exception) -> int:
    """The HTTP status of one of :data:`HANDLED_ERRORS`."""
    if isinstance(exc, InputRefused):
        return exc.status
    return 400 if isinstance(exc, CLIENT_ERRORS) else 409


NOTES: list[str] = []


def _tally(variable: str, ctx: ToolContext, **fields: Any) -> None:
    """One JSON line about a tool's run in the file ``$<variable>`` names, if set."""
    if os.environ.get(variable):
        line = {"session_id": ctx.session_id, "tool_call_id": ctx.tool_call_id, **fields, "pid": os.getpid()}
        with open(os.environ[variable], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


@tool
def save_note(text: str, ctx: ToolContext) -> str:
    """Save a note for later.

    Args:
        text: What to write down.
    """
    NOTES.append(text)
    _tally("CHAT_NOTES_FILE", ctx, text=text)
    return f"saved: {text}"


@tool
def refund(amount: float, to: str, ctx: ToolContext) -> str:
    """Refund money to a customer, once a person confirms it.

    Args:
        amount: How much to refund.
        to: Who gets it.
    """

    def quote() -> str:  # the work before the question: a journaled step
        _tally("CHAT_REFUNDS_FILE", ctx, step="quote", amount=amount, to=to)
        return f"quote {ctx.tool_call_id}: {amount:g} to {to}"

    def pay() -> str:  # the side effect, once the person said yes
        _tally("CHAT_REFUNDS_FILE", ctx, step="pay", amount=amount, to=to)
        return f"refunded {amount:g} to {to}"

    # The question ends this generation (finish_reason "input-required"). Once answered,
    # the call runs again from its start: the recorded quote comes back without running,
    # and ask_human returns the answer.
    quoted = ctx.step("quote", quote)
    if not ctx.ask_human(f"Refund {amount:g} to {to}?", schema={"type": "boolean"}, timeout=24 * 3600):
        return f"no refund: a person declined {quoted}"
    return str(ctx.step("pay", pay))


@tool
def look_up(seconds: float, ctx: ToolContext) -> str:
    """Take a while to look something up.

    Args:
        seconds: How long it takes.
    """
    if ctx.cancel.wait(seconds):  # the generation was cancelled (the client went away)
        return "stopped"
    return f"looked it up in {seconds:g}s"


_REFUND = re.compile(r"refund:\s*(\d+(?:\.\d+)?)\s+to\s+(\S.*)")


def _demo_reply(request: ModelRequest) -> Turn | str:
    last = request.messages[-1]
    if last.role == "tool":
        return "Done. " + " ".join(part.output.as_text() for part in last.content)
    said = last.text
    if said.startswith("note:"):
        return Turn(tool_calls=(ToolCall(name="save_note", input={"text": said[5:].strip()}),))
    if said.startswith("slow:"):
        return Turn(tool_calls=(ToolCall(name="look_up", input={"seconds": float(said[5:])}),))
    wanted = _REFUND.fullmatch(said.strip())
    if wanted:
        return Turn(tool_calls=(ToolCall(name="refund", input={"amount": float(wanted[1]), "to": wanted[2]}),))
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
    return {"model": model, "tools": [save_note, look_up, refund], "system": "You are a helpful assistant.",
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


def inputs(session: Session) -> dict[str, Any]:
    """The questions tools asked that wait for a person's answer."""
    return {"pending": [r.to_dict() for r in session.pending_inputs()]}


def answer_input(session: Session, request_id: str, body: Any) -> dict[str, Any]:
    """Answer a pending question with the body's ``value``, then let the agent continue
    (the tool call runs again and gets the answer); returns its answer.

    Refused (:class:`InputRefused`): 422 for an answer that breaks the question's schema
    (the question stays pending: answer again), 404 for an id this conversation never
    asked, 409 for a question answered, cancelled or expired already (here or by another
    worker: of two answers at once, one wins)."""
    if not isinstance(body, dict) or "value" not in body:
        raise ValueError('send JSON {"value": <the answer>}')
    try:
        session.answer_input(request_id, body["value"])
    except InputError as exc:
        raise _refusal(exc) from None
    return answer(session.generate())


def cancel_input(session: Session, request_id: str, body: Any) -> dict[str, Any]:
    """Close a pending question unanswered (its call gets an error result with the
    reason), then let the agent continue. Refused as :func:`answer_input` (404, 409)."""
    if body is not None and not isinstance(body, dict):
        raise ValueError('send JSON {"reason": "<why>"}, or no body')
    reason = (body or {}).get("reason") or "cancelled by the reviewer"
    try:
        session.cancel_input(request_id, reason=str(reason))
    except InputError as exc:
        raise _refusal(exc) from None
    return answer(session.generate())


def _refusal(exc: InputError) -> InputRefused:
    """Why a question took no answer (``InputError.kind``), as an HTTP status: the value
    (422: the question stays pending), an id never asked (404), or a question settled
    already (409)."""
    status = {"invalid": 422, "unknown": 404}.get(exc.kind, 409)
    return InputRefused(status, str(exc))


def message_of(body: Any) -> str:
    """The ``message`` of a JSON body, or ValueError saying what to send."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), str) or not body["message"].strip():
        raise ValueError('send JSON {"message": "<text>"}')
    return str(body["message"])
