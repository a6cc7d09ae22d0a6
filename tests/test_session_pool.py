"""SessionPool: one live Session per id, shared by concurrent callers; LRU and idle close;
conflicts with another process's appends are caught up and decided again."""

from __future__ import annotations

import threading

import pytest
from _procs import wait_for

from agentkit import (
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    InMemoryEventStore,
    Session,
    SessionClosedError,
    SessionPool,
)


def _echo(request):
    return "answer to " + [m for m in request.messages if m.role == "user"][-1].text


def _texts(session, kind):
    return [e.content[0].text for e in session.events if e.type == kind]


def test_one_live_session_per_id_shared_by_concurrent_callers(tmp_path):
    with SessionPool(FileEventStore(tmp_path), model=FunctionModel(_echo)) as pool:
        answers: dict[str, str] = {}

        def ask(cid, i):
            with pool.session(cid) as s:
                answers[f"{cid}-{i}"] = s.ask(f"{cid}-{i}").text

        threads = [threading.Thread(target=ask, args=(f"c{c}", i)) for c in range(4) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert answers == {k: f"answer to {k}" for k in answers} and len(answers) == 24
        assert sorted(pool.open_ids) == ["c0", "c1", "c2", "c3"]
        assert pool.get("c0") is pool.get("c0")
        for c in range(4):
            log = [(e.type, e.content[0].text) for e in pool.get(f"c{c}").events]
            assert [t for t, _ in log] == ["user-message", "assistant-message"] * 6
            assert all(a == f"answer to {q}" for (_, q), (_, a) in zip(log[::2], log[1::2], strict=True))


def test_factory_gives_each_id_its_keyword_arguments():
    seen = []

    def factory(session_id):
        seen.append(session_id)
        return {"model": FunctionModel(lambda r: f"I am {session_id}"), "system": f"for {session_id}"}

    with SessionPool(InMemoryEventStore(), factory=factory) as pool:
        assert pool.get("alice").ask("hi").text == "I am alice"
        assert pool.get("bob").ask("hi").text == "I am bob"
        pool.get("alice")
        assert seen == ["alice", "bob"]


def test_least_recently_used_session_is_closed_over_max_open_but_never_one_in_use():
    with SessionPool(InMemoryEventStore(), model=FunctionModel(_echo), max_open=2, idle_timeout=None) as pool:
        a = pool.get("a")
        with pool.session("b") as b:
            pool.get("a")  # order, least recent first: b, a
            c = pool.get("c")  # one over: b is in use, so a goes
            assert a.closed and not b.closed and not c.closed
            assert pool.open_ids == ["b", "c"]
        d = pool.get("d")  # one over again: b is free now and least recently used
        assert b.closed and pool.open_ids == ["c", "d"] and not d.closed
        again = pool.get("a")  # reopened, with its history from the store
        assert again is not a and not again.closed


def test_idle_sessions_are_closed_after_idle_timeout():
    with SessionPool(InMemoryEventStore(), model=FunctionModel(_echo), idle_timeout=0.2) as pool:
        s = pool.get("idle")
        s.ask("hello")
        wait_for(lambda: s.closed, what="the idle session to be closed")
        assert pool.open_ids == []
        assert _texts(pool.get("idle"), "user-message") == ["hello"]  # reopened from the store


def test_a_pooled_session_catches_up_with_another_writer_instead_of_failing(tmp_path):
    """Two pools over one store stand for two processes (gunicorn workers)."""
    store = FileEventStore(tmp_path)
    with SessionPool(store, model=FunctionModel(_echo)) as one, SessionPool(store, model=FunctionModel(_echo)) as two:
        one.get("c").push_user_message("from one")
        two.get("c").push_user_message("from two")  # its revision is current
        one.get("c").push_user_message("one again")  # stale: refreshed and retried
        assert two.get("c").ask("ask two").text == "answer to ask two"
        assert one.get("c").ask("ask one").text == "answer to ask one"
        expected = ["from one", "from two", "one again", "ask two", "ask one"]
        assert _texts(Session.open("c", store=store), "user-message") == expected
        assert _texts(one.get("c"), "user-message") == expected
        seqs = [e.seq for e in Session.open("c", store=store).events]
        assert seqs == list(range(1, len(seqs) + 1))


def test_a_plain_store_backed_session_catches_up_too(tmp_path):
    store = FileEventStore(tmp_path)
    with Session.open("c", store=store) as a, Session.open("c", store=store) as b:
        a.push_user_message("first")
        b.push_user_message("second")  # stale: it catches up, then appends after "first"
        assert _texts(b, "user-message") == ["first", "second"]
        assert _texts(Session.open("c", store=store), "user-message") == ["first", "second"]


def test_closed_pool_refuses_and_closes_its_sessions():
    pool = SessionPool(InMemoryEventStore(), model=FunctionModel(_echo))
    s = pool.get("x")
    pool.close()
    assert s.closed
    with pytest.raises(SessionClosedError, match="SessionPool is closed"):
        pool.get("x")
    pool.close()  # idempotent


def test_a_session_its_user_closed_is_opened_again():
    with SessionPool(InMemoryEventStore(), model=FunctionModel(_echo)) as pool:
        s = pool.get("x")
        s.ask("one")
        s.close()
        again = pool.get("x")
        assert again is not s and _texts(again, "user-message") == ["one"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_open": 0}, "max_open"),
        ({"idle_timeout": 0}, "idle_timeout"),
        ({"factory": "nope"}, "factory"),
        ({"session_id": "x"}, "session_id"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        SessionPool(InMemoryEventStore(), **kwargs)


def test_a_factory_that_returns_no_dict_is_named():
    with SessionPool(InMemoryEventStore(), factory=lambda sid: None) as pool:
        with pytest.raises(ConfigurationError, match=r"factory\('x'\) must return a dict"):
            pool.get("x")
        assert pool.open_ids == []


def test_a_pooled_generate_starts_from_what_other_processes_committed(tmp_path):
    store = FileEventStore(tmp_path)
    with SessionPool(store, model=FunctionModel(_echo)) as one, SessionPool(store, model=FunctionModel(_echo)) as two:
        stale = two.get("c")  # opened before the other process's turn
        one.get("c").ask("asked in one")
        one.get("c").push_user_message("pushed in one")
        assert stale.generate().text == "answer to pushed in one"  # it saw both
        assert _texts(Session.open("c", store=store), "user-message") == ["asked in one", "pushed in one"]
