"""Where MCP OAuth tokens live between connects: the :class:`TokenStore` port and two stores.

A token store keeps, per MCP server URL, one JSON record: the OAuth tokens, when the
access token expires, the client registered dynamically with the authorization server,
and that server's metadata (so a refresh works in a new process without rediscovery).
The record's layout is agentkit's business; a store only loads and saves it whole.

* :class:`FileTokenStore`: one JSON file, readable by its owner only (``0600``), replaced
  atomically (write temp, fsync, rename) under a ``portalocker`` lock, so processes that
  share it never see a torn file and never lose each other's servers.
* :class:`MemoryTokenStore`: a dict, for tests and for tokens that should not outlive the
  process.
* Any object with ``load(key)`` and ``save(key, record)`` (a database row, a secrets
  manager, a web app's per-user table) is a store too. Its methods are called from a
  worker thread, never on the MCP event loop.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, StoreCorruptionError
from ..stores._fsio import atomic_write, os_error
from ..stores._locks import locked

_FORMAT = 1


@runtime_checkable
class TokenStore(Protocol):
    """What :class:`~agentkit.mcp.McpOAuth` keeps tokens in. ``key`` is the MCP server's URL;
    ``record`` is a JSON-serialisable dict to be returned unchanged by the next ``load``."""

    def load(self, key: str) -> Mapping[str, Any] | None:
        """The record saved for ``key``, or None."""
        ...

    def save(self, key: str, record: Mapping[str, Any]) -> None:
        """Replace the record for ``key``."""
        ...


class MemoryTokenStore:
    """Tokens in a dict: they last as long as this object. Thread-safe."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def load(self, key: str) -> Mapping[str, Any] | None:
        """The record saved for ``key`` (a copy), or None."""
        with self._lock:
            record = self._records.get(key)
            return None if record is None else json.loads(json.dumps(record))

    def save(self, key: str, record: Mapping[str, Any]) -> None:
        """Replace the record for ``key`` (a copy is kept)."""
        copy = json.loads(json.dumps(dict(record)))
        with self._lock:
            self._records[key] = copy

    def delete(self, key: str) -> None:
        """Forget ``key`` (the next connect authorizes again)."""
        with self._lock:
            self._records.pop(key, None)


class FileTokenStore:
    """Tokens of any number of MCP servers in one JSON file only its owner can read.

    Every write takes an exclusive ``portalocker`` lock on ``<path>.lock``, reads the
    current file, changes one server's record and replaces the file atomically with mode
    ``0600``: concurrent processes and threads each keep their own servers' records, and
    a crash leaves the old file or the new one. Reads need no lock. ``~`` is expanded; the
    parent directory is created (``0700``) when missing. Treat the file like a password.
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 10.0, fsync: bool = True) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ConfigurationError(f"FileTokenStore needs a file path, not {path!r}")
        if not isinstance(lock_timeout, (int, float)) or lock_timeout <= 0:
            raise ConfigurationError(f"lock_timeout must be a positive number of seconds, not {lock_timeout!r}")
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        """The token file."""
        if os.path.isdir(self.path):
            raise ConfigurationError(f"FileTokenStore path {self.path!r} is a directory; give a file path "
                                     f"such as {os.path.join(self.path, 'mcp-tokens.json')!r}")
        self._lock_timeout = float(lock_timeout)
        self._fsync = fsync

    def load(self, key: str) -> Mapping[str, Any] | None:
        """The record saved for ``key``, or None (also when the file does not exist yet)."""
        record = self._read().get(key)
        return record if isinstance(record, dict) else None

    def save(self, key: str, record: Mapping[str, Any]) -> None:
        """Replace the record for ``key``; the other servers' records are kept."""
        data = dict(record)
        json.dumps(data)  # not serialisable: fail before taking the lock
        self._update(lambda servers: servers.__setitem__(key, data))

    def delete(self, key: str) -> None:
        """Forget ``key`` (the next connect to that server authorizes again)."""
        self._update(lambda servers: servers.pop(key, None))

    def keys(self) -> list[str]:
        """The server URLs with a saved record."""
        return sorted(self._read())

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise os_error(f"cannot read the MCP token file {self.path}", exc) from exc
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("servers"), dict):
            raise StoreCorruptionError(
                f"the MCP token file {self.path} is not a token file agentkit wrote (not a JSON object "
                f"with 'servers'); move it away (the servers will ask for authorization again)"
            )
        return dict(doc["servers"])

    def _update(self, change: Any) -> None:
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise os_error(f"cannot create the directory of the MCP token file {self.path}", exc) from exc
        with locked(self.path + ".lock", timeout=self._lock_timeout):
            servers = self._read()
            change(servers)
            body = json.dumps({"format": _FORMAT, "servers": servers}, indent=1, sort_keys=True).encode()
            try:
                atomic_write(self.path, body, sync=self._fsync, tmp_prefix=".mcp-tokens-", mode=0o600)
            except OSError as exc:
                raise os_error(f"cannot write the MCP token file {self.path}", exc,
                               tail="The previous file is unchanged") from exc

    def __repr__(self) -> str:
        return f"FileTokenStore({self.path!r})"
