"""The ``agentkit`` command: run a prompt, chat in a REPL, inspect stores.

    agentkit run "What is 2+2?" --model openai:gpt-4.1-mini
    agentkit chat --model echo                                  # offline demo, no key
    agentkit chat --session support-42 --store ./sessions --model anthropic:claude-sonnet-4-5
    agentkit sessions --store ./sessions
    agentkit events support-42 --store ./sessions      # JSON lines, one event each
    agentkit inputs support-42 --store ./sessions      # questions tools asked, JSON lines
    agentkit answer support-42 REQUEST_ID true --store ./sessions
    agentkit serve-mcp myapp:agent [--http 8765]           # an Agent as an MCP server
    agentkit replay support-42 --store ./sessions --model openai:gpt-4.1-mini --json
    agentkit eval --store ./sessions --model openai:gpt-4.1-mini [--json]  # pydantic-evals report
    agentkit fork support-42 --at EVENT_ID --as support-42-b --store ./sessions

``chat`` is an interactive REPL (:mod:`agentkit.cli._repl`); docs/cli.md describes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import AgentkitError, ConfigurationError
from ..models.registry import _SPEC_FORMS
from . import _eval, _inputs, _replay
from ._fork import add_fork_command

__all__ = ["main"]

_MODEL_HELP = "model spec (default: $AGENTKIT_MODEL); the forms: " + "; ".join(
    f"{form}: {what}" for form, what in _SPEC_FORMS
)
_NO_MODEL = (
    "agentkit: no model: pass --model SPEC or set AGENTKIT_MODEL (e.g. openai:gpt-4.1-mini, "
    "or --model echo for the offline demo model)"
)


def _model_spec(args: argparse.Namespace) -> str:
    spec = args.model or os.environ.get("AGENTKIT_MODEL")
    if not spec:
        raise SystemExit(_NO_MODEL)
    return str(spec)


def _store(path: str) -> Any:
    from ..stores.file import FileEventStore

    return FileEventStore(path)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _load_tools(specs: Sequence[str]) -> list[Any]:
    """The tools named by ``--tools`` options: ``json`` (the built-in JSON tools) or
    ``module:attribute`` (a tool, a list of tools, or a function returning them)."""
    import inspect

    from ..tools.base import Tool

    tools: list[Any] = []
    for spec in specs:
        if spec == "json":
            from ..tools.json_tools import json_tools

            tools.extend(json_tools())
            continue
        obj = _import_object(spec, "--tools", "write 'json' or 'module:attribute' (e.g. mytools:TOOLS)")
        if inspect.isfunction(obj) and not isinstance(obj, Tool):  # a factory: tools = make_tools()
            obj = obj()
        tools.extend(obj if isinstance(obj, (list, tuple)) else [obj])
    return tools


def _import_object(spec: str, flag: str, form: str) -> Any:
    """The object ``module:attribute`` names (the current directory importable, as
    ``python -m`` makes it); a ConfigurationError naming ``flag`` otherwise."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{flag} {spec!r}: {form}")
    if os.getcwd() not in sys.path:  # as `python -m` does: modules next to the user
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{flag} {spec!r}: cannot load it: {exc}") from None


def _cmd_serve_mcp(args: argparse.Namespace) -> int:
    from ..agent import Agent

    agent = _import_object(args.agent, "serve-mcp", "write 'module:attribute' naming an Agent (e.g. myapp:agent)")
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"serve-mcp {args.agent!r}: that is a {type(agent).__name__}, not an agentkit Agent")
    server = agent.as_mcp_server(args.name)
    if args.http is None:
        server.run()
    else:
        print(f"agentkit: serving {args.agent} over MCP Streamable HTTP on http://127.0.0.1:{args.http}/mcp",
              file=sys.stderr, flush=True)
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ..agent import run_agent

    result = run_agent(_model_spec(args), args.prompt, system=args.system, on_token=_write)
    _write("\n")
    return 0 if result.finish_reason != "error" else 1


def _cmd_chat(args: argparse.Namespace) -> int:
    from ._repl import run_chat

    session_id = args.session or args.session_id
    if session_id and not args.store:
        raise ConfigurationError(
            f"--session {session_id!r} needs --store DIR: a session is resumed from a store"
        )
    return run_chat(
        spec=_model_spec(args),
        session_id=session_id,
        store=_store(args.store) if args.store else None,
        store_dir=args.store,
        system=args.system,
        tools=_load_tools(args.tools or ()),
        approval=args.approval,
    )


def _existing_store(path: str) -> Any:
    """The store at ``path`` for reading; SystemExit naming the path when there is no
    directory there (reading never creates one)."""
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "does not exist"
        raise SystemExit(
            f"agentkit: no store at {path}: it {what}. Pass the --store DIR a chat or a "
            f"FileEventStore saved its sessions in."
        )
    return _store(path)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cmd_sessions(args: argparse.Namespace) -> int:
    """One line per session: its id, last activity (ISO time, UTC), the events of its
    active log and its pending approvals."""
    from datetime import datetime, timezone

    from ..approvals._policy import ApprovalState

    store = _existing_store(args.store)
    ids = store.list_sessions()
    width = max((len(i) for i in ids), default=0)
    failed = 0
    for session_id in ids:
        try:
            stored = store.load(session_id)
        except AgentkitError as exc:  # one unreadable session does not hide the others
            print(f"agentkit: session {session_id!r}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if stored is None:
            continue  # deleted since it was listed
        approvals = ApprovalState()
        approvals.catch_up(stored.events)
        last = max((e.timestamp for e in stored.events), default=None)
        when = "-" if last is None else datetime.fromtimestamp(last, timezone.utc).isoformat(timespec="seconds")
        print(f"{session_id:<{width}}  {when}  {_plural(len(stored.events), 'event')}  "
              f"{_plural(len(approvals.pending()), 'pending approval')}")
    return 1 if failed else 0


def _cmd_events(args: argparse.Namespace) -> int:
    stored = _existing_store(args.store).load(args.session_id)
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
    run.add_argument("--model", help=_MODEL_HELP)
    run.add_argument("--system", help="system prompt")
    run.set_defaults(fn=_cmd_run)
    chat = sub.add_parser(
        "chat",
        help="chat in a REPL (type /help in it)",
        description="Chat with a model in a REPL: answers stream as they are written, /help lists "
        "the slash commands, Ctrl-C stops the answer being written (Ctrl-C twice at the prompt, "
        "/exit or Ctrl-D quits). Try it offline with --model echo.",
    )
    chat.add_argument("session_id", nargs="?", help=argparse.SUPPRESS)  # 0.1 form: chat ID --store DIR
    chat.add_argument("--session", metavar="ID", help="session id: resumes it when --store holds it")
    chat.add_argument("--store", metavar="DIR", help="FileEventStore directory: the chat is saved there")
    chat.add_argument("--model", help=_MODEL_HELP)
    chat.add_argument("--system", help="system prompt")
    chat.add_argument(
        "--tools", action="append", metavar="SPEC",
        help="tools the model may call: 'json' (built-in JSON tools) or 'module:attribute' "
        "(a tool, a list of tools, or a function returning them); repeatable",
    )
    chat.add_argument(
        "--approval", metavar="MODE",
        help="when to ask before a tool runs: autopilot, ask-writes (default), ask-all, read-only",
    )
    chat.set_defaults(fn=_cmd_chat)
    sessions = sub.add_parser(
        "sessions", help="list the sessions in a store: id, last activity, events, pending approvals"
    )
    sessions.add_argument("--store", required=True)
    sessions.set_defaults(fn=_cmd_sessions)
    events = sub.add_parser("events", help="print a session's events as JSON lines")
    events.add_argument("session_id")
    events.add_argument("--store", required=True)
    events.set_defaults(fn=_cmd_events)
    serve = sub.add_parser("serve-mcp", help="serve an Agent as an MCP server (stdio, or Streamable HTTP with --http)")
    serve.add_argument("agent", metavar="MODULE:ATTR", help="the Agent to serve, e.g. myapp:agent")
    serve.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    serve.add_argument("--name", help="the server's name (default: agentkit-agent); the tool is named after it")
    serve.set_defaults(fn=_cmd_serve_mcp)
    inputs = sub.add_parser("inputs", help="list the questions a session's tools asked a person (JSON lines)")
    inputs.add_argument("session_id")
    inputs.add_argument("--store", required=True)
    inputs.set_defaults(fn=lambda a: _inputs.cmd_inputs(a, _existing_store(a.store)))
    answer = sub.add_parser("answer", help="answer (or --cancel) a question a session's tool asked")
    answer.add_argument("session_id")
    answer.add_argument("request_id")
    answer.add_argument("value", nargs="?", help="the answer as JSON: true, 42, '\"text\"', '{\"a\": 1}'")
    answer.add_argument("--cancel", metavar="REASON", help="close the question unanswered; the model reads REASON")
    answer.add_argument("--store", required=True)
    answer.set_defaults(fn=lambda a: _inputs.cmd_answer(a, _existing_store(a.store)))
    _replay.add_parser(sub, _MODEL_HELP).set_defaults(fn=lambda a: _replay.cmd_replay(
        a, _existing_store(a.store), _model_spec(a), _load_tools(a.live_tools or ())))
    _eval.add_parser(sub, _MODEL_HELP).set_defaults(
        fn=lambda a: _eval.cmd_eval(a, _existing_store(a.store), _model_spec(a), _load_tools(a.tools or ())))
    add_fork_command(sub, _existing_store)
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
