"""The Celery app the Celery job tests' workers load (``celery -A _celery_app worker``).

Its settings come from the environment (tests/_celery.py's ``Rig.env``): the broker, the
PostgreSQL server and schema, and the timing the tests shorten. The stores are opened at
import, as a user's app module does, so prefork children inherit them from the parent.
"""

from __future__ import annotations

import ast
import os
from typing import Any

from celery import Celery

from agentkit.celery import AgentTasks
from agentkit.stores.postgres import PostgresEventStore, PostgresJobStore


def make(broker: str, conninfo: str, schema: str, *, visibility_timeout: float = 300.0, heartbeat: float = 2.0,
         store_retry_for: float = 60.0, timeout: float = 30.0, migrate: bool = True,
         ) -> tuple[Celery, AgentTasks, Any, Any]:
    """(app, tasks, store, job_store) over ``broker`` and the PostgreSQL ``schema``
    (created unless ``migrate=False``: a worker started while PostgreSQL is down)."""
    app = Celery("agentkit_tests", broker=broker, backend=broker)
    app.conf.broker_transport_options = {"visibility_timeout": visibility_timeout}
    app.conf.broker_connection_retry_on_startup = True
    store = PostgresEventStore(conninfo, schema=schema, connect_timeout=5, timeout=timeout)
    job_store = PostgresJobStore(conninfo, schema=schema, name="celery", connect_timeout=5, timeout=timeout)
    if migrate:
        store.migrate()
    tasks = AgentTasks(app, store=store, job_store=job_store, sessions=lambda session_id: {},
                       heartbeat=heartbeat, store_retry_for=store_retry_for)
    return app, tasks, store, job_store


if "AGENTKIT_CELERY_BROKER" in os.environ:
    app, tasks, store, job_store = make(
        os.environ["AGENTKIT_CELERY_BROKER"], os.environ["AGENTKIT_CELERY_PG"], os.environ["AGENTKIT_CELERY_SCHEMA"],
        **ast.literal_eval(os.environ.get("AGENTKIT_CELERY_SETTINGS", "{}")),
    )
