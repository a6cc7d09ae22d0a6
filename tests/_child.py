"""What the child processes of the multi-process tests share (``tests/_*_child.py``, run
as ``python tests/_x_child.py ...``): saying things to the parent (JSON or words), opening
the store a spec names, pushing ticks through a pooled session.

Importing it puts the checkout first on ``sys.path``, so a child imports this
``agentkit`` rather than an installed one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentkit import AgentkitError, FileEventStore, SessionPool  # noqa: E402


def say(**data: object) -> None:
    """One JSON line on stdout for the parent (flushed)."""
    print(json.dumps(data), flush=True)


def open_store(spec: str, **postgres: Any) -> Any:
    """The store ``spec`` names: ``file:<directory>`` or ``pg:<schema>:<conninfo>``
    (``postgres``: more options for the PostgresEventStore)."""
    kind, _, rest = spec.partition(":")
    if kind == "file":
        return FileEventStore(rest)
    from agentkit.stores.postgres import PostgresEventStore

    schema, _, conninfo = rest.partition(":")
    return PostgresEventStore(conninfo, schema=schema, **postgres)


def push_ticks(store: Any, sid: str, tag: str, n: int) -> None:
    """Push ``n`` runtime events (``tick``, ``{"tag", "i"}``) through a pooled session;
    say which failed and with what."""
    failures: list[str] = []
    with SessionPool(store, idle_timeout=None) as pool:
        for i in range(n):
            try:
                pool.get(sid).push_runtime_event("tick", {"tag": tag, "i": i})
            except AgentkitError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
    say(failures=failures)


def tell(*words: object) -> None:
    """One line of words on stdout for the parent (flushed)."""
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()
