"""Job stores: compare-and-swap, atomic files, and a real host restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pytest
from _procs import alive, wait_for

from agentkit import ConfigurationError, StoreConflictError, StoreCorruptionError
from agentkit.execution import LocalExecutionContext
from agentkit.jobs import FileJobStore, InMemoryJobStore, JobState


def job(eid="job_1", state="running", **kw) -> JobState:
    return JobState(execution_id=eid, command="sleep 1", argv=("sleep", "1"), state=state,
                    started_at=time.time(), **kw)


@pytest.fixture(params=["memory", "file", "postgres"])
def store(request, tmp_path):
    if request.param == "postgres":  # a throwaway server (tests/_pg.py), a schema per test
        from agentkit.stores.postgres import PostgresJobStore

        cluster = request.getfixturevalue("pg_cluster")
        pg = PostgresJobStore(cluster.conninfo, schema=cluster.fresh_schema())
        pg.migrate()
        request.addfinalizer(pg.close)
        return pg
    return InMemoryJobStore() if request.param == "memory" else FileJobStore(tmp_path / "jobs.json")


def test_compare_and_swap_per_job(store):
    assert store.load() == []
    assert store.put(job(), expected_revision=0) == 1
    assert store.put(job(state="finished", exit_code=0), expected_revision=1) == 2
    with pytest.raises(StoreConflictError) as err:
        store.put(job(state="failed"), expected_revision=1)
    assert err.value.expected_revision == 1 and err.value.actual_revision == 2
    with pytest.raises(StoreConflictError):
        store.put(job("job_2"), expected_revision=5)
    [stored] = store.load()
    assert stored.revision == 2 and stored.state.state == "finished" and stored.state.exit_code == 0
    store.delete("job_1")
    store.delete("job_unknown")
    assert store.load() == []


def test_file_store_survives_a_new_instance_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "jobs.json"
    FileJobStore(path).put(job(output_tail="héllo"), expected_revision=0)
    [stored] = FileJobStore(path).load()
    assert stored.state.output_tail == "héllo" and stored.revision == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.json", "jobs.json.lock"]


def test_file_store_reports_corruption_and_bad_paths(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text("{not json")
    with pytest.raises(StoreCorruptionError, match="not valid JSON"):
        FileJobStore(path).load()
    with pytest.raises(ConfigurationError, match="does not exist"):
        FileJobStore(tmp_path / "missing" / "jobs.json")


def test_finished_jobs_are_persisted_and_restored(tmp_path):
    path = tmp_path / "jobs.json"
    with LocalExecutionContext(tmp_path, job_store=FileJobStore(path)) as c:
        s = c.jobs.start("bash", ["-c", "echo persisted; exit 2"])
        wait_for(lambda: not c.jobs.get(s.execution_id).running)
    with LocalExecutionContext(tmp_path, job_store=FileJobStore(path)) as c2:
        restored = c2.jobs.get(s.execution_id)
    assert restored.state == "finished" and restored.exit_code == 2
    assert restored.output_tail == "persisted\n"


_CHILD = textwrap.dedent("""
    import json, os, sys
    from agentkit.execution import LocalExecutionContext
    from agentkit.jobs import FileJobStore
    root, path = sys.argv[1], sys.argv[2]
    ctx = LocalExecutionContext(root, job_store=FileJobStore(path))
    state = ctx.jobs.start("sleep", ["60"])
    print(json.dumps({"execution_id": state.execution_id, "pid": state.pid}), flush=True)
    os._exit(0)  # the host dies: no cleanup, the job's process is left behind
""")


def _crashed_host(tmp_path):
    path = tmp_path / "jobs.json"
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), str(path)], capture_output=True,
                         text=True, timeout=60, check=True)
    return path, json.loads(out.stdout)


def test_restart_marks_orphaned_running_jobs_failed(tmp_path):
    path, info = _crashed_host(tmp_path)
    try:
        [before] = FileJobStore(path).load()
        assert before.state.state == "running" and before.state.pid == info["pid"]
        with LocalExecutionContext(tmp_path, job_store=FileJobStore(path)) as c:
            state = c.jobs.get(info["execution_id"])
            assert state.state == "failed" and "host restarted" in state.error
            assert state.finished_at is not None
        [after] = FileJobStore(path).load()
        assert after.state.state == "failed" and after.revision == before.revision + 1
        assert alive(info["pid"])  # the default does not claim the old process was killed
    finally:
        os.kill(info["pid"], signal.SIGKILL)


def test_settle_orphaned_job_supplies_the_real_terminal_state(tmp_path):
    path, info = _crashed_host(tmp_path)
    asked = []

    def settle(orphan: JobState) -> JobState:
        asked.append(orphan.execution_id)
        os.kill(orphan.pid, signal.SIGKILL)  # this host knows how to stop it
        return replace(orphan, state="aborted", error="stopped by the host after a restart")

    try:
        with LocalExecutionContext(tmp_path, job_store=FileJobStore(path), settle_orphaned_job=settle) as c:
            state = c.jobs.get(info["execution_id"])
        assert asked == [info["execution_id"]]
        assert state.state == "aborted" and state.error == "stopped by the host after a restart"
        assert FileJobStore(path).load()[0].state.state == "aborted"
        wait_for(lambda: not alive(info["pid"]))
    finally:
        if alive(info["pid"]):
            os.kill(info["pid"], signal.SIGKILL)


def test_settle_orphaned_job_must_return_a_terminal_state_for_the_same_job(tmp_path):
    store = InMemoryJobStore()
    store.put(job(), expected_revision=0)
    with pytest.raises(ConfigurationError, match="same execution_id"):
        LocalExecutionContext(tmp_path, job_store=store, settle_orphaned_job=lambda j: job("job_other"))
    with pytest.raises(ConfigurationError, match="finished, failed or aborted"):
        LocalExecutionContext(tmp_path, job_store=store, settle_orphaned_job=lambda j: j)


def test_a_store_without_the_methods_is_rejected(tmp_path):
    with pytest.raises(ConfigurationError, match="job_store"):
        LocalExecutionContext(tmp_path, job_store=object())


def test_a_lock_held_by_another_process_times_out_without_being_stolen(tmp_path):
    from agentkit import StoreLockTimeout

    path = tmp_path / "jobs.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time, portalocker
            with portalocker.Lock(sys.argv[1], mode="a", flags=portalocker.LOCK_EX):
                print("locked", flush=True)
                time.sleep(60)
        """), str(path) + ".lock"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockTimeout, match="jobs.json.lock"):
            FileJobStore(path, lock_timeout=0.3).put(job(), expected_revision=0)
        assert not path.exists()
    finally:
        holder.kill()
        holder.wait()
    assert FileJobStore(path).put(job(), expected_revision=0) == 1


class _RacedStore(InMemoryJobStore):
    """A real store in which another runner settles the orphan just before ours does."""

    def put(self, state, *, expected_revision):
        if state.state != "running" and expected_revision == 1 and not getattr(self, "raced", False):
            self.raced = True
            super().put(replace(state, state="aborted", error="settled by the other runner"),
                        expected_revision=1)
        return super().put(state, expected_revision=expected_revision)


def test_two_runners_restoring_one_store_agree_on_the_first_verdict(tmp_path):
    store = _RacedStore()
    store.put(job(), expected_revision=0)
    with LocalExecutionContext(tmp_path, job_store=store) as c:
        restored = c.jobs.get("job_1")
    assert restored.state == "aborted" and restored.error == "settled by the other runner"
    [stored] = store.load()
    assert stored.state == restored and stored.revision == 2


def test_restore_applies_retention(tmp_path):
    store = InMemoryJobStore()
    for i in range(5):
        store.put(job(f"job_{i}", state="finished", exit_code=0, finished_at=float(i)), expected_revision=0)
    with LocalExecutionContext(tmp_path, job_store=store, max_retained_jobs=2) as c:
        assert [s.execution_id for s in c.jobs.list()] == ["job_3", "job_4"]
    assert sorted(s.state.execution_id for s in store.load()) == ["job_3", "job_4"]


def test_a_malformed_record_is_reported_as_corruption(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"format": 1, "jobs": {"job_1": {"revision": 1, "state": {"state": "odd"}}}}))
    with pytest.raises(StoreCorruptionError, match="malformed job record"):
        FileJobStore(path).load()
    path.write_text(json.dumps({"format": 1, "jobs": {"job_1": {"state": job().to_dict()}}}))
    with pytest.raises(StoreCorruptionError, match="malformed job record"):
        FileJobStore(path).load()


_INCREMENTER = textwrap.dedent("""
    import sys
    from dataclasses import replace
    from agentkit import StoreConflictError
    from agentkit.jobs import FileJobStore
    store, done = FileJobStore(sys.argv[1]), 0
    while done < int(sys.argv[2]):
        [current] = store.load()
        state = replace(current.state, output_bytes=current.state.output_bytes + 1)
        try:
            store.put(state, expected_revision=current.revision)
            done += 1
        except StoreConflictError:
            pass  # another process wrote first: reload and retry
""")


def test_compare_and_swap_holds_across_processes(tmp_path):
    path = tmp_path / "jobs.json"
    FileJobStore(path).put(job("job_x"), expected_revision=0)
    children = [subprocess.Popen([sys.executable, "-c", _INCREMENTER, str(path), "25"]) for _ in range(3)]
    for child in children:
        assert child.wait(timeout=120) == 0
    [stored] = FileJobStore(path).load()
    assert stored.state.output_bytes == 75 and stored.revision == 76  # no lost update


_WRITER = textwrap.dedent("""
    import sys, time
    from agentkit.jobs import FileJobStore, JobState
    store = FileJobStore(sys.argv[1])
    revision = 0
    while True:
        state = JobState(execution_id="job_big", command="x", argv=("x",), state="running",
                         started_at=time.time(), output_tail="y" * 200_000, output_bytes=revision)
        revision = store.put(state, expected_revision=revision)
        print(revision, flush=True)
""")


def test_a_writer_killed_mid_write_leaves_a_readable_file(tmp_path):
    path = tmp_path / "jobs.json"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(20):  # let it get well into its stream of whole-file rewrites
            assert writer.stdout.readline()
    finally:
        writer.kill()
        writer.wait()
    [stored] = FileJobStore(path).load()
    assert stored.revision >= 20 and stored.state.output_bytes == stored.revision - 1
    assert len(stored.state.output_tail) == 200_000


# -- temp files a crashed writer leaves (issue 10 item 9) ---------------------------------

_RESUMING_WRITER = textwrap.dedent("""
    import sys, time
    from agentkit.jobs import FileJobStore, JobState
    store = FileJobStore(sys.argv[1])
    rev = max((s.revision for s in store.load() if s.state.execution_id == "job_w"), default=0)
    print("ready", flush=True)
    while True:
        state = JobState(execution_id="job_w", command="x", argv=("x",), state="running",
                         output_tail="y" * 200_000, started_at=time.time())
        rev = store.put(state, expected_revision=rev)
""")


def _temps(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if "tmp" in n)


def test_opening_a_file_job_store_removes_the_temp_files_crashed_writers_left(tmp_path):
    path = tmp_path / "jobs.json"
    FileJobStore(path).put(job(), expected_revision=0)
    # real SIGKILLs of a writer in the middle of 200 KB rewrites
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", _RESUMING_WRITER, str(path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        proc.kill()
        proc.wait()
        proc.stdout.close()
    # what a writer killed between creating its temp file and renaming it leaves
    ours = tmp_path / f".jobs.json.{'a' * 32}.jobs-tmp"
    ours.write_text('{"format": 1, "jobs": {}}')
    legacy = tmp_path / ".jobs-k3j_x9aq.tmp"  # the name 0.1.0's mkstemp gave
    legacy.write_text("{")
    old = time.time() - 3600
    os.utime(legacy, (old, old))
    assert ours.exists() and legacy.exists()

    store = FileJobStore(path)

    assert _temps(tmp_path) == []
    assert [s.state.execution_id for s in store.load()] == ["job_1", "job_w"]


def test_the_sweep_leaves_what_is_not_a_stale_temp_file_of_this_store_alone(tmp_path):
    path = tmp_path / "jobs.json"
    keep = {
        ".jobs-k3j_x9aq.tmp": "a fresh 0.1.0-style temp: another store's writer may own it",
        f".other.json.{'b' * 32}.jobs-tmp": "another store file's temp",
        ".jobs.json.notes.jobs-tmp": "not the temp pattern",
        ".tmp-" + "c" * 32: "the event store's temp name",
        "jobs.json.tmp": "a user's file",
    }
    for name, text in keep.items():
        (tmp_path / name).write_text(text)
    target = tmp_path / "precious"
    target.write_text("keep me")
    link = tmp_path / f".jobs.json.{'d' * 32}.jobs-tmp"
    link.symlink_to(target)
    old = time.time() - 3600
    os.utime(tmp_path / f".other.json.{'b' * 32}.jobs-tmp", (old, old))

    FileJobStore(path)

    for name, text in keep.items():
        assert (tmp_path / name).read_text() == text, name
    assert link.is_symlink() and target.read_text() == "keep me"


def test_a_store_file_with_a_long_name_writes_and_sweeps(tmp_path):
    long_a, long_b = "j" * 200 + "-a.json", "j" * 200 + "-b.json"
    a, b = FileJobStore(tmp_path / long_a), FileJobStore(tmp_path / long_b)
    assert a.put(job(), expected_revision=0) == 1  # the temp file's name fits NAME_MAX
    leftover_b = tmp_path / (b._tmp_prefix + "e" * 32 + b._tmp_suffix)
    leftover_b.write_text("{}")
    FileJobStore(tmp_path / long_a)  # a store sweeps only its own temps
    assert leftover_b.exists()
    FileJobStore(tmp_path / long_b)
    assert not leftover_b.exists()


@pytest.fixture
def pg_jobs(pg_cluster):
    from agentkit.stores.postgres import PostgresJobStore

    store = PostgresJobStore(pg_cluster.conninfo, schema=pg_cluster.fresh_schema(), pool_size=2)
    store.migrate()
    yield store
    store.close()


def test_postgres_job_store_gets_one_job(pg_jobs):
    assert pg_jobs.get("job_1") is None
    pg_jobs.put(job(), expected_revision=0)
    pg_jobs.put(job(state="finished", exit_code=0), expected_revision=1)
    stored = pg_jobs.get("job_1")
    assert stored is not None and stored.revision == 2 and stored.state.state == "finished"


def test_postgres_job_store_writes_after_the_server_dropped_its_connections(pg_jobs, pg_cluster):
    """A restarted server leaves the pool's connections dead: the next write is made once
    more on a checked pool instead of failing (and a write that did arrive before its
    connection was lost is not refused as a conflict)."""
    import psycopg

    pg_jobs.put(job(), expected_revision=0)

    def drop_connections():  # the store's idle pooled connections, as a server restart would
        pids = [c.info.backend_pid for c in list(pg_jobs._pg.pool._pool)]
        assert pids
        with psycopg.connect(pg_cluster.conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])

    drop_connections()
    assert pg_jobs.put(job(state="finished", exit_code=0), expected_revision=1) == 2
    drop_connections()
    assert pg_jobs.put(job("job_2"), expected_revision=0) == 1
    assert [s.state.execution_id for s in pg_jobs.load()] == ["job_1", "job_2"]
