"""PostgreSQL stores opened before a fork (a Celery prefork worker, gunicorn --preload):
a forked child gets connections of its own, and the parent's keep working."""

from __future__ import annotations

import multiprocessing
import warnings

import pytest

from agentkit.events import UserMessageEvent
from agentkit.messages import TextPart

pytestmark = pytest.mark.skipif(not hasattr(multiprocessing, "get_context"), reason="needs fork()")


def _said(text):
    return UserMessageEvent(content=(TextPart(text=text),))


def _child(store, job_store, parent_pids, answer):
    try:
        with store._pg.connection() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        stored = store.load("forked")
        revision = store.append("forked", [_said("from the child")],
                                expected_revision=stored.revision)
        job_store.delete("nothing")
        answer.send(("ok", pid not in parent_pids, revision))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        answer.send(("error", repr(exc), None))


def test_a_forked_child_uses_connections_of_its_own_and_the_parents_keep_working(pg_store, pg_cluster):
    import psycopg

    from agentkit.stores.postgres import PostgresJobStore

    job_store = PostgresJobStore(pg_cluster.conninfo, schema=pg_store.schema)
    pg_store.append("forked", [_said("from the parent")], expected_revision=0)
    job_store.load()
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:  # every connection there is now
        parent_pids = {row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")}
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
        child = ctx.Process(target=_child, args=(pg_store, job_store, parent_pids, send))
        child.start()
    assert receive.poll(60), "the forked child did not answer"
    status, own, revision = receive.recv()
    child.join(30)
    assert status == "ok", own
    assert own, "the child used a connection of its parent's pool"
    assert revision == 2
    # the parent's pooled connections were not closed by the child, and still work
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
        alive = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                              [list(parent_pids)]).fetchone()[0]
    assert alive == len(parent_pids)
    job_store.load()
    assert [e.content[0].text for e in pg_store.load("forked").events] == ["from the parent", "from the child"]
    job_store.close()
