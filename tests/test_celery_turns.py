"""Agent turns on Celery workers (agentkit/celery/_turns.py) with real components: a
redis-server broker, real ``celery worker`` processes (prefork and threads pools), a
PostgreSQL cluster (tests/_pg.py) and examples/celery_app.py's Flask app served by
``flask run`` on 127.0.0.1, started with the two commands of its docstring.

What they show: a turn enqueued by a web view runs on a worker and its events reach the
view's SSE stream in order; a turn that needs approval, approved in the web process,
finishes on a worker; a cancel from the web process stops the running turn on the worker
(a tool that blocks until its cancel token is cancelled) and a turn cancelled before it
started never runs; a broker that is down fails the enqueue at once, naming it, with
nothing recorded; a worker that cannot reach PostgreSQL retries, then fails the turn
visibly once the store is back.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from _procs import free_port, wait_for, within

from agentkit import ConfigurationError
from agentkit.celery import _turnlog
from agentkit.events import ControlEvent, UserMessageEvent

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "celery_app.py"
CELERY = str(Path(sys.executable).with_name("celery"))
FLASK = str(Path(sys.executable).with_name("flask"))
HTTP = 60


# -- the servers ----------------------------------------------------------------------------


def _docstring_commands() -> list[list[str]]:
    """The two command lines examples/celery_app.py's docstring says to run."""
    doc = EXAMPLE.read_text().split('"""')[1]
    lines = [line.strip() for line in doc.splitlines() if line.strip().startswith(("celery ", "flask "))]
    assert [line.split()[0] for line in lines] == ["celery", "flask"], lines
    return [shlex.split(line) for line in lines]


class _Process:
    """A server process started in the repository root, its output in a log file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._fh = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._fh, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.log.name} exited: {self.text()[-3000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._fh.close()


def _env(redis_url: str, conninfo: str, schema: str, tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", "CHAT_DATABASE_URL": conninfo,
           "CHAT_DB_SCHEMA": schema, "CHAT_REDIS_URL": redis_url, "CHAT_NOTES_FILE": str(tmp / "notes.jsonl"),
           "CHAT_SSE_HEARTBEAT": "2"}
    for key in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    return env


def _start_worker(argv: list[str], env: dict[str, str], log: Path) -> _Process:
    worker = _Process(argv, env, log)

    def ready() -> bool:
        worker.check()
        return "ready." in worker.text()

    wait_for(ready, 120, f"the celery worker ({' '.join(argv[1:])}) to be ready")
    return worker


class _Stack:
    """The example as its docstring runs it: a worker and the Flask app (and a broker
    and a database)."""

    def __init__(self, pool: str, redis: Any, conninfo: str, schema: str, tmp: Path) -> None:
        # a Redis database per stack: a task one stack left queued never reaches another's worker
        self.env = _env(redis.url[:-1] + {"prefork": "3", "threads": "4"}[pool], conninfo, schema, tmp)
        self.notes = tmp / "notes.jsonl"
        worker_argv, web_argv = _docstring_commands()
        worker_argv = [CELERY, *worker_argv[1:], "--pool", pool, "--concurrency", "3", "-n", f"{pool}@%h"]
        self.worker = _start_worker(worker_argv, self.env, tmp / f"worker-{pool}.log")
        self.port = free_port()
        web_argv = [FLASK, *[str(self.port) if a == "8000" else a for a in web_argv[1:]]]
        self.web = _Process(web_argv, self.env, tmp / "web.log")
        self.url = f"http://127.0.0.1:{self.port}"

        def up() -> bool:
            self.web.check()
            try:
                return requests.get(f"{self.url}/chat/warm-up/approvals", timeout=10).status_code == 200
            except requests.ConnectionError:
                return False

        wait_for(up, 120, "the Flask app to answer")

    def post(self, path: str, body: object = None) -> tuple[int, dict[str, Any]]:
        r = requests.post(self.url + path, json=body if body is not None else {}, timeout=HTTP)
        return r.status_code, r.json()

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        r = requests.get(self.url + path, timeout=HTTP)
        return r.status_code, r.json()

    def stream(self, accepted: dict[str, Any], last_event_id: int | None = None) -> Iterator[dict[str, Any]]:
        """The records of a turn's SSE stream (what a browser reads), until it ends (a
        generous deadline guards against a stream that never does: keep-alives come every
        second)."""
        deadline = time.monotonic() + 180
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        with requests.get(self.url + accepted["stream"], stream=True, timeout=HTTP, headers=headers) as r:
            assert r.status_code == 200, r.text
            assert r.headers["Content-Type"].startswith("text/event-stream")
            seq = None
            for line in r.iter_lines(decode_unicode=True):
                if time.monotonic() > deadline:
                    raise AssertionError(f"the stream of turn {accepted['turn_id']} did not end: "
                                         f"{self.worker.text()[-3000:]}")
                if line.startswith("id: "):
                    seq = int(line[4:])
                elif line.startswith("data: "):
                    record = json.loads(line[6:])
                    assert record["seq"] == seq
                    yield record

    def stop(self) -> None:
        self.web.stop()
        self.worker.stop()


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    """One redis-server for the module's tests (tests/_celery.py)."""
    from _celery import Redis, what_is_missing

    problem = what_is_missing()
    if problem:
        from _env import missing

        missing(problem)
    server = Redis()
    yield server
    server.destroy()


@pytest.fixture(scope="module", params=["prefork", "threads"])
def stack(request, broker, pg_cluster, tmp_path_factory) -> Iterator[_Stack]:
    s = _Stack(request.param, broker, pg_cluster.conninfo, pg_cluster.fresh_schema(),
               tmp_path_factory.mktemp(f"celery-{request.param}"))
    yield s
    s.stop()


def _kinds(records: list[dict[str, Any]]) -> list[str]:
    return [r["action"] if r["type"] == "control" else r["type"] for r in records]


def _text(record: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in record.get("content", []))


def _finished(records: list[dict[str, Any]]) -> dict[str, Any]:
    last = records[-1]
    assert last["type"] == "control" and last["action"] == "turn-finished", _kinds(records)
    return dict(last["data"])


# -- through the web app ----------------------------------------------------------------------


def test_a_turn_enqueued_by_a_view_runs_on_a_worker_and_streams_to_the_view_in_order(stack):
    status, first = stack.post("/chat/hello-1", {"message": "hello"})
    assert status == 202 and first["session_id"] == "hello-1" and len(first["turn_id"]) == 32
    records = list(stack.stream(first))
    assert _kinds(records) == ["turn-started", "user-message", "assistant-message", "turn-finished"]
    assert [_text(r) for r in records[1:3]] == ["hello", "You said: hello"]
    assert _finished(records) == {"turn_id": first["turn_id"], "status": "completed", "finish_reason": "stop"}
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # a browser that reconnects sends the last id it saw and gets what came after it
    assert list(stack.stream(first, last_event_id=seqs[1])) == records[2:]
    r = requests.get(stack.url + first["stream"], headers={"Last-Event-ID": "x"}, timeout=HTTP)
    assert r.status_code == 400 and "Last-Event-ID" in r.json()["error"]

    # the next turn's stream is its own: it starts at its turn-started, after the first turn's events
    status, second = stack.post("/chat/hello-1", {"message": "again"})
    assert status == 202 and second["turn_id"] != first["turn_id"]
    again = list(stack.stream(second))
    assert _kinds(again) == ["turn-started", "user-message", "assistant-message", "turn-finished"]
    assert again[0]["seq"] > seqs[-1] and _text(again[2]) == "You said: again"
    assert stack.get("/chat/hello-1")[1]["messages"] == [
        {"role": "user", "text": "hello"}, {"role": "assistant", "text": "You said: hello"},
        {"role": "user", "text": "again"}, {"role": "assistant", "text": "You said: again"}]


def test_a_turn_that_needs_approval_approved_in_the_web_process_finishes_on_a_worker(stack):
    status, asked = stack.post("/chat/approve-1", {"message": "note: buy milk"})
    assert status == 202
    records = list(stack.stream(asked))
    assert "approval-requested" in _kinds(records)
    assert _finished(records)["finish_reason"] == "approval-required"
    (pending,) = stack.get("/chat/approve-1/approvals")[1]["pending"]
    assert not stack.notes.exists()  # nothing ran before the decision

    status, resumed = stack.post(f"/chat/approve-1/approvals/{pending['id']}/approve", {"note": "ana"})
    assert status == 200 and resumed["turn_id"] != asked["turn_id"]
    status, again = stack.post(f"/chat/approve-1/approvals/{pending['id']}/approve", {"note": "bo"})
    assert status == 409, again  # decided already, against the state in PostgreSQL
    records = list(stack.stream(resumed))
    kinds = _kinds(records)
    assert kinds[0] == "turn-started" and "tool-result" in kinds and kinds[-2:] == ["assistant-message",
                                                                                    "turn-finished"]
    assert _text(records[-2]) == "Done. saved: buy milk"
    assert _finished(records) == {"turn_id": resumed["turn_id"], "status": "completed", "finish_reason": "stop"}
    runs = [json.loads(line) for line in stack.notes.read_text().splitlines()]
    assert [r["text"] for r in runs] == ["buy milk"]  # once, and in a worker, not in the web process
    assert runs[0]["pid"] not in (stack.web.proc.pid, os.getpid())
    assert stack.get("/chat/approve-1/approvals")[1]["pending"] == []


def test_a_cancel_from_the_web_process_stops_the_running_turn_on_the_worker(stack):
    status, slow = stack.post("/chat/cancel-1", {"message": "slow:600"})  # a tool that waits for its cancel
    assert status == 202
    seen: list[dict[str, Any]] = []
    for record in stack.stream(slow):
        seen.append(record)
        if _kinds([record]) == ["tool-execution-intent"]:  # the tool is about to run on the worker
            status, body = stack.post(f"/chat/cancel-1/turns/{slow['turn_id']}/cancel")
            assert (status, body) == (200, {"cancelled": True})
    kinds = _kinds(seen)
    assert "turn-cancel-requested" in kinds and "generation-aborted" in kinds, kinds
    assert _finished(seen) == {"turn_id": slow["turn_id"], "status": "cancelled",
                               "reason": "cancelled by the user", "started": True}
    assert stack.post(f"/chat/cancel-1/turns/{slow['turn_id']}/cancel") == (200, {"cancelled": False})

    # the session goes on: the next turn runs
    status, nxt = stack.post("/chat/cancel-1", {"message": "still there?"})
    assert _text(list(stack.stream(nxt))[-2]) == "You said: still there?"


def test_a_turn_cancelled_before_it_started_never_runs(stack):
    status, running = stack.post("/chat/queued-1", {"message": "slow:600"})
    records = stack.stream(running)
    assert next(r for r in records if _kinds([r]) == ["tool-execution-intent"])
    # the second turn of the conversation waits (on a worker) for the first one's turn lock
    status, queued = stack.post("/chat/queued-1", {"message": "never run"})
    assert status == 202
    assert stack.post(f"/chat/queued-1/turns/{queued['turn_id']}/cancel") == (200, {"cancelled": True})
    (only,) = list(stack.stream(queued))  # its stream ends at once: it finished before it started
    assert only["action"] == "turn-finished" and only["data"]["started"] is False
    assert stack.post(f"/chat/queued-1/turns/{running['turn_id']}/cancel") == (200, {"cancelled": True})
    assert _finished(list(records))["status"] == "cancelled"
    status, after = stack.post("/chat/queued-1", {"message": "after"})
    assert _text(list(stack.stream(after))[-2]) == "You said: after"
    texts = [m["text"] for m in stack.get("/chat/queued-1")[1]["messages"] if m["role"] == "user"]
    assert "never run" not in texts and texts[-1] == "after"


def test_a_view_answers_503_naming_a_broker_that_is_down_and_records_nothing(stack, broker):
    broker.stop()
    try:
        status, body = stack.post("/chat/down-web-1", {"message": "hello"})
        assert status == 503 and f"127.0.0.1:{broker.port}" in body["error"] and "Nothing was recorded" in body[
            "error"]
        assert stack.get("/chat/down-web-1")[1]["messages"] == []
    finally:
        broker.start()  # the same port: the web process connects again
    # (the worker's own reconnect is Celery's: 5.7's may exit on it, for a supervisor to restart)
    status, accepted = stack.post("/chat/down-web-1", {"message": "hello again"})
    assert status == 202 and len(accepted["turn_id"]) == 32  # the broker took it


# -- the decisions, and faults -------------------------------------------------------------------


def test_the_turn_record_decides_start_cancel_and_finish_once():
    tid = "a" * 32
    started = _turnlog.start([], tid, "ask")
    assert [e.action for e in started] == ["turn-started"]  # type: ignore[attr-defined]
    # a cancel before the start finishes the turn: the worker then never runs it
    (cancelled,) = _turnlog.cancel([], tid, "stop")
    assert cancelled.data == {"turn_id": tid, "status": "cancelled", "reason": "stop", "started": False}
    assert _turnlog.start([cancelled], tid, "ask") == []
    # a cancel after the start asks the worker to stop; the turn finishes once
    (request,) = _turnlog.cancel(started, tid, "stop")
    assert request.action == "turn-cancel-requested"  # type: ignore[attr-defined]
    assert _turnlog.cancel([*started, request], tid, "stop") == []
    (end,) = _turnlog.finish([*started, request], tid, "cancelled", {"reason": "stop"})
    assert _turnlog.finish([*started, end], tid, "completed", {}) == []
    # a task delivered again after its worker died mid-turn is settled, not run twice
    (lost,) = _turnlog.start(started, tid, "ask")
    assert lost.data["status"] == "lost"  # type: ignore[attr-defined]
    assert _turnlog.start([*started, end], tid, "ask") == []


def _tasks(broker: str, conninfo: str, store: Any) -> Any:
    from celery import Celery

    from agentkit import ScriptedModel
    from agentkit.celery import AgentTasks
    from agentkit.stores.postgres import PostgresJobStore

    app = Celery("turns-test", broker=broker)
    return AgentTasks(app, store=store, job_store=PostgresJobStore(conninfo, schema=store.schema, connect_timeout=2),
                      sessions=lambda sid: {"model": ScriptedModel(["hi"])})


def test_overrides_travel_to_the_worker_and_generate_resumes_with_no_new_message(pg_cluster, pg_store):
    """In Celery's eager mode (the task runs in place, as it would on a worker)."""
    tasks = _tasks(f"redis://127.0.0.1:{free_port()}/0", pg_cluster.conninfo, pg_store)
    tasks.app.conf.task_always_eager = True
    turn = tasks.enqueue_ask("eager-1", "hello", model="echo", system="Be brief.", max_steps=3)
    events = list(tasks.turn_events("eager-1", turn))
    assert [getattr(e, "action", e.type) for e in events] == [
        "turn-started", "user-message", "assistant-message", "turn-finished"]
    assert "hello" in events[2].content[0].text  # the override's model (echo), not the session's scripted one
    again = tasks.enqueue_generate("eager-1")
    (started, finished) = list(tasks.turn_events("eager-1", again))
    assert started.data == {"turn_id": again, "kind": "generate"}
    assert finished.data == {"turn_id": again, "status": "completed", "finish_reason": "nothing-to-answer"}
    tasks.pool.close()


def test_a_broker_that_is_down_fails_enqueue_at_once_naming_it_and_nothing_is_recorded(pg_cluster, pg_store):
    from agentkit.celery import BrokerUnavailableError

    port = free_port()  # nothing listens there
    tasks = _tasks(f"redis://:secret@127.0.0.1:{port}/0", pg_cluster.conninfo, pg_store)
    with pytest.raises(BrokerUnavailableError) as caught:
        within(lambda: tasks.enqueue_ask("down-1", "hello"), 30)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "secret" not in message and "Nothing was recorded" in message
    assert isinstance(caught.value, ConnectionError) and f"127.0.0.1:{port}" in caught.value.broker
    assert pg_store.load("down-1") is None and "down-1" not in pg_store.list_sessions()
    with pytest.raises(BrokerUnavailableError):
        tasks.enqueue_generate("down-1")
    assert pg_store.load("down-1") is None


def test_bad_input_to_enqueue_is_refused_before_anything_is_sent(pg_cluster, pg_store):
    # nothing listens at that broker: anything sent would fail
    tasks = _tasks(f"redis://127.0.0.1:{free_port()}/0", pg_cluster.conninfo, pg_store)
    with pytest.raises(ConfigurationError, match="invalid session id"):
        tasks.enqueue_ask("../x", "hi")
    with pytest.raises(ConfigurationError, match="cannot travel to a worker"):
        tasks.enqueue_ask("ok", "hi", deps=object())
    with pytest.raises(ConfigurationError, match="as JSON"):
        tasks.enqueue_ask("ok", "hi", provider_options={"when": object()})
    with pytest.raises(ConfigurationError, match="max_steps"):
        tasks.enqueue_ask("ok", "hi", max_steps=0)
    with pytest.raises(ConfigurationError, match="invalid turn id"):
        tasks.cancel_turn("ok", "not-a-turn")
    with pytest.raises(ConfigurationError, match="invalid turn id"):
        tasks.sse_turn("ok", "nope")
    with pytest.raises(ConfigurationError, match="after must be"):
        tasks.turn_events("ok", "a" * 32, after=-1)
    with pytest.raises(ConfigurationError, match="heartbeat"):
        tasks.sse_turn("ok", "a" * 32, heartbeat=0)
    assert pg_store.load("ok") is None
    # a turn nobody runs: a bounded wait ends saying so
    with pytest.raises(TimeoutError, match="committed nothing"):
        list(tasks.turn_events("ok", "a" * 32, timeout=0.3))
    tasks.pool.close()


@pytest.mark.timeout(400)
def test_a_worker_that_cannot_reach_postgresql_retries_then_fails_the_turn_visibly(broker, tmp_path):
    from _pg import Cluster, find_bin_dir

    from agentkit.stores.postgres import PostgresEventStore

    bin_dir = find_bin_dir()
    if bin_dir is None:
        from _env import missing

        missing("the PostgreSQL server binaries are not installed")
    cluster = Cluster(bin_dir)
    try:
        queue = broker.url[:-1] + "1"  # a database of its own: only this worker takes these tasks
        env = _env(queue, cluster.conninfo, "agentkit", tmp_path)
        # no redelivery while the worker waits for the store to record the failure (with
        # 5 s, another thread of the worker ran the turn once the store was back: the one
        # outcome was then that run, not the failure this test shows)
        env["TURNS_VISIBILITY"] = "600"
        argv = [CELERY, "--workdir", "examples", "-A", "_turns_worker", "worker", "--loglevel=info", "--pool",
                "threads", "--concurrency", "2", "-n", "pgdown@%h"]
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{ROOT / 'tests'}{os.pathsep}{ROOT / 'examples'}"
        worker = _start_worker(argv, env, tmp_path / "worker.log")
        try:
            cluster.stop()  # the database goes away after the worker started
            store = PostgresEventStore(cluster.conninfo, connect_timeout=2, timeout=5)
            sender = _tasks(queue, cluster.conninfo, store)
            turn_id = sender.enqueue_ask("pg-down-1", "hello")
            retrying = f"start turn {turn_id} of session 'pg-down-1': PostgreSQL unreachable"
            failed = f"turn {turn_id} of session 'pg-down-1' failed"
            try:
                wait_for(lambda: failed in worker.text(), 120, "the turn to fail")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {worker.text()[-3000:]}") from None
            log = worker.text()
            assert retrying in log and log.index(retrying) < log.index(failed)  # it tried again, then failed
            cluster.start()  # the store is back: the turn's end is recorded
            wait_for(lambda: _finish_in(store, "pg-down-1", turn_id), 120, "the turn-finished record")
            end = _finish_in(store, "pg-down-1", turn_id)
            assert end["status"] == "failed" and "could not reach the session's store for 4 s" in end["error"]
            stored = store.load("pg-down-1")
            assert stored is not None and not any(isinstance(e, UserMessageEvent) for e in stored.events)
            store.close()
        finally:
            worker.stop()
    finally:
        cluster.destroy()


def _finish_in(store: Any, session_id: str, turn_id: str) -> dict[str, Any] | None:
    from agentkit.errors import StoreError

    try:
        stored = store.load(session_id)
    except StoreError:
        return None
    for event in stored.events if stored else ():
        if isinstance(event, ControlEvent) and _turnlog.is_finish(event, turn_id):
            return dict(event.data)
    return None



@pytest.mark.timeout(400)
def test_a_turn_whose_worker_died_is_settled_as_lost_on_another_worker_not_run_twice(broker, pg_cluster, tmp_path):
    from _celery import Worker
    from celery import Celery

    from agentkit.stores.postgres import PostgresEventStore

    queue = broker.url[:-1] + "2"  # a database of its own: only these workers take these tasks
    schema = pg_cluster.fresh_schema()
    env = _env(queue, pg_cluster.conninfo, schema, tmp_path)
    path = f"{ROOT / 'tests'}{os.pathsep}{ROOT / 'examples'}"
    ping = Celery("ping", broker=queue)
    first = Worker("_turns_worker", env, pool="prefork", concurrency=1, name="dies", log_dir=str(tmp_path),
                   path=path).start().wait_ready(ping)
    store = PostgresEventStore(pg_cluster.conninfo, schema=schema)
    try:
        store.migrate()
        sender = _tasks(queue, pg_cluster.conninfo, store)
        turn_id = sender.enqueue_ask("lost-1", "slow:600")

        def intents() -> int:
            stored = store.load("lost-1")
            return sum(1 for e in stored.events if isinstance(e, ControlEvent)
                       and e.action == "tool-execution-intent") if stored else 0

        wait_for(intents, 120, "the slow tool to start on the first worker")
        first.kill()  # SIGKILL, mid-turn
        second = Worker("_turns_worker", env, pool="threads", concurrency=2, name="takes-over",
                        log_dir=str(tmp_path), path=path).start().wait_ready(ping)
        try:
            wait_for(lambda: _finish_in(store, "lost-1", turn_id), 120, "the turn to be settled")
            end = _finish_in(store, "lost-1", turn_id)
            assert end is not None and end["status"] == "lost" and "not run twice" in end["error"]
            stored = store.load("lost-1")
            assert stored is not None
            prompts = [e for e in stored.events if isinstance(e, UserMessageEvent)]
            assert len(prompts) == 1 and intents() == 1  # the prompt once, the tool started once
            started = [e for e in stored.events if isinstance(e, ControlEvent) and e.action == "turn-started"]
            assert len(started) == 1
        finally:
            second.stop()
    finally:
        first.stop()
        store.close()


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
