"""Listeners across processes (agentkit/session/_follow.py): a listener or a stream on a pooled
session in one process hears what another process commits to that session -- each event
once, in store order -- with no read or push of its own to pull it in."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _follow_child import reply, save_note
from _procs import wait_for, within

from agentkit import ApprovalPolicy, FileEventStore, FunctionModel, SessionPool, ToolCall, ToolContext, tool
from agentkit.session._follow import _FOLLOWER

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 30.0  # a guard against hangs; delivery takes well under a second


class _Heard:
    """A listener that keeps what it heard and lets a test wait for given event ids."""

    def __init__(self) -> None:
        self.events: list = []
        self._cond = threading.Condition()

    def __call__(self, event) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def ids(self) -> list[str]:
        with self._cond:
            return [e.id for e in self.events]

    def wait_for(self, ids: list[str]) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: set(ids) <= {e.id for e in self.events}, DEADLINE)
        assert ok, f"the listener did not hear {ids} within {DEADLINE:g}s (heard {self.ids()})"


class _ProcessB:
    """tests/_follow_child.py: another process committing to the same session."""

    def __init__(self, spec: str, session_id: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "_follow_child.py"), spec, session_id],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def do(self, command: str) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"process B ended during {command!r} (exit code {self.proc.wait()})"
        ids: list[str] = json.loads(line)["ids"]
        return ids

    def stop(self) -> None:
        try:
            self.proc.communicate("quit\n", timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture(params=["file", "postgres"])
def shared_store(request, tmp_path):
    """(store for this process, spec for process B) over one durable store."""
    if request.param == "file":
        yield FileEventStore(tmp_path / "store"), f"file:{tmp_path / 'store'}"
        return
    cluster = request.getfixturevalue("pg_cluster")
    from agentkit.stores.postgres import PostgresEventStore

    schema = cluster.fresh_schema()
    store = PostgresEventStore(cluster.conninfo, schema=schema, connect_timeout=5)
    store.migrate()
    try:
        yield store, f"pg:{schema}:{cluster.conninfo}"
    finally:
        store.close()


def _stored_after(store, session_id: str, revision: int) -> list[str]:
    stored = store.load(session_id)
    return [e.id for e in stored.events if e.seq > revision]


def test_a_listener_hears_what_another_process_commits_each_once_in_store_order(shared_store):
    store, spec = shared_store
    with SessionPool(store, model=FunctionModel(reply), tools=[save_note],
                     approval=ApprovalPolicy(mode="ask-writes")) as pool:
        session = pool.get("conv")
        session.push_user_message("buy milk")
        assert session.generate().finish_reason == "approval-required"
        (request,) = session.pending_approvals()
        start = session.revision
        heard = _Heard()
        session.subscribe(heard)
        other = _ProcessB(spec, "conv")
        try:
            committed = []
            for command in ("push job-finished", "push timer-fired", f"approve {request.id}"):
                ids = other.do(command)  # this process does nothing: its listener must hear it
                heard.wait_for(ids)
                committed += ids
        finally:
            other.stop()
        kinds = [getattr(e, "action", None) or getattr(e, "runtime_type", None) or e.type for e in heard.events]
        assert kinds[:3] == ["job-finished", "timer-fired", "approval-decided"]
        assert "assistant-message" in kinds  # the approved call ran over there, and the model answered
        assert heard.ids() == committed == _stored_after(store, "conv", start)  # each once, in store order
        assert [e.seq for e in heard.events] == list(range(start + 1, start + 1 + len(committed)))
        assert session.pending_approvals() == []  # the session itself is current too


def test_a_stream_waits_on_an_event_another_process_commits(tmp_path):
    """A generation streamed in this process runs a tool that waits for a job another
    host finishes: the job-finished event committed there reaches it here."""
    store = FileEventStore(tmp_path / "store")
    heard = _Heard()

    @tool(read_only=True)
    def wait_for_job(ctx: ToolContext) -> str:
        """Wait for the build job to finish."""
        def finished() -> bool:
            return any(getattr(e, "runtime_type", None) == "job-finished" for e in heard.events)

        while not finished() and not ctx.cancel.wait(0.02):
            pass
        return "the build passed" if finished() else "cancelled"

    def model(request):  # the job-finished event reaches the model too: answer once the tool did
        results = [m for m in request.messages if m.role == "tool"]
        return "done: " + results[-1].content[0].output.as_text() if results else ToolCall("wait_for_job", {})

    with SessionPool(store, model=FunctionModel(model), tools=[wait_for_job]) as pool:
        session = pool.get("build")
        session.subscribe(heard)
        other = _ProcessB(f"file:{tmp_path / 'store'}", "build")
        try:
            with session.ask_stream("tell me when the build is done") as stream:
                types = []
                for event in stream:
                    types.append(event.type)
                    if event.type == "tool-start":
                        other.do("push job-finished")  # committed by process B while the tool waits
                assert stream.result.text == "done: the build passed"
        finally:
            other.stop()
        assert types[-1] == "generation-end" and "tool-end" in types
        stored = [getattr(e, "runtime_type", None) or e.type for e in store.load("build").events]
        assert stored.count("job-finished") == 1 and stored[-1] == "assistant-message"


def test_one_follower_thread_serves_every_listened_session_and_ends_when_none_is(tmp_path):
    import gc

    gc.collect()
    before = _FOLLOWER.following()  # sessions other tests left open with a listener
    store = FileEventStore(tmp_path / "store")
    with SessionPool(store, model=FunctionModel(reply)) as pool:
        stops = [pool.get(f"s{i}").subscribe(lambda e: None) for i in range(50)]
        assert _FOLLOWER.following() == before + 50
        assert [t.name for t in threading.enumerate()].count("agentkit-follower") == 1
        for stop in stops[:25]:
            stop()
        assert _FOLLOWER.following() == before + 25
        pool.close()  # closing a session stops following it
        assert _FOLLOWER.following() == before
    if before == 0:
        wait_for(lambda: "agentkit-follower" not in [t.name for t in threading.enumerate()], DEADLINE,
                 "the follower thread to end")


def test_the_follower_asks_the_store_without_holding_the_session_lock(tmp_path):
    """A store slow to answer the follower's head check (a database far away) holds up
    no commit or read of the session meanwhile."""
    asked, answer = threading.Event(), threading.Event()

    class SlowHead(FileEventStore):
        def head(self, session_id):  # the follower's check waits; others' do not
            if threading.current_thread().name == "agentkit-follower":
                asked.set()
                answer.wait(DEADLINE)
            stored = self.load(session_id)
            return None if stored is None else stored.revision

    with SessionPool(SlowHead(tmp_path / "store"), model=FunctionModel(reply)) as pool:
        session = pool.get("slow")
        heard = _Heard()
        session.subscribe(heard)
        try:
            assert asked.wait(DEADLINE), "the follower never checked the head"
            event = within(lambda: session.push_runtime_event("tick", {}), DEADLINE)  # the lock is free
            assert within(lambda: session.events[-1].id, DEADLINE) == event.id
        finally:
            answer.set()
        heard.wait_for([event.id])
        assert heard.ids().count(event.id) == 1


# -- PostgreSQL: LISTEN/NOTIFY instead of polling ------------------------------------------


def _pg_store(cluster):
    from agentkit.stores.postgres import PostgresEventStore

    schema = cluster.fresh_schema()
    store = PostgresEventStore(cluster.conninfo, schema=schema, connect_timeout=5)
    store.migrate()
    return store, f"pg:{schema}:{cluster.conninfo}"


def _listening(cluster, schema: str) -> list[int]:
    """The server processes LISTENing on ``schema``'s channel (their last statement)."""
    import psycopg

    from agentkit.stores._pg import channel_name

    with psycopg.connect(cluster.conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE query = %s",
                            [f'LISTEN "{channel_name(schema)}"']).fetchall()
    return [pid for (pid,) in rows]


@pytest.fixture
def no_polling(monkeypatch):
    """The follower's polling interval made far longer than any wait of these tests: what
    they hear came by LISTEN/NOTIFY (or the head check made when listening starts)."""
    import agentkit.session._follow as follow_module

    monkeypatch.setattr(follow_module, "INTERVAL", 3000.0)


def test_on_postgresql_a_listener_hears_another_process_by_notification_not_polling(pg_cluster, no_polling):
    store, spec = _pg_store(pg_cluster)
    with store, SessionPool(store, model=FunctionModel(reply)) as pool:
        session = pool.get("notified")
        session.push_user_message("hello")
        start = session.revision
        heard = _Heard()
        session.subscribe(heard)
        other = _ProcessB(spec, "notified")
        try:
            committed = []
            for kind in ("job-finished", "timer-fired", "job-finished"):
                ids = other.do(f"push {kind}")
                heard.wait_for(ids)  # DEADLINE (30 s) is a hundredth of the polling interval
                committed += ids
        finally:
            other.stop()
        assert heard.ids() == committed == _stored_after(store, "notified", start)


def test_on_postgresql_one_listening_connection_per_store_however_many_sessions_are_followed(pg_cluster):
    first, _ = _pg_store(pg_cluster)

    def listen_threads() -> int:  # the listening threads of this test's stores (named after them)
        return [t.name for t in threading.enumerate()].count(f"agentkit-follower-listen {first!r}")

    from agentkit.stores.postgres import PostgresEventStore

    second = PostgresEventStore(pg_cluster.conninfo, schema=first.schema, connect_timeout=5)  # another store object
    third = PostgresEventStore(pg_cluster.conninfo, schema=first.schema, connect_timeout=5)
    try:
        with SessionPool(first, model=FunctionModel(reply)) as pool_1, \
                SessionPool(second, model=FunctionModel(reply)) as pool_2:
            stops = [pool_1.get(f"a{i}").subscribe(lambda e: None) for i in range(30)]
            stops += [pool_2.get(f"b{i}").subscribe(lambda e: None) for i in range(30)]
            wait_for(lambda: len(_listening(pg_cluster, first.schema)) == 2, DEADLINE, "two LISTEN connections")
            assert listen_threads() == 2
            more = [pool_1.get(f"c{i}").subscribe(lambda e: None) for i in range(30)]
            assert len(_listening(pg_cluster, first.schema)) == 2 and listen_threads() == 2
            for stop in stops[:30] + more:  # every session of the first store stops being followed
                stop()
            wait_for(lambda: len(_listening(pg_cluster, first.schema)) == 1, DEADLINE, "the first store's to end")
            pool_2.close()
            wait_for(lambda: not _listening(pg_cluster, first.schema), DEADLINE, "the second store's to end")
        # a store closed while its sessions are still followed stops listening too
        session = SessionPool(third, model=FunctionModel(reply)).get("left-open")
        session.subscribe(lambda e: None)
        wait_for(lambda: _listening(pg_cluster, first.schema), DEADLINE, "the third store to listen")
        third.close()
        wait_for(lambda: not _listening(pg_cluster, first.schema), DEADLINE, "the closed store's to end")
        wait_for(lambda: listen_threads() == 0, DEADLINE, "the listening threads to end")
    finally:
        first.close()
        second.close()
        third.close()


def test_on_postgresql_a_lost_listening_connection_is_reopened_and_nothing_committed_meanwhile_is_missed(
        pg_cluster, no_polling):
    import uuid

    import psycopg

    from agentkit.stores.postgres import PostgresEventStore

    database = f"lost_{uuid.uuid4().hex[:8]}"  # of its own: connections to it are refused for a while
    conninfo = pg_cluster.conninfo.replace("dbname=postgres", f"dbname={database}")
    with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
        try:
            store = PostgresEventStore(conninfo, schema="lost", connect_timeout=5)
            store.migrate()
            with store, SessionPool(store, model=FunctionModel(reply)) as pool:
                session = pool.get("lost")
                session.push_user_message("hello")
                start = session.revision
                heard = _Heard()
                session.subscribe(heard)
                other = _ProcessB(f"pg:lost:{conninfo}", "lost")
                try:
                    committed = other.do("push job-finished")
                    heard.wait_for(committed)
                    (listener,) = _listening(pg_cluster, "lost")
                    admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")  # no listening again yet
                    try:
                        admin.execute("SELECT pg_terminate_backend(%s)", [listener])
                        wait_for(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                                           [listener]).fetchall(), DEADLINE, "the backend to end")
                        missed = other.do("push timer-fired")  # announced to nobody (B's pooled connection is open)
                        committed += missed
                    finally:
                        admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
                    heard.wait_for(missed)  # listening again, it compared the session's head
                    wait_for(lambda: _listening(pg_cluster, "lost"), DEADLINE, "the listener to be back")
                    after = other.do("push job-finished")
                    heard.wait_for(after)
                    committed += after
                finally:
                    other.stop()
                assert heard.ids() == committed == _stored_after(store, "lost", start)  # each once, in order
        finally:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


def test_on_postgresql_a_session_followed_late_catches_up_on_what_was_announced_before(pg_cluster, no_polling):
    """A second session of a store already listening: what process B committed to it
    before its listener subscribed (announced while nobody here followed it) reaches the
    listener without another commit."""
    store, spec = _pg_store(pg_cluster)
    with store, SessionPool(store, model=FunctionModel(reply)) as pool:
        pool.get("first").subscribe(lambda e: None)  # the store's listening thread runs
        late = pool.get("late")
        late.push_user_message("hello")
        other = _ProcessB(spec, "late")
        try:
            ids = other.do("push job-finished")
        finally:
            other.stop()
        heard = _Heard()
        late.subscribe(heard)
        heard.wait_for(ids)


def test_on_postgresql_sessions_dropped_without_close_stop_the_listening(pg_cluster):
    import gc

    from agentkit import Session

    store, _ = _pg_store(pg_cluster)
    with store:
        sessions = [Session.open(f"d{i}", store=store, model=FunctionModel(reply)) for i in range(3)]
        for session in sessions:
            session.subscribe(lambda e: None)
        wait_for(lambda: _listening(pg_cluster, store.schema), DEADLINE, "the store to listen")
        del sessions, session

        def dropped_and_unheard() -> bool:
            # a session is a reference cycle: it is gone when the cyclic collector has run
            # (and not while the follower thread happened to hold it for a visit), as it
            # does in a process that keeps running
            gc.collect()
            return not _listening(pg_cluster, store.schema)

        wait_for(dropped_and_unheard, DEADLINE, "the listening to end")


def test_a_store_whose_watch_all_fails_is_polled_instead(tmp_path, caplog):
    """A store offering watch_all() that cannot listen (here it raises at once) loses no
    listener: its followed sessions are polled like any other store's, with a warning."""
    class CannotListen(FileEventStore):
        def watch_all(self, cancel=None, *, poll_interval=0.5):
            raise RuntimeError("no notifications here")
            yield  # a generator, as watch_all is

    store = CannotListen(tmp_path / "store")
    with caplog.at_level("WARNING", logger="agentkit.session"), \
            SessionPool(store, model=FunctionModel(reply)) as pool:
        session = pool.get("fallback")
        heard = _Heard()
        session.subscribe(heard)
        other = _ProcessB(f"file:{tmp_path / 'store'}", "fallback")
        try:
            ids = other.do("push job-finished")
        finally:
            other.stop()
        heard.wait_for(ids)
    assert "cannot listen for other processes' commits (RuntimeError: no notifications here)" in caplog.text
