"""``agentkit fork SESSION_ID --at EVENT_ID [--as NEW_ID] --store DIR``: start a new
session in the store from a stored one, up to and including one of its events
(:meth:`agentkit.Session.fork`, without opening the source as a Session), and print the new session's id."""

from __future__ import annotations

import argparse
from typing import Any

from ..session._fork import fork_stored

__all__ = ["add_fork_command"]


def cmd_fork(args: argparse.Namespace, store: Any) -> int:
    """Fork ``args.session_id`` at ``args.at`` (as ``args.new_id`` when given)."""
    print(fork_stored(store, args.session_id, args.at, args.new_id))
    return 0


def add_fork_command(sub: Any, existing_store: Any) -> None:
    """Add ``fork`` to the ``agentkit`` subcommands (``existing_store(path)`` opens --store)."""
    fork = sub.add_parser(
        "fork", help="start a new session from a stored one, up to and including one of its events",
        description="Start a new session in the store whose log is SESSION_ID's up to and including EVENT_ID "
        "(`agentkit events SESSION_ID` lists the ids); a tool call still open there gets an error result, an "
        "unfinished transactional generation is interrupted. The source is unchanged. Prints the new id.",
    )
    fork.add_argument("session_id", metavar="SESSION_ID")
    fork.add_argument("--at", required=True, metavar="EVENT_ID", help="the last event the fork keeps")
    fork.add_argument("--as", dest="new_id", metavar="NEW_ID", help="the new session's id (default: a new one)")
    fork.add_argument("--store", required=True, metavar="DIR")
    fork.set_defaults(fn=lambda a: cmd_fork(a, existing_store(a.store)))
