"""Stores: event stores behind the :class:`EventStore` port and job stores behind the
:class:`JobStore` port, side by side (memory and file for each; PostgreSQL for several
hosts in :mod:`agentkit.stores.postgres`, imported on its own: it needs the ``postgres`` extra)."""

from __future__ import annotations

from .base import SCHEMA_VERSION, EventStore, JobStore, StoredJob, StoredSession, TurnLease, validate_session_id
from .file import FileEventStore
from .jobs import FileJobStore, InMemoryJobStore
from .memory import InMemoryEventStore

__all__ = [
    "SCHEMA_VERSION",
    "EventStore",
    "FileEventStore",
    "FileJobStore",
    "InMemoryEventStore",
    "InMemoryJobStore",
    "JobStore",
    "StoredJob",
    "StoredSession",
    "TurnLease",
    "validate_session_id",
]
