"""PostgresEventStore against a frozen server: the postmaster and every server process
stopped with SIGSTOP (their kernel still acknowledges every packet, so only the store's
own timeout can end a wait). Each test starts a cluster of its own (tests/_pg.py), so
freezing it holds up no other test."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest
from _procs import within

from agentkit import Session, StoreUnavailableError
from agentkit.events import UserMessageEvent
from agentkit.messages import TextPart
from agentkit.stores.postgres import PostgresEventStore


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


def texts(events) -> list[str]:
    return [e.content[0].text for e in events]


@pytest.fixture
def own_cluster(pg_cluster) -> Iterator[object]:
    from _pg import Cluster

    cluster = Cluster(pg_cluster.bin_dir)
    try:
        yield cluster
    finally:
        cluster.destroy()


def _server_pids(cluster) -> list[int]:
    """The postmaster and its children (backends, background workers)."""
    with open(os.path.join(cluster.data, "postmaster.pid")) as fh:
        postmaster = int(fh.readline())
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(entry))
    return pids


class _Frozen:
    """SIGSTOP every server process for the block; SIGCONT them after it."""

    def __init__(self, cluster) -> None:
        self.pids = _server_pids(cluster)

    def __enter__(self) -> _Frozen:
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _take_turn(store: PostgresEventStore) -> None:
    with store.turn_lock("s"):
        pass


def test_a_frozen_server_ends_appends_reads_and_turn_locks_in_store_unavailable_and_the_store_recovers(own_cluster):
    store = PostgresEventStore(own_cluster.conninfo, schema="agentkit", timeout=1, connect_timeout=1)
    try:
        store.migrate()
        store.append("s", [user("a")], expected_revision=0)
        failures: dict[str, BaseException] = {}

        def attempt(name: str, fn) -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - inspected below
                failures[name] = exc

        with _Frozen(own_cluster):
            appender = threading.Thread(
                target=attempt, args=("append", lambda: store.append("s", [user("b")], expected_revision=1))
            )
            appender.start()
            # a read on another thread meanwhile is not held up by the hanging append
            within(lambda: attempt("load", lambda: store.load("s")), 30)
            within(lambda: attempt("head", lambda: store.head("s")), 30)
            within(lambda: attempt("turn", lambda: _take_turn(store)), 30)
            appender.join(30)  # generous: the store gives up after at most 3 x timeout
            assert not appender.is_alive()
        assert set(failures) == {"append", "load", "head", "turn"}
        assert all(isinstance(exc, StoreUnavailableError) for exc in failures.values()), failures
        append_error = failures["append"]
        assert isinstance(append_error, StoreUnavailableError)
        # the statement reached the frozen server: whether it commits once thawed is unknown
        assert append_error.written is None and "unknown" in str(append_error)
        assert "no answer in time (the store's timeout is 1 s)" in str(append_error)
        assert failures["turn"].written is False  # type: ignore[attr-defined]
        # thawed: the store works again, and the append is there at most once
        loaded = within(lambda: store.load("s"), 30)
        assert texts(loaded.events) in (["a"], ["a", "b"]) and store.head("s") == loaded.revision
        store.append("s", [user("c")], expected_revision=loaded.revision)
        with store.turn_lock("s", timeout=30) as lease:
            store.append("s", [user("d")], expected_revision=loaded.revision + 1, lease=lease)
        assert texts(store.load("s").events)[-2:] == ["c", "d"]
    finally:
        store.close()


def test_a_session_push_on_a_frozen_server_ends_in_store_unavailable(own_cluster):
    store = PostgresEventStore(own_cluster.conninfo, schema="agentkit", timeout=1, connect_timeout=1)
    try:
        store.migrate()
        with Session(store=store, session_id="chat") as session:
            session.push_user_message("before")
            with _Frozen(own_cluster):
                with pytest.raises(StoreUnavailableError):
                    within(lambda: session.push_user_message("while frozen"), 30)
            within(session.refresh, 30)
            session.push_user_message("after")
            assert texts(session.events)[0] == "before" and texts(session.events)[-1] == "after"
    finally:
        store.close()
