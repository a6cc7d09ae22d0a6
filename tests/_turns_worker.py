"""examples/celery_app.py's worker with quick store retries, for the test of a worker
that cannot reach PostgreSQL (tests/test_celery_turns.py)."""

from __future__ import annotations

from celery_app import celery, tasks

celery.conf.agentkit_store_retries = 2
celery.conf.agentkit_store_retry_backoff = 0.2

__all__ = ["celery", "tasks"]
