"""A worker app for the fault tests of tests/test_celery_turns.py: examples/_chat.py's
agent on the example's settings (``$CHAT_DATABASE_URL``, ``$CHAT_DB_SCHEMA``,
``$CHAT_REDIS_URL``), with short store timeouts, giving up on an unreachable store after
4 s, and a Redis visibility timeout of 5 s (a task whose worker died is handed to
another worker 5 s later; ``$TURNS_VISIBILITY`` sets another: the store-down test keeps
its task unacknowledged for longer than 5 s while the worker waits to record the failure,
and a redelivered copy would then run the turn once the store is back)."""

from __future__ import annotations

import os

import _chat
from celery import Celery

from agentkit.celery import AgentTasks
from agentkit.stores.postgres import PostgresEventStore, PostgresJobStore

celery = Celery("turns_worker", broker=os.environ["CHAT_REDIS_URL"])
celery.conf.broker_transport_options = {"visibility_timeout": float(os.environ.get("TURNS_VISIBILITY", "5"))}
_url, _schema = os.environ["CHAT_DATABASE_URL"], os.environ.get("CHAT_DB_SCHEMA", "agentkit")
store = PostgresEventStore(_url, schema=_schema, connect_timeout=1, timeout=2)
store.migrate()
tasks = AgentTasks(celery, store=store, job_store=PostgresJobStore(_url, schema=_schema, connect_timeout=1, timeout=2),
                   sessions=_chat.session_settings, store_retry_for=4.0)
