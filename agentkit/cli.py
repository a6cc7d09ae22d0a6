"""The ``agentkit`` command: run a prompt, chat in a durable session, inspect stores.

    agentkit run "What is 2+2?" --model openai:gpt-4.1-mini
    agentkit chat support-42 --store ./sessions --model anthropic:claude-sonnet-4-5
    agentkit sessions --store ./sessions
    agentkit events support-42 --store ./sessions      # JSON lines, one event each
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .errors import AgentkitError

__all__ = ["main"]


def _model_spec(args: argparse.Namespace) -> str:
    spec = args.model or os.environ.get("AGENTKIT_MODEL")
    if not spec:
        raise SystemExit("agentkit: no model: pass --model SPEC or set AGENTKIT_MODEL (e.g. openai:gpt-4.1-mini)")
    return str(spec)


def _store(path: str):  # type: ignore[no-untyped-def]
    from .stores.file import FileEventStore

    return FileEventStore(path)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _cmd_run(args: argparse.Namespace) -> int:
    from .agent import run_agent

    result = run_agent(_model_spec(args), args.prompt, system=args.system, on_token=_write)
    _write("\n")
    return 0 if result.finish_reason != "error" else 1


def _cmd_chat(args: argparse.Namespace) -> int:
    from .session import Session

    with Session.open(args.session_id, store=_store(args.store), model=_model_spec(args), system=args.system) as s:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            s.push_user_message(line)
            s.generate(on_token=_write)
            _write("\n")
    return 0


def _cmd_sessions(args: argparse.Namespace) -> int:
    for session_id in _store(args.store).list_sessions():
        print(session_id)
    return 0


def _cmd_events(args: argparse.Namespace) -> int:
    stored = _store(args.store).load(args.session_id)
    if stored is None:
        print(f"agentkit: no session {args.session_id!r} in {args.store}", file=sys.stderr)
        return 1
    for event in stored.events:
        print(json.dumps(event.to_dict(), ensure_ascii=False))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentkit", description="A sync-first agent runtime.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one prompt and print the answer as it streams")
    run.add_argument("prompt")
    run.add_argument("--model", help="model spec, e.g. openai:gpt-4.1-mini (default: $AGENTKIT_MODEL)")
    run.add_argument("--system", help="system prompt")
    run.set_defaults(fn=_cmd_run)
    chat = sub.add_parser("chat", help="chat in a durable session, one user message per stdin line")
    chat.add_argument("session_id")
    chat.add_argument("--store", required=True, help="FileEventStore directory")
    chat.add_argument("--model")
    chat.add_argument("--system")
    chat.set_defaults(fn=_cmd_chat)
    sessions = sub.add_parser("sessions", help="list the sessions in a store")
    sessions.add_argument("--store", required=True)
    sessions.set_defaults(fn=_cmd_sessions)
    events = sub.add_parser("events", help="print a session's events as JSON lines")
    events.add_argument("session_id")
    events.add_argument("--store", required=True)
    events.set_defaults(fn=_cmd_events)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentkit`` command."""
    args = _parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except AgentkitError as exc:
        print(f"agentkit: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what was committed stays committed; no traceback
        print("\nagentkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
