"""The EventStore contract, run against every store (in memory and on real files)."""

from __future__ import annotations

import re
import threading

import pytest
from _deep import depth_of, near_the_recursion_limit, nested

from agentkit import ConfigurationError, FileEventStore, InMemoryEventStore, StoreConflictError, StoreUnavailableError
from agentkit.events import RuntimeEvent, UserMessageEvent
from agentkit.messages import TextPart
from agentkit.stores import SCHEMA_VERSION, EventStore


def user(text: str) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


@pytest.fixture(params=["memory", "file", "postgres"])
def store(request, tmp_path) -> EventStore:
    if request.param == "memory":
        return InMemoryEventStore()
    if request.param == "postgres":  # a throwaway server (tests/_pg.py), a schema per test
        return request.getfixturevalue("pg_store")
    return FileEventStore(tmp_path / "store")


def another(store):
    """A second store object over the same data (file and PostgreSQL), else ``store``."""
    if isinstance(store, FileEventStore):
        return FileEventStore(store.root_dir)
    if type(store).__name__ == "PostgresEventStore":
        from agentkit.stores.postgres import PostgresEventStore

        return PostgresEventStore(store._pg.pool, schema=store.schema)
    return store


def texts(events) -> list[str]:
    return [e.content[0].text for e in events]


def test_is_an_event_store(store):
    assert isinstance(store, EventStore)


def test_missing_session_loads_as_none(store):
    assert store.load("nobody") is None
    assert store.list_sessions() == []
    assert store.delete("nobody") is False


def test_append_and_load_round_trip(store):
    a, b, c = user("a"), user("b"), RuntimeEvent(runtime_type="timer-fired", data={"n": 1, "x": [1.5, None]})
    assert store.append("s1", [a], expected_revision=0) == 1
    assert store.append("s1", [b, c], expected_revision=1) == 3
    loaded = store.load("s1")
    assert loaded is not None
    assert loaded.session_id == "s1"
    assert loaded.revision == 3
    assert loaded.schema_version == SCHEMA_VERSION
    assert loaded.events == (a, b, c)


def test_stale_expected_revision_conflicts_and_writes_nothing(store):
    store.append("s1", [user("a")], expected_revision=0)
    with pytest.raises(StoreConflictError) as info:
        store.append("s1", [user("stale")], expected_revision=0)
    assert info.value.expected_revision == 0
    assert info.value.actual_revision == 1
    assert "Reload" in str(info.value)
    with pytest.raises(StoreConflictError):
        store.append("s1", [user("ahead")], expected_revision=5)
    assert texts(store.load("s1").events) == ["a"]


def test_new_session_requires_revision_zero(store):
    with pytest.raises(StoreConflictError) as info:
        store.append("fresh", [user("a")], expected_revision=2)
    assert info.value.actual_revision == 0
    assert store.load("fresh") is None


def test_empty_append_creates_the_session_and_checks_revision(store):
    assert store.append("s1", [], expected_revision=0) == 0
    loaded = store.load("s1")
    assert loaded is not None and loaded.revision == 0 and loaded.events == ()
    assert store.list_sessions() == ["s1"]
    with pytest.raises(StoreConflictError):
        store.append("s1", [], expected_revision=1)


def test_sessions_are_independent_and_listed_sorted(store):
    store.append("b-session", [user("b")], expected_revision=0)
    store.append("a_session", [user("a")], expected_revision=0)
    store.append("c.session", [user("c")], expected_revision=0)
    assert store.list_sessions() == ["a_session", "b-session", "c.session"]
    assert texts(store.load("b-session").events) == ["b"]


def test_delete_removes_log_and_archives(store):
    store.append("s1", [user("a")], expected_revision=0)
    store.archive("s1", "arch1", [user("old")])
    store.append("s2", [user("keep")], expected_revision=0)
    assert store.delete("s1") is True
    assert store.load("s1") is None
    assert store.load_archive("s1", "arch1") is None
    assert store.list_sessions() == ["s2"]
    assert store.delete("s1") is False
    # a deleted id starts again at revision 0
    assert store.append("s1", [user("again")], expected_revision=0) == 1


def test_archive_round_trip_is_idempotent_and_never_overwritten(store):
    store.append("s1", [user("a")], expected_revision=0)
    old = [user("x"), user("y")]
    store.archive("s1", "compaction-1", old)
    assert store.load_archive("s1", "compaction-1") == tuple(old)
    assert store.load_archive("s1", "other") is None
    store.archive("s1", "compaction-1", old)  # same ids: no-op
    with pytest.raises(ConfigurationError, match="already holds different events"):
        store.archive("s1", "compaction-1", [user("z")])
    assert store.load_archive("s1", "compaction-1") == tuple(old)
    # archiving does not touch the active log
    assert texts(store.load("s1").events) == ["a"]


@pytest.mark.parametrize(
    "bad", ["../../etc", "..", "a/b", "a\\b", "", ".hidden", "-x", "x" * 129, "a\x00b", "a\n", "a\nb", 7]
)
def test_bad_session_ids_are_refused_before_any_side_effect(store, tmp_path, bad):
    for call in (
        lambda: store.append(bad, [user("a")], expected_revision=0),
        lambda: store.load(bad),
        lambda: store.archive(bad, "a1", []),
        lambda: store.archive("ok", bad, []),
        lambda: store.load_archive(bad, "a1"),
        lambda: store.delete(bad),
    ):
        with pytest.raises(ConfigurationError, match="invalid session id"):
            call()
    assert store.list_sessions() == []
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"events": ["not an event"], "expected_revision": 0}, "Event objects"),
        ({"events": "text", "expected_revision": 0}, "sequence of Event"),
        ({"events": [], "expected_revision": -1}, "expected_revision"),
        ({"events": [], "expected_revision": True}, "expected_revision"),
        ({"events": [], "expected_revision": "0"}, "expected_revision"),
    ],
)
def test_bad_append_arguments_are_refused_before_writing(store, kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        store.append("s1", **kwargs)
    assert store.load("s1") is None


def test_a_batch_that_repeats_an_id_or_runs_seq_backwards_is_refused_before_writing(store):
    """What a load would refuse as corruption is refused at the append, as bad input."""
    once = user("a").with_seq(1)
    for batch, match in (
        ([once, once], f"event id {once.id!r} appears twice"),
        ([user("b").with_seq(2), user("c").with_seq(1)], "has seq 1 after seq 2"),
    ):
        with pytest.raises(ConfigurationError, match=re.escape(match) + ".*Nothing was written"):
            store.append("s1", batch, expected_revision=0)
        assert store.load("s1") is None
    assert store.append("s1", [user("unnumbered"), user("also 0"), once], expected_revision=0) == 3


@pytest.mark.parametrize("own_object", [False, True], ids=["shared-object", "object-per-thread"])
def test_concurrent_thread_writers_lose_and_duplicate_nothing(store, own_object):
    """Writers retry by reloading; with ``own_object`` every file-store (PostgreSQL)
    writer thread has its own store object on the same directory (pool)."""
    writers, per_writer = 6, 15
    conflicts = [0] * writers
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        mine = another(store) if own_object else store
        try:
            for i in range(per_writer):
                while True:
                    current = mine.load("shared")
                    revision = 0 if current is None else current.revision
                    try:
                        mine.append("shared", [user(f"w{n}-{i}")], expected_revision=revision)
                        break
                    except StoreConflictError:
                        conflicts[n] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    loaded = store.load("shared")
    got = texts(loaded.events)
    assert loaded.revision == writers * per_writer
    assert sorted(got) == sorted(f"w{n}-{i}" for n in range(writers) for i in range(per_writer))
    for n in range(writers):  # each writer's own events stay in its order
        mine = [t for t in got if t.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(per_writer)]


# -- compaction ------------------------------------------------------------------------


def test_compaction_moves_a_prefix_into_an_archive_and_puts_the_summary_in_its_place(store):
    a, b, c, d = user("a"), user("b"), user("c"), user("d")
    store.append("s1", [a, b], expected_revision=0)
    store.append("s1", [c, d], expected_revision=2)
    summary = user("summary of a and b")
    assert store.compact("s1", "c1", expected_revision=4, remove=2, summary=[summary]) == 5
    loaded = store.load("s1")
    assert loaded.events == (summary, c, d) and loaded.revision == 5
    assert store.load_archive("s1", "c1") == (a, b)
    assert store.append("s1", [user("e")], expected_revision=5) == 6
    # without a summary, and down to an empty active log
    assert store.compact("s1", "c2", expected_revision=6, remove=4) == 7
    assert store.load("s1").events == () and store.load("s1").revision == 7
    assert texts(store.load_archive("s1", "c2")) == ["summary of a and b", "c", "d", "e"]
    assert store.list_sessions() == ["s1"]


def test_a_stale_compaction_or_append_conflicts_and_changes_nothing(store):
    store.append("s1", [user("a"), user("b"), user("c")], expected_revision=0)
    assert store.compact("s1", "c1", expected_revision=3, remove=1) == 4
    # a second compactor that loaded revision 3 would remove "b" thinking it is "a"
    with pytest.raises(StoreConflictError) as info:
        store.compact("s1", "c2", expected_revision=3, remove=1)
    assert (info.value.expected_revision, info.value.actual_revision) == (3, 4)
    with pytest.raises(StoreConflictError):
        store.append("s1", [user("stale")], expected_revision=3)
    assert texts(store.load("s1").events) == ["b", "c"]
    assert store.load_archive("s1", "c2") is None


@pytest.mark.parametrize("remove", [0, -1, True, 1.0, "1"])
def test_compaction_refuses_a_bad_count_before_any_side_effect(store, remove):
    store.append("s1", [user("a")], expected_revision=0)
    with pytest.raises(ConfigurationError, match="remove must be an int >= 1"):
        store.compact("s1", "c1", expected_revision=1, remove=remove)
    assert texts(store.load("s1").events) == ["a"] and store.load_archive("s1", "c1") is None


def test_compaction_refuses_to_remove_more_than_the_active_log_holds(store):
    store.append("s1", [user("a"), user("b")], expected_revision=0)
    with pytest.raises(ConfigurationError, match="remove 3 events but its active log holds 2"):
        store.compact("s1", "c1", expected_revision=2, remove=3)
    with pytest.raises(ConfigurationError, match="holds 0"):
        store.compact("nobody", "c1", expected_revision=0, remove=1)
    assert store.load("nobody") is None
    assert store.load("s1").revision == 2 and store.load_archive("s1", "c1") is None


def test_compaction_never_overwrites_an_archive_and_finishes_an_interrupted_one(store):
    a, b, c = user("a"), user("b"), user("c")
    store.append("s1", [a, b, c], expected_revision=0)
    store.archive("s1", "used", [user("other")])
    with pytest.raises(ConfigurationError, match="already holds different events"):
        store.compact("s1", "used", expected_revision=3, remove=1)
    assert store.load("s1").events == (a, b, c) and store.load("s1").revision == 3
    # a compaction interrupted after writing its archive is repeated: the archive
    # already holds these events, and the call completes
    store.archive("s1", "c1", [a, b])
    assert store.compact("s1", "c1", expected_revision=3, remove=2) == 4
    assert store.load("s1").events == (c,) and store.load_archive("s1", "c1") == (a, b)


def test_bad_compaction_ids_are_refused(store):
    for sid, aid in (("../../etc", "c1"), ("s1", "../x"), ("s1", "a/b")):
        with pytest.raises(ConfigurationError, match="invalid session id"):
            store.compact(sid, aid, expected_revision=0, remove=1)
    assert store.list_sessions() == []


def test_compactions_racing_appends_from_threads_lose_and_duplicate_nothing(store):
    """Writers append with reload-and-retry while a compactor repeatedly archives all but
    the last event; at the end the archives plus the active log hold every event once,
    in each writer's order.

    Nothing here depends on speed: however the threads interleave, the writers finish
    (each conflict means another append or compaction won), and then the compactor
    gets three compactions by taking turns with this thread (one event, one compaction,
    nothing racing it), so the end is reached by events, not by a deadline."""
    writers, per_writer = 4, 15
    errors: list[BaseException] = []
    stop = threading.Event()  # the compactor may stop (three compactions ran)
    changed = threading.Condition()
    archives: list[str] = []

    def fresh():
        return another(store)

    def writer(n: int) -> None:
        mine = fresh()
        try:
            for i in range(per_writer):
                while True:
                    current = mine.load("shared")
                    try:
                        mine.append("shared", [user(f"w{n}-{i}")], expected_revision=current.revision if current else 0)
                        break
                    except StoreConflictError:
                        pass
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def compactor() -> None:
        mine = fresh()
        try:
            while not stop.is_set():
                current = mine.load("shared")
                if current is None or len(current.events) < 3:
                    with changed:  # nothing to compact: wait for an append (or the end)
                        changed.wait(0.05)
                    continue
                archive_id = f"c{current.revision}"
                try:
                    mine.compact("shared", archive_id, expected_revision=current.revision,
                                 remove=len(current.events) - 1, summary=[user(f"sum-{current.revision}")])
                except StoreConflictError:
                    continue
                with changed:
                    archives.append(archive_id)
                    changed.notify_all()
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            with changed:
                changed.notify_all()

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(writers)]
    comp = threading.Thread(target=compactor, daemon=True)
    comp.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(100)  # a last guard: they end as soon as their appends are in
    assert not any(t.is_alive() for t in threads) and not errors
    extra = 0
    while len(archives) < 3 and not errors:
        # the writers are done: one event at a time, each taken by the next compaction
        before = len(archives)
        current = store.load("shared")
        try:
            store.append("shared", [user(f"x-{extra}")], expected_revision=current.revision)
            extra += 1
        except StoreConflictError:
            continue  # the compactor compacted in between: load again
        with changed:
            changed.notify_all()
            assert changed.wait_for(lambda b=before: len(archives) > b or bool(errors), timeout=60), (
                "the compactor made no compaction of a log with nothing racing it")
    stop.set()
    with changed:
        changed.notify_all()
    comp.join(60)
    assert not errors and not comp.is_alive()
    everything = [t for a in archives for t in texts(store.load_archive("shared", a))] + texts(
        store.load("shared").events
    )
    written = [t for t in everything if t.startswith("w")]
    assert sorted(written) == sorted(f"w{n}-{i}" for n in range(writers) for i in range(per_writer))
    for n in range(writers):
        assert [t for t in written if t.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(per_writer)]


def test_events_are_stored_by_value_and_must_be_json(store):
    ev = RuntimeEvent(runtime_type="tick", data={"n": [1]})
    store.append("s1", [ev], expected_revision=0)
    ev.data["n"].append(2)  # the caller changes its object afterwards
    assert store.load("s1").events[0].data == {"n": [1]}
    bad = RuntimeEvent(runtime_type="tick", data={"x": []})
    bad.data["x"].append(object())  # events check their data when built; this slips past
    for call in (
        lambda: store.append("s1", [bad], expected_revision=1),
        lambda: store.archive("s1", "a1", [bad]),
        lambda: store.compact("s1", "c1", expected_revision=1, remove=1, summary=[bad]),
    ):
        with pytest.raises(ConfigurationError, match="cannot store these events: they are not JSON-serialisable"):
            call()
    assert store.load("s1").revision == 1 and store.load_archive("s1", "a1") is None
    assert store.load_archive("s1", "c1") is None



@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({1: "a", "b": 2}, r"\$\.data has the key 1"),
        ({"t": (1, 2)}, r"\$\.data\.t is a tuple"),
        ({"x": float("nan")}, r"\$\.data\.x is nan"),
        ({"deep": nested(600)}, "nested deeper than 500 levels"),
    ],
)
def test_events_that_would_not_come_back_unchanged_are_refused_before_writing(store, bad, match):
    store.append("s1", [user("a")], expected_revision=0)
    ev = RuntimeEvent(runtime_type="tick", data={})
    ev.data.update(bad)  # events check their data when built; this slips past
    for call in (
        lambda: store.append("s1", [ev], expected_revision=1),
        lambda: store.archive("s1", "a1", [ev]),
        lambda: store.compact("s1", "c1", expected_revision=1, remove=1, summary=[ev]),
    ):
        with pytest.raises(ConfigurationError, match=match):
            call()
    assert store.load("s1").revision == 1 and store.load_archive("s1", "a1") is None
    assert store.load_archive("s1", "c1") is None


def test_appending_and_loading_do_not_depend_on_the_callers_stack_depth(store):
    ev = RuntimeEvent(runtime_type="tick", data={"deep": nested(400)})
    assert near_the_recursion_limit(lambda: store.append("s1", [ev], expected_revision=0), 120) == 1
    loaded = near_the_recursion_limit(lambda: store.load("s1"), 120)
    assert depth_of(loaded.events[0].data["deep"]) == 400
    assert near_the_recursion_limit(lambda: store.archive("s1", "a1", [ev]), 120) is None
    assert depth_of(near_the_recursion_limit(lambda: store.load_archive("s1", "a1"), 120)[0].data["deep"]) == 400


def test_the_retention_sequence_keeps_seq_numbers_and_is_idempotent(store):
    """What Session retention does through the port: archive the covered prefix under the
    compaction event's id, then compact it away with no summary; each step repeated (a
    restart after a crash) changes nothing. Events keep their seq in both places."""
    events = [user(t).with_seq(i) for i, t in enumerate("abcde", start=1)]
    store.append("s1", events, expected_revision=0)
    store.archive("s1", "comp-1", events[:3])
    store.archive("s1", "comp-1", events[:3])  # repeated after a restart: no-op
    assert store.compact("s1", "comp-1", expected_revision=5, remove=3) == 6
    assert [e.seq for e in store.load("s1").events] == [4, 5]
    assert [e.seq for e in store.load_archive("s1", "comp-1")] == [1, 2, 3]
    store.archive("s1", "comp-1", events[:3])  # after the prune too
    assert [e.seq for e in store.load_archive("s1", "comp-1")] == [1, 2, 3]


def test_head_is_the_current_revision_without_reading_events(store):
    assert store.head("s1") is None
    assert store.append("s1", [user("a")], expected_revision=0) == 1
    assert store.head("s1") == 1
    other = another(store)  # another process's writes, through its own store object
    assert other.append("s1", [user("b"), user("c")], expected_revision=1) == 3
    assert store.head("s1") == 3 == store.load("s1").revision
    assert store.head("s2") is None  # other sessions are not touched
    with pytest.raises(ConfigurationError):
        store.head("../etc")


def test_head_follows_another_writers_compaction_and_delete(store):
    store.append("s1", [user(t) for t in "abcd"], expected_revision=0)
    assert store.head("s1") == 4
    other = another(store)
    summary = RuntimeEvent(runtime_type="summary", data={"of": 3})
    assert other.compact("s1", "arch-1", expected_revision=4, remove=3, summary=[summary]) == 5
    assert store.head("s1") == 5 == store.load("s1").revision
    # a compacted log of exactly the size and shape of the one before: head still moves
    store.append("s1", [user("e")], expected_revision=5)
    assert other.compact("s1", "arch-2", expected_revision=6, remove=1, summary=[summary]) == 7
    assert store.head("s1") == 7
    assert other.delete("s1") is True
    assert store.head("s1") is None


def test_head_agrees_with_load_through_a_run_of_appends_by_two_writers(store):
    other = another(store)
    revision = 0
    for i in range(30):
        writer = store if i % 3 else other
        revision = writer.append("s1", [user(str(i))], expected_revision=revision)
        assert store.head("s1") == revision == other.head("s1") == store.load("s1").revision


# -- the turn lock -------------------------------------------------------------------------


def test_the_turn_lock_is_held_by_one_at_a_time_and_its_epoch_grows(store):
    with store.turn_lock("s1") as first:
        assert first.held and first.session_id == "s1"
        with pytest.raises(StoreUnavailableError, match="stayed taken") as info:
            with another(store).turn_lock("s1", timeout=0.05):
                pass
        assert info.value.written is False
        with another(store).turn_lock("s2", timeout=5):  # other sessions are not held up
            pass
    assert not first.held
    with another(store).turn_lock("s1", timeout=5) as second:
        assert second.epoch > first.epoch


def test_a_wait_for_the_turn_lock_ends_at_once_on_cancel(store):
    from agentkit import CancelledError, CancelToken

    token, box = CancelToken(), {}
    with store.turn_lock("s1"):
        def wait():
            try:
                with another(store).turn_lock("s1", cancel=token):  # no timeout: only the cancel ends it
                    box["got"] = True
            except BaseException as exc:  # noqa: BLE001 - inspected below
                box["error"] = exc

        waiter = threading.Thread(target=wait)
        waiter.start()
        token.cancel("the caller gave up")
        waiter.join(30)
        assert not waiter.is_alive()
    assert isinstance(box.get("error"), CancelledError) and "got" not in box


def test_an_append_under_a_lease_is_refused_once_the_lease_is_lost(store):
    from agentkit import TurnLockLostError

    with store.turn_lock("s1") as old:
        assert store.append("s1", [user("a")], expected_revision=0, lease=old) == 1
    with pytest.raises(TurnLockLostError, match="no longer held"):
        store.append("s1", [user("late")], expected_revision=1, lease=old)  # released
    with another(store).turn_lock("s1") as new:
        with pytest.raises(TurnLockLostError):
            store.append("s1", [user("late")], expected_revision=1, lease=old)  # an older epoch
        assert another(store).append("s1", [user("b")], expected_revision=1, lease=new) == 2
    assert texts(store.load("s1").events) == ["a", "b"]
    with pytest.raises(ConfigurationError, match="timeout"):
        with store.turn_lock("s1", timeout=-1):
            pass
