"""Human input at the command line: ``agentkit inputs`` lists the questions tools of a
stored session asked (``ctx.ask_human``), ``agentkit answer`` answers or cancels one. The
answer is a decision on the session's log like one a web request makes (one of two
answers to the same request wins); the next ``generate()`` of the session, in whatever
process runs it, resumes the call."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ConfigurationError

__all__ = ["cmd_answer", "cmd_inputs"]


def _session(store: Any, session_id: str) -> Any:
    from ..session._session import Session

    if store.load(session_id) is None:
        raise ConfigurationError(f"no session {session_id!r} in this store; `agentkit sessions --store DIR` lists them")
    return Session.open(session_id, store=store)


def cmd_inputs(args: argparse.Namespace, store: Any) -> int:
    """One JSON line per pending question: id, question, schema, tool call, deadline."""
    with _session(store, args.session_id) as session:
        for request in session.pending_inputs():
            print(json.dumps({"id": request.id, "question": request.question, "schema": request.schema,
                              "tool_name": request.tool_name, "tool_call_id": request.tool_call_id,
                              "expires_at": request.expires_at}, ensure_ascii=False))
    return 0


def cmd_answer(args: argparse.Namespace, store: Any) -> int:
    """Answer (``VALUE`` is JSON: ``true``, ``42``, ``'"text"'``) or ``--cancel REASON``."""
    if (args.value is None) == (args.cancel is None):
        raise ConfigurationError("give the answer as VALUE (JSON) or --cancel REASON, not both or neither")
    with _session(store, args.session_id) as session:
        if args.cancel is not None:
            session.cancel_input(args.request_id, reason=args.cancel)
            print(f"cancelled {args.request_id}; the next generate() of {args.session_id!r} goes on without it")
            return 0
        try:
            value = json.loads(args.value)
        except json.JSONDecodeError as exc:
            print(f"agentkit: VALUE must be JSON (a string needs quotes: '\"yes\"'): {exc}", file=sys.stderr)
            return 2
        session.answer_input(args.request_id, value)
    print(f"answered {args.request_id}; the next generate() of {args.session_id!r} resumes the call")
    return 0
