"""A child process for the PostgreSQL store tests (another "host").

``python tests/_pg_child.py writer <conninfo> <schema> <session> <name> <n>``: append n
events with compare-and-swap, reloading after each conflict; prints ``done <conflicts>``.

``python tests/_pg_child.py watcher <conninfo> <schema> <session> <after> <count>``: print
the text of each event ``store.watch`` yields, one per line, and exit after ``count``
(an optional last argument is the watch's ``poll_interval``).

``python tests/_pg_child.py stale-writer <conninfo> <schema> <session>``: load, print
``loaded <revision>``, wait for a line on stdin, append; prints ``conflict <expected>
<actual>`` or ``appended``.

``python tests/_pg_child.py turns <conninfo> <schema> <session> <name> <n>``: n turns, each
under the session's turn lock: load, append ``<name>-<i>-start``, then ``<name>-<i>-end``,
both with the lease; prints ``done``.

``python tests/_pg_child.py hold <conninfo> <schema> <session>``: take the turn lock, print
``held <epoch> <lock backend pid>``, wait for a line on stdin, append ``held`` with the
lease; prints ``appended`` or ``lost``.
"""

from __future__ import annotations

import sys

import _child  # noqa: F401 - puts the checkout first on sys.path

from agentkit import StoreConflictError, TurnLockLostError
from agentkit.events import UserMessageEvent
from agentkit.messages import TextPart
from agentkit.stores.postgres import PostgresEventStore


def main(mode: str, conninfo: str, schema: str, session: str, *rest: str) -> None:
    store = PostgresEventStore(conninfo, schema=schema, pool_size=1)
    if mode == "writer":
        name, n = rest[0], int(rest[1])
        conflicts = 0
        for i in range(n):
            while True:
                current = store.load(session)
                try:
                    ev = UserMessageEvent(content=(TextPart(text=f"{name}-{i}"),))
                    store.append(session, [ev], expected_revision=current.revision if current else 0)
                    break
                except StoreConflictError:
                    conflicts += 1
        print("done", conflicts, flush=True)
    elif mode == "stale-writer":  # loads, waits for a line on stdin, then appends
        current = store.load(session)
        revision = current.revision if current else 0
        print("loaded", revision, flush=True)
        sys.stdin.readline()
        try:
            store.append(session, [UserMessageEvent(content=(TextPart(text="stale"),))], expected_revision=revision)
            print("appended", flush=True)
        except StoreConflictError as exc:
            print("conflict", exc.expected_revision, exc.actual_revision, flush=True)
    elif mode == "turns":
        name, n = rest[0], int(rest[1])
        for i in range(n):
            with store.turn_lock(session) as lease:
                current = store.load(session)
                revision = current.revision if current else 0
                revision = store.append(session, [_text(f"{name}-{i}-start")], expected_revision=revision, lease=lease)
                store.append(session, [_text(f"{name}-{i}-end")], expected_revision=revision, lease=lease)
        print("done", flush=True)
    elif mode == "hold":
        with store.turn_lock(session) as lease:
            print("held", lease.epoch, lease.pid, flush=True)  # type: ignore[attr-defined]
            sys.stdin.readline()
            current = store.load(session)
            try:
                store.append(
                    session, [_text("held")], expected_revision=current.revision if current else 0, lease=lease
                )
                print("appended", flush=True)
            except TurnLockLostError:
                print("lost", flush=True)
    elif mode == "watcher":
        after, count = int(rest[0]), int(rest[1])
        poll = float(rest[2]) if len(rest) > 2 else 0.5
        print("watching", flush=True)
        for seen, ev in enumerate(store.watch(session, after, poll_interval=poll), start=1):
            print(ev.content[0].text, flush=True)  # type: ignore[attr-defined]
            if seen == count:
                break
    store.close()


def _text(text: str) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


if __name__ == "__main__":
    main(*sys.argv[1:])
