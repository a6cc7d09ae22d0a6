"""Event stores: the :class:`EventStore` port, :class:`StoredSession` and the session-id
rule. The embedded stores (``FileEventStore``, ``InMemoryEventStore``) are imported from
``agentkit``; PostgreSQL for several hosts is :mod:`agentkit.stores.postgres`, imported on
its own (it needs the ``postgres`` extra). Job stores live in :mod:`agentkit.jobs`."""

from __future__ import annotations

from .base import SCHEMA_VERSION, EventStore, StoredSession, TurnLease, validate_session_id

__all__ = ["SCHEMA_VERSION", "EventStore", "StoredSession", "TurnLease", "validate_session_id"]
