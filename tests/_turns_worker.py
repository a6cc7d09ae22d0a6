"""A worker app for the test of a worker that cannot reach PostgreSQL
(tests/test_celery_turns.py): examples/_chat.py's agent on the example's settings
(``$CHAT_DATABASE_URL``, ``$CHAT_REDIS_URL``), with short store timeouts, giving up on an
unreachable store after 4 s."""

from __future__ import annotations

import os

import _chat
from celery import Celery

from agentkit.celery import AgentTasks
from agentkit.stores.postgres import PostgresEventStore, PostgresJobStore

celery = Celery("turns_worker", broker=os.environ["CHAT_REDIS_URL"])
_url = os.environ["CHAT_DATABASE_URL"]
store = PostgresEventStore(_url, connect_timeout=1, timeout=2)
store.migrate()
tasks = AgentTasks(celery, store=store, job_store=PostgresJobStore(_url, connect_timeout=1, timeout=2),
                   sessions=_chat.session_settings, store_retry_for=4.0)
