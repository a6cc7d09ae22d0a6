"""What a FileEventStore object last verified about each log, so an append reads only
the bytes other writers added since (O(new events), not O(history)).

The cache is bounded (least recently used views are dropped; dropping one only costs a
full scan of that log at its next append) and safe to use from several threads.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

MAX_VIEWS = 4096
"""How many logs' views one store object keeps."""


@dataclass(frozen=True)
class View:
    """A verified prefix of one log file: its identity, header, and where it ends."""

    dev: int
    ino: int
    header: bytes
    offset: int
    """Bytes of the file that are intact records (the header included)."""
    revision: int
    lines: int
    stamp: tuple[int, ...] = ()
    """The file's (device, inode, size, mtime, ctime) when it was verified to end here
    with no torn tail, or () when not known: ``head`` trusts the view while a ``stat``
    of the file still gives the same stamp."""


def stamp_of(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity and the last change to it, as ``View.stamp`` holds them."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ViewCache:
    """Session id -> View, least recently used dropped beyond ``max_views``."""

    def __init__(self, max_views: int = MAX_VIEWS) -> None:
        self._max = max_views
        self._views: OrderedDict[str, View] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> View | None:
        with self._lock:
            view = self._views.get(session_id)
            if view is not None:
                self._views.move_to_end(session_id)
            return view

    def put(self, session_id: str, view: View) -> None:
        with self._lock:
            self._views[session_id] = view
            self._views.move_to_end(session_id)
            while len(self._views) > self._max:
                self._views.popitem(last=False)

    def drop(self, session_id: str) -> None:
        with self._lock:
            self._views.pop(session_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._views)
