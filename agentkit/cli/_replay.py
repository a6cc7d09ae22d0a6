"""``agentkit replay SESSION_ID --store DIR --model SPEC``: a stored session's user turns
run again against a model (:func:`agentkit.replay`), a report table per turn (or
``--json`` for CI), progress on stderr. Exit status: 0 when every turn is the same, 1
when some differ (2 for an error, as every command)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from ..errors import ConfigurationError
from ..evals._replay import ReplayResult, ReplaySide, ReplayTurn, replay
from ..results import ToolCallRecord

__all__ = ["add_parser", "cmd_replay", "report"]

_WIDTH = 32  # characters of an answer shown in the table


def add_parser(sub: Any, model_help: str) -> argparse.ArgumentParser:
    """The ``replay`` subcommand's arguments."""
    p: argparse.ArgumentParser = sub.add_parser(
        "replay", help="replay a stored session against a model and compare each turn",
        description="Run a stored session's user turns again against --model, tool calls that match the "
        "record answered from it, and print one row per turn. Exit status: 0 when every turn is the "
        "same (answer text and tool calls), 1 when some differ, 2 on an error.",
    )
    p.add_argument("session_id")
    p.add_argument("--store", required=True, metavar="DIR", help="the FileEventStore directory holding it")
    p.add_argument("--model", help=model_help)
    p.add_argument("--tools", choices=("recorded", "live", "error"), default="recorded",
                   help="calls the record does not match: recorded (run no tool, default), live (run the "
                   "--live-tools tool), error (answer with an error)")
    p.add_argument("--live-tools", action="append", metavar="SPEC",
                   help="the real tools: 'json' or 'module:attribute' (as chat --tools); repeatable")
    p.add_argument("--system", help="system prompt of the replay")
    p.add_argument("--write-as", metavar="NEW_ID", help="write the replay to the store as session NEW_ID")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for CI)")
    return p


def cmd_replay(args: argparse.Namespace, store: Any, model: str, live_tools: list[Any]) -> int:
    """Replay ``args.session_id`` and print the report; 0 all same, 1 some differ."""
    stored = store.load(args.session_id)
    if stored is None:
        raise ConfigurationError(f"no session {args.session_id!r} in {args.store}; "
                                 f"`agentkit sessions --store DIR` lists them")
    result = replay(stored, model=model, tools=args.tools, live_tools=live_tools or None,
                    store=store if args.write_as else None, session_id=args.write_as,
                    on_progress=_Progress(sys.stderr), system=args.system)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(report(result))
    return 0 if result.same else 1


class _Progress:
    """``turn 3/10`` on ``stream``: one line rewritten (``\\r``) on a terminal, one line
    per turn otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        end = ("\n" if done == total else "") if self._tty else "\n"
        self._stream.write(f"{chr(13) if self._tty else ''}replayed turn {done}/{total}{end}")
        self._stream.flush()


def _short(text: str, width: int = _WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _calls(calls: tuple[ToolCallRecord, ...], unmatched: tuple[ToolCallRecord, ...] = ()) -> str:
    """``lookup({"q": "x"}), search*``: each call with its input; ``*`` marks a call no
    recorded result matched."""
    marked = {c.tool_call_id for c in unmatched}
    parts = [f"{c.tool_name}({_short(json.dumps(c.input, ensure_ascii=False), 24)})"
             f"{'*' if c.tool_call_id in marked else ''}" for c in calls]
    return ", ".join(parts) or "-"


def _row(turn: ReplayTurn) -> list[str]:
    sides: tuple[ReplaySide, ReplaySide] = (turn.original, turn.replayed)
    tools = _calls(sides[0].tool_calls)
    replayed_tools = _calls(sides[1].tool_calls, turn.unmatched)
    shown = tools if tools == replayed_tools else f"{tools} -> {replayed_tools}"
    return [str(turn.index + 1), "yes" if turn.same else "NO", _short(sides[0].text), _short(sides[1].text), shown]


def report(result: ReplayResult) -> str:
    """The report table: turn, same?, original and replayed answers (cut), tool calls
    (original -> replayed when they differ; ``*``: no recorded result matched), and a
    summary line."""
    rows = [["turn", "same", "original", "replayed", "tool calls"]] + [_row(t) for t in result.turns]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[4] for r in rows]
    differing = [str(t.index + 1) for t in result.differing]
    total = len(result.turns)
    summary = (f"{total - len(differing)} of {total} turns the same"
               + (f"; differ: turn {', '.join(differing)}" if differing else ""))
    if result.session_id is not None:
        summary += f"; replay written as session {result.session_id!r}"
    return "\n".join([*lines, summary])
