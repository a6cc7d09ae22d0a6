"""Old home of the job stores (kept for imports): they now live in :mod:`agentkit.stores`
(the port in :mod:`agentkit.stores.base`, the stores in :mod:`agentkit.stores.jobs`)."""

from __future__ import annotations

from .stores.base import JobStore, StoredJob
from .stores.jobs import FileJobStore, InMemoryJobStore

__all__ = ["FileJobStore", "InMemoryJobStore", "JobStore", "StoredJob"]
