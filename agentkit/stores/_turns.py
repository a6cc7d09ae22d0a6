"""The file store's turn lock: a portalocker lock file whose content is the latest
epoch granted (private).

The lock is held through a read-only descriptor (a turn keeps no file of the store open
for writing, so nothing stops a remount), and the operating system releases it when the
holding process dies. Each grant writes the next epoch into the file; an append made
under a lease checks it (:func:`~agentkit.stores._checks.check_lease`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from ..errors import StoreLockTimeout
from ._checks import turn_timeout
from ._fsio import os_error
from ._locks import locked
from .base import TurnLease

if TYPE_CHECKING:
    from ..cancel import CancelToken

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@contextmanager
def held_turn(path: str, session_id: str, *, timeout: float | None, cancel: CancelToken | None) -> Iterator[TurnLease]:
    """Hold the turn lock file ``path`` of session ``session_id`` (created when missing)
    for the block and yield its lease; StoreUnavailableError after ``timeout`` seconds."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _O_CLOEXEC, 0o644))
    except OSError as exc:
        raise os_error(f"cannot create lock file {path}", exc) from exc
    with ExitStack() as held:
        try:
            held.enter_context(locked(path, timeout=timeout, create=False, cancel=cancel))
        except StoreLockTimeout:
            assert timeout is not None
            raise turn_timeout(session_id, timeout) from None
        epoch = (read_epoch(path) or 0) + 1
        try:
            fd = os.open(path, os.O_WRONLY | _O_CLOEXEC)
            try:
                os.pwrite(fd, b"%020d\n" % epoch, 0)
            finally:
                os.close(fd)
        except OSError as exc:
            raise os_error(f"cannot record the turn in {path}", exc, tail="Nothing was written") from exc
        lease = TurnLease(session_id, epoch)
        try:
            yield lease
        finally:
            lease._mark_lost()


def read_epoch(path: str) -> int | None:
    """The latest epoch granted for the turn lock file ``path`` (None: never granted)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(f"cannot read lock file {path}", exc, tail="Nothing was written") from exc
    return int(text) if text.isdigit() else None
