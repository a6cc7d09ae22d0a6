"""Event stores behind the :class:`EventStore` port."""

from __future__ import annotations

from .base import SCHEMA_VERSION, EventStore, StoredSession, validate_session_id
from .file import FileEventStore
from .memory import InMemoryEventStore

__all__ = [
    "SCHEMA_VERSION",
    "EventStore",
    "FileEventStore",
    "InMemoryEventStore",
    "StoredSession",
    "validate_session_id",
]
