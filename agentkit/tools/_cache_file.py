"""The tool cache in a directory (private): one file per entry, ``<key>.json``, written
to a temporary file, fsynced (unless ``fsync=False``) and renamed over the old one, so a
reader in any process sees a whole entry or none. A file that is not a whole entry (torn, edited, foreign) is
a miss; one past its writer's ``ttl`` is a miss and is removed."""

from __future__ import annotations

import os
import time
from typing import Any

from .._json import dumps, loads
from ..errors import ConfigurationError
from ..stores._fsio import atomic_write, make_dirs

__all__ = ["FileCache"]

_FORMAT = "agentkit-tool-cache"
_SUFFIX = ".json"


class FileCache:
    """Entries as files in directory ``root`` (made at the first write)."""

    def __init__(self, root: str, *, fsync: bool) -> None:
        self.root = os.path.abspath(root)
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise ConfigurationError(f"ToolCache: {self.root} exists and is not a directory; give a directory path")
        self.where = self.root
        self._made = False
        self._sync = fsync

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key + _SUFFIX)

    def get(self, key: str) -> tuple[dict[str, Any], float, float] | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data, inode = f.read(), os.fstat(f.fileno()).st_ino
        except (FileNotFoundError, NotADirectoryError):
            return None
        found = _parse(data, key)
        if found is None:
            return None
        output, stored_at, expires_at = found
        now = time.time()
        if now >= expires_at:
            _remove(path, inode)
            return None
        return (output, stored_at, now)

    def put(self, key: str, tool_name: str, output: str, ttl: float) -> None:
        now = time.time()
        head = dumps({"format": _FORMAT, "version": 1, "key": key, "tool_name": tool_name,
                      "stored_at": now, "expires_at": now + ttl})
        data = (head[:-1] + ',"output":' + output + "}").encode()
        if not self._made:
            make_dirs(self.root, sync=self._sync)
            self._made = True
        try:
            atomic_write(self._path(key), data, sync=self._sync)
        except FileNotFoundError:  # the directory was removed since: make it again
            make_dirs(self.root, sync=self._sync)
            atomic_write(self._path(key), data, sync=self._sync)

    def prune(self) -> int:
        return self._sweep(expired_only=True)

    def clear(self) -> int:
        return self._sweep(expired_only=False)

    def _sweep(self, *, expired_only: bool) -> int:
        try:
            names = [n for n in os.listdir(self.root) if n.endswith(_SUFFIX) and not n.startswith(".")]
        except FileNotFoundError:
            return 0
        removed = 0
        now = time.time()
        for name in names:
            path = os.path.join(self.root, name)
            try:
                with open(path, "rb") as f:
                    data, inode = f.read(), os.fstat(f.fileno()).st_ino
            except FileNotFoundError:
                continue
            found = _parse(data, name[: -len(_SUFFIX)])
            if not expired_only or found is None or now >= found[2]:
                removed += _remove(path, inode)
        return removed

    def close(self) -> None:
        """Nothing to release: each read and write opens and closes its own entry file."""


def _parse(data: bytes, key: str) -> tuple[dict[str, Any], float, float] | None:
    """(output, stored_at, expires_at) of an entry file, or None when it is not a whole
    entry of ``key``."""
    try:
        doc = loads(data.decode())
        if doc["format"] != _FORMAT or doc["key"] != key or not isinstance(doc["output"], dict):
            return None
        return doc["output"], float(doc["stored_at"]), float(doc["expires_at"])
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        return None


def _remove(path: str, inode: int) -> int:
    """Remove ``path`` if it is still the file read (inode ``inode``), not a newer entry
    another process renamed into its place since; 1 when removed."""
    try:
        if os.stat(path).st_ino != inode:
            return 0
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return 1
