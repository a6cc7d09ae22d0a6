"""agentkit on Celery: background jobs (and agent turns) on a fleet of Celery workers
(``sync-agentkit[celery]``; Redis as broker, sessions and job records on PostgreSQL).

:class:`AgentTasks` registers agentkit's tasks on your Celery app and sets the Celery
settings they rely on; ``tasks.job_control()`` is a :class:`~agentkit.execution.JobControl`
whose jobs run on the workers. docs/distributed.md shows what runs where.
"""

from __future__ import annotations

from ..errors import BrokerUnavailableError
from ._app import AgentTasks

__all__ = ["AgentTasks", "BrokerUnavailableError"]
