"""0.1.0 import path: ``agentkit.jobs.JobRunner``.

The job runner belongs to the execution context that owns it (``agentkit.execution``);
the Session's side of background jobs is private. Prefer ``context.jobs``.
"""

from __future__ import annotations

from .execution._jobs import JobRunner

__all__ = ["JobRunner"]
