"""A child process for the PostgreSQL store tests (another "host").

``python tests/_pg_child.py writer <conninfo> <schema> <session> <name> <n>``: append n
events with compare-and-swap, reloading after each conflict; prints ``done <conflicts>``.

``python tests/_pg_child.py watcher <conninfo> <schema> <session> <after> <count>``: print
the text of each event ``store.watch`` yields, one per line, and exit after ``count``.

``python tests/_pg_child.py stale-writer <conninfo> <schema> <session>``: load, print
``loaded <revision>``, wait for a line on stdin, append; prints ``conflict <expected>
<actual>`` or ``appended``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentkit import StoreConflictError, UserMessageEvent  # noqa: E402
from agentkit.messages import TextPart  # noqa: E402
from agentkit.stores.postgres import PostgresEventStore  # noqa: E402


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
    elif mode == "watcher":
        after, count = int(rest[0]), int(rest[1])
        print("watching", flush=True)
        for seen, ev in enumerate(store.watch(session, after), start=1):
            print(ev.content[0].text, flush=True)  # type: ignore[attr-defined]
            if seen == count:
                break
    store.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
