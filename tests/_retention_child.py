"""A child process for the retention crash tests: runs turns of a durable session with
retention and SIGKILLs itself inside the store call named on the command line.

``python tests/_retention_child.py <root> <session_id> <archive|compact>``
"""

from __future__ import annotations

import os
import signal
import sys

import _child  # noqa: F401 - puts the checkout first on sys.path

from agentkit import FileEventStore, FunctionModel, Retention, Session


class DyingStore(FileEventStore):
    """A real file store whose process is killed inside one step of the retention."""

    def __init__(self, root: str, die_in: str) -> None:
        super().__init__(root)
        self.die_in = die_in

    def archive(self, session_id, archive_id, events):  # type: ignore[no-untyped-def]
        if self.die_in == "archive":
            os.kill(os.getpid(), signal.SIGKILL)
        super().archive(session_id, archive_id, events)

    def compact(self, session_id, archive_id, **kw):  # type: ignore[no-untyped-def]
        if self.die_in == "compact":  # the archive is written: die before the prune
            os.kill(os.getpid(), signal.SIGKILL)
        return super().compact(session_id, archive_id, **kw)


def summary(messages, *, reason, cancel):  # type: ignore[no-untyped-def]
    return f"summary of {len(messages)} messages ({reason})"


def main() -> None:
    root, session_id, die_in = sys.argv[1:4]
    store = DyingStore(root, die_in)
    model = FunctionModel(lambda r: f"answer to {len(r.messages)} messages")
    with Session.open(session_id, store=store, model=model, compactor=summary,
                      retention=Retention(max_events=12, keep_last=4)) as s:
        for i in range(100):
            s.push_user_message(f"turn {i}")
            s.generate()
            print(f"turn {i} {s.events[-1].seq}", flush=True)
    print("not killed", flush=True)


if __name__ == "__main__":
    main()
