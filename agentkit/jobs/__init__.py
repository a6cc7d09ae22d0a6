"""Background jobs in one place: the :class:`JobControl` port an execution context
offers, a job's :class:`JobState` and :class:`JobEvent`\\ s, the :class:`JobStore` port and
its memory and file stores (PostgreSQL: ``agentkit.stores.postgres.PostgresJobStore``),
the local :class:`JobRunner` and :class:`RunningJobs` (one status message per inference).
The bridge from a context's job events to a Session's runtime events is private.
"""

from __future__ import annotations

from ._base import JobControl, JobEvent, JobListener, JobState, JobStatus, JobStore, StoredJob
from ._runner import JobRunner
from ._status import RunningJobs
from ._stores import FileJobStore, InMemoryJobStore

__all__ = [
    "FileJobStore",
    "InMemoryJobStore",
    "JobControl",
    "JobEvent",
    "JobListener",
    "JobRunner",
    "JobState",
    "JobStatus",
    "JobStore",
    "RunningJobs",
    "StoredJob",
]
