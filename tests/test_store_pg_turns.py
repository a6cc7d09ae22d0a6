"""PostgresEventStore.turn_lock across real processes (tests/_pg_child.py is the other
"host"): turns strictly serial, a killed holder's lock released, a holder whose lock
connection the server dropped cannot commit (fencing), a waiter cancelled or timed out,
and a database from before turn locks upgraded by migrate()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from _procs import wait_for, within

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    StoreError,
    StoreUnavailableError,
    TurnLockLostError,
)
from agentkit.events import UserMessageEvent
from agentkit.messages import TextPart
from agentkit.stores._pg_turns import PgTurnLease
from agentkit.stores.postgres import PostgresEventStore

CHILD = str(Path(__file__).resolve().parent / "_pg_child.py")


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


def texts(events) -> list[str]:
    return [e.content[0].text for e in events]


def _child(pg_cluster, pg_store, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, args[0], pg_cluster.conninfo, pg_store.schema, *args[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _holder(pg_cluster, pg_store, session: str) -> tuple[subprocess.Popen[str], int, int]:
    """A child process holding ``session``'s turn lock: (process, epoch, lock backend pid)."""
    child = _child(pg_cluster, pg_store, "hold", session)
    assert child.stdout is not None
    word, epoch, pid = within(child.stdout.readline, 30).split()
    assert word == "held"
    return child, int(epoch), int(pid)


def test_turns_of_two_processes_are_strictly_serial(pg_cluster, pg_store):
    children = [_child(pg_cluster, pg_store, "turns", "chat", name, "15") for name in ("a", "b")]
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0 and out.strip() == "done"  # no StoreConflictError in any turn
    log = texts(pg_store.load("chat").events)
    assert len(log) == 60
    for start, end in zip(log[::2], log[1::2], strict=True):  # each turn's two appends are adjacent
        assert start.endswith("-start") and end == start[: -len("start")] + "end"


def test_turns_of_two_threads_of_one_store_are_strictly_serial(pg_store):
    inside: list[str] = []
    overlaps: list[str] = []

    def turns(name: str) -> None:
        for i in range(10):
            with pg_store.turn_lock("chat", timeout=60) as lease:
                inside.append(name)
                if len(inside) > 1:
                    overlaps.append(name)
                revision = pg_store.head("chat") or 0
                revision = pg_store.append("chat", [user(f"{name}-{i}-start")], expected_revision=revision, lease=lease)
                pg_store.append("chat", [user(f"{name}-{i}-end")], expected_revision=revision, lease=lease)
                inside.remove(name)

    threads = [threading.Thread(target=turns, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not overlaps and pg_store.head("chat") == 40


def test_each_grant_takes_the_next_epoch_and_a_stale_epoch_is_refused_by_the_server(pg_store):
    with pg_store.turn_lock("s") as first:
        pg_store.append("s", [user("a")], expected_revision=0, lease=first)
    assert not first.held
    with pytest.raises(TurnLockLostError, match=r"no longer held.*Nothing was written"):
        pg_store.append("s", [user("late")], expected_revision=1, lease=first)
    with pg_store.turn_lock("s") as second:
        assert second.epoch == first.epoch + 1
        assert second.pid == first.pid  # the idle lock connection was used again
        # a lease that still looks held locally but names the old epoch: the server refuses it
        stale = PgTurnLease("s", first.epoch, second.conn, second.owner)
        with pytest.raises(TurnLockLostError):
            pg_store.append("s", [user("stale")], expected_revision=1, lease=stale)
        pg_store.append("s", [user("b")], expected_revision=1, lease=second)
    assert texts(pg_store.load("s").events) == ["a", "b"]


def test_a_lease_of_another_session_or_store_kind_is_refused_before_anything_is_sent(pg_store):
    with pg_store.turn_lock("s") as lease:
        with pytest.raises(ConfigurationError, match=r"the lease is for session 's', not 'other'"):
            pg_store.append("other", [user("x")], expected_revision=0, lease=lease)
        with pytest.raises(ConfigurationError, match=r"lease must be the TurnLease"):
            pg_store.append("s", [user("x")], expected_revision=0, lease=object())  # type: ignore[arg-type]
    assert pg_store.head("s") is None and pg_store.head("other") is None


def test_a_killed_holder_releases_the_turn_lock_to_the_next_process(pg_cluster, pg_store):
    child, epoch, _pid = _holder(pg_cluster, pg_store, "s")
    with pytest.raises(StoreUnavailableError):  # held: not available now
        with pg_store.turn_lock("s", timeout=0.2):
            pass
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    # the server sees the holder's connection close and drops its advisory lock
    with pg_store.turn_lock("s", timeout=30) as lease:
        assert lease.epoch == epoch + 1
        pg_store.append("s", [user("next turn")], expected_revision=0, lease=lease)


def test_a_paused_holder_whose_lock_connection_was_lost_cannot_commit_and_another_takes_over(pg_cluster, pg_store):
    child, epoch, pid = _holder(pg_cluster, pg_store, "s")
    child.send_signal(signal.SIGSTOP)  # paused while its lock connection is dropped
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    with pg_store.turn_lock("s", timeout=30) as lease:  # the other process is alive, its lock gone
        assert lease.epoch == epoch + 1
        child.send_signal(signal.SIGCONT)
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("append now\n")
        child.stdin.flush()
        assert within(child.stdout.readline, 30).strip() == "lost"
        assert pg_store.head("s") is None  # nothing written
        pg_store.append("s", [user("mine")], expected_revision=0, lease=lease)
    child.wait(30)
    assert texts(pg_store.load("s").events) == ["mine"]


def test_a_lost_lock_connection_is_refused_even_when_nobody_took_the_lock_since(pg_cluster, pg_store):
    with pg_store.turn_lock("s") as lease:
        with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [lease.pid])
            wait_for(  # until the server has let go of it
                lambda: admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [lease.pid]).fetchone() is None,
                what="the lock connection's server process to end",
            )
        assert lease.held  # nothing told this process yet: the server's check decides
        with pytest.raises(TurnLockLostError):
            pg_store.append("s", [user("x")], expected_revision=0, lease=lease)
        assert not lease.held
    assert pg_store.head("s") is None


def test_a_waiting_turn_is_cancelled_promptly(pg_cluster, pg_store):
    child, _epoch, _pid = _holder(pg_cluster, pg_store, "s")
    token = CancelToken()
    entered = threading.Event()
    outcome: list[BaseException] = []

    def wait_for_turn() -> None:
        entered.set()
        try:
            with pg_store.turn_lock("s", cancel=token):
                pass
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    waiter = threading.Thread(target=wait_for_turn)
    waiter.start()
    entered.wait(10)
    token.cancel("the user left")
    waiter.join(10)  # generous: the wait ends within one 0.1 s pause of the cancel
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], CancelledError)
    child.kill()
    child.wait(30)


def test_a_waiting_turn_times_out_with_store_unavailable(pg_cluster, pg_store):
    child, _epoch, _pid = _holder(pg_cluster, pg_store, "s")
    try:
        with pytest.raises(StoreUnavailableError, match=r"stayed taken for 0.3s") as info:
            with pg_store.turn_lock("s", timeout=0.3):
                pass
        assert info.value.written is False
        with pg_store.turn_lock("another-session", timeout=0.3):  # other sessions are not held up
            pass
    finally:
        child.kill()
        child.wait(30)


def test_bad_turn_lock_arguments_are_refused(pg_store):
    with pytest.raises(ConfigurationError, match="timeout must be"):
        with pg_store.turn_lock("s", timeout=-1):
            pass
    with pytest.raises(ConfigurationError, match="cancel must be a CancelToken"):
        with pg_store.turn_lock("s", cancel=object()):  # type: ignore[arg-type]
            pass
    with pytest.raises(ConfigurationError, match="invalid session id"):
        with pg_store.turn_lock("../x"):
            pass


def test_a_database_from_before_turn_locks_says_to_migrate_and_migrate_upgrades_it(pg_cluster, pg_store):
    pg_store.append("s", [user("old")], expected_revision=0)
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:  # as an older agentkit left it
        schema = pg_store.schema
        admin.execute(f"DELETE FROM {schema}.meta WHERE key = 'layout'")
        admin.execute(f"DROP FUNCTION {schema}.append_leased, {schema}.take_turn, {schema}.turn_key")
        admin.execute(f"DROP TABLE {schema}.turn_epochs")
    old = PostgresEventStore(pg_cluster.conninfo, schema=pg_store.schema)
    try:
        assert texts(old.load("s").events) == ["old"]  # plain use goes on
        with pytest.raises(StoreError, match=r"without turn locks\. Call PostgresEventStore.migrate\(\) once"):
            with old.turn_lock("s"):
                pass
        old.migrate()
        with old.turn_lock("s") as lease:
            old.append("s", [user("new")], expected_revision=1, lease=lease)
        assert texts(old.load("s").events) == ["old", "new"]
    finally:
        old.close()


def test_the_lock_connection_is_not_one_of_the_pools(pg_cluster, pg_store):
    with pg_store._pg.connection() as pooled:
        pooled_pid = pooled.info.backend_pid
    with pg_store.turn_lock("s") as lease:
        assert lease.pid != pooled_pid and lease.pid != os.getpid()
        with pg_store._pg.connection() as pooled:
            assert pooled.info.backend_pid != lease.pid


def test_an_idle_lock_connection_lost_to_a_server_restart_is_replaced(pg_cluster, pg_store):
    with pg_store.turn_lock("s") as lease:
        first = lease.pid
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:  # the idle one is lost
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
        wait_for(lambda: admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [first]).fetchone() is None)
    with pg_store.turn_lock("s", timeout=30) as lease:
        assert lease.pid != first
        pg_store.append("s", [user("a")], expected_revision=0, lease=lease)


def test_a_lock_connection_kept_for_the_next_turn_holds_no_lock(pg_cluster, pg_store):
    # A grant racing a wait's lock_timeout can leave the lock with a connection that was
    # told "not granted"; its next take then held the lock twice, one release did not free
    # it, and the idle connection kept it forever (every other process's turn waited).
    # Here the connection is made to hold it twice, as that race left it.
    key = psycopg.sql.SQL("SELECT pg_advisory_lock({}.turn_key(%s))").format(psycopg.sql.Identifier(pg_store.schema))
    with pg_store.turn_lock("s") as lease:
        lease.conn.execute(key, ["s"])
        idle = lease.pid
    other = PostgresEventStore(pg_cluster.conninfo, schema=pg_store.schema, connect_timeout=2)
    try:
        with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
            held = admin.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", [idle]
            ).fetchone()
            assert held == (0,)
        with other.turn_lock("s", timeout=5) as lease:  # another store object gets it at once
            assert lease.held
    finally:
        other.close()
