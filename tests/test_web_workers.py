"""The three web examples under real multi-process servers: gunicorn ``-w 2`` (Flask,
Django) and ``uvicorn --workers 2`` (FastAPI) on 127.0.0.1, sharing one FileEventStore
directory; then two such servers in separate working directories sharing nothing but a
PostgreSQL database (two hosts).

Many conversations at once run docs/approvals.md's flow and plain chat, every request on a
new connection so the kernel hands them to either worker. What a user of the examples
must be able to count on, and these tests count:

- 0 stale approval lists: GET /chat/<cid>/approvals right after a request needed approval
  lists it, whichever worker answers;
- 0 double decisions: of two decisions of one request sent at once, one answers 200 and
  the other 409; a repeated decision answers 409;
- 0 double runs: the approved tool ran once per approved request (it writes a line to
  ``$CHAT_NOTES_FILE`` each time it runs);
- GET /chat/<cid> shows the same conversation from any worker;
- in the store, every turn once and contiguous: each user message followed by its
  answer, nothing interleaved, no event twice, seq numbers 1..n.

The Flask example also runs the ask-a-human flow under ``gunicorn -w 2``: a tool that asks
a person mid-call, answered through either worker, runs its side effect once.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from _procs import free_port
from _servers import ServerProcess

from agentkit import FileEventStore, Session
from agentkit.stores import EventStore

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CONVERSATIONS = 12
ROUNDS = 2  # per conversation: one approved note, one denied note, each followed by plain chat
HTTP_TIMEOUT = 60


class _MultiProcessServer(ServerProcess):
    """An example under its production server with two worker processes, started in
    ``cwd`` with the store given by ``env`` (``CHAT_STORE_DIR`` or ``CHAT_DATABASE_URL``)."""

    def __init__(self, framework: str, cwd: Path, env: dict[str, str]) -> None:
        port = free_port()
        cwd.mkdir(parents=True, exist_ok=True)
        full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        for key in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            full.pop(key, None)
        bind = f"127.0.0.1:{port}"
        if framework == "fastapi":
            argv = [sys.executable, "-m", "uvicorn", "--workers", "2", "--host", "127.0.0.1", "--port",
                    str(port), "--app-dir", str(EXAMPLES), "--factory", "fastapi_app:create_app",
                    "--log-level", "warning", "--no-access-log", "--timeout-keep-alive", "1"]
        else:
            app = "flask_app:create_app()" if framework == "flask" else "django_app:application"
            argv = [sys.executable, "-m", "gunicorn", "-w", "2", "-b", bind, "--pythonpath", str(EXAMPLES),
                    "--graceful-timeout", "5", "--log-level", "warning", "--no-control-socket", app]
        super().__init__(argv, port=port, env=full, cwd=cwd, log=cwd / "server.log")
        self.started(f"{framework} with two workers")

    def answers(self) -> bool:
        try:
            return requests.get(f"{self.url}/chat/warm-up/approvals", timeout=10).status_code == 200
        except (requests.ConnectionError, requests.Timeout):
            return False

    def stop(self, timeout: float = 30) -> None:
        super().stop(timeout)


class _Run:
    """The client side: conversations driven through a list of servers (a request goes
    to them in turn), on new connections, with what went wrong counted by kind."""

    def __init__(self, servers: list[_MultiProcessServer]) -> None:
        self._urls = [s.url for s in servers]
        self._next = 0
        self._lock = threading.Lock()
        self.problems: Counter[str] = Counter()
        self.details: list[str] = []
        self.sent: dict[str, list[tuple[str, str]]] = {}  # cid -> [(user text, answer text)]
        self.approved: list[str] = []
        self.denied: list[str] = []

    def _url(self) -> str:
        with self._lock:
            self._next += 1
            return self._urls[self._next % len(self._urls)]

    def problem(self, kind: str, detail: str) -> None:
        with self._lock:
            self.problems[kind] += 1
            self.details.append(f"{kind}: {detail}")

    def post(self, path: str, body: object) -> tuple[int, dict]:
        r = requests.post(self._url() + path, json=body, timeout=HTTP_TIMEOUT, headers={"Connection": "close"})
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {"error": r.text[:300]}

    def get(self, path: str) -> tuple[int, dict]:
        r = requests.get(self._url() + path, timeout=HTTP_TIMEOUT, headers={"Connection": "close"})
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {"error": r.text[:300]}

    def converse(self, cid: str) -> None:
        turns = self.sent.setdefault(cid, [])
        for r in range(ROUNDS):
            approving = r % 2 == 0
            note = f"{cid} note {r}"
            status, body = self.post(f"/chat/{cid}", {"message": f"note: {note}"})
            if status != 200 or body.get("finish_reason") != "approval-required":
                self.problem("wrong answer", f"{cid}: note {r} answered {status} {body}")
                return
            request_id = None
            for _ in range(3):  # whichever worker answers, right away
                status, body = self.get(f"/chat/{cid}/approvals")
                pending = body.get("pending", []) if status == 200 else []
                texts = [p["input"].get("text") for p in pending]
                if texts != [note]:
                    self.problem("stale approval list", f"{cid}: listed {texts} ({status}), expected [{note!r}]")
                else:
                    request_id = pending[0]["id"]
            if request_id is None:
                return
            decide = f"/chat/{cid}/approvals/{request_id}/" + ("approve" if approving else "deny")
            body = {"note": "ana"} if approving else {"reason": "not now"}
            with ThreadPoolExecutor(2) as ex:  # the same decision twice, at once, to either worker
                both = [f.result() for f in [ex.submit(self.post, decide, body) for _ in range(2)]]
            statuses = sorted(s for s, _ in both)
            if statuses != [200, 409]:
                self.problem("double decision", f"{cid}: two decisions of {request_id} answered {statuses}: {both}")
            answers = [b.get("answer") for s, b in both if s == 200]
            expected = f"Done. saved: {note}" if approving else "Done. denied: not now"
            if answers[:1] != [expected]:
                self.problem("wrong answer", f"{cid}: the decision answered {answers}, expected {expected!r}")
            turns.append((f"note: {note}", expected))
            (self.approved if approving else self.denied).append(note)
            status, again = self.post(decide, body)
            if status != 409:
                self.problem("double decision", f"{cid}: a repeated decision answered {status} {again}")
            for _ in range(2):
                status, body = self.get(f"/chat/{cid}/approvals")
                if status != 200 or body.get("pending") != []:
                    self.problem("stale approval list", f"{cid}: after the decision listed {status} {body}")
            hello = f"hello from {cid} round {r}"
            status, body = self.post(f"/chat/{cid}", {"message": hello})
            if status != 200 or body.get("answer") != f"You said: {hello}":
                self.problem("wrong answer", f"{cid}: {hello!r} answered {status} {body}")
            turns.append((hello, f"You said: {hello}"))
            expected_history = [m for q, a in turns for m in ({"role": "user", "text": q},
                                                              {"role": "assistant", "text": a})]
            for _ in range(3):
                status, body = self.get(f"/chat/{cid}")
                if status != 200 or body.get("messages") != expected_history:
                    got = body.get("messages")
                    self.problem("stale history", f"{cid}: GET showed {len(got or [])} messages ({status}), "
                                                  f"expected {len(expected_history)}")

    def run(self, notes_file: Path) -> None:
        """Conversations in batches until the approved calls ran in both workers (the
        kernel may hand one worker most connections of a batch on a loaded machine),
        at most three batches; the "one worker" check then reports a run that never
        reached both."""
        for batch in range(3):
            cids = [f"conv-{batch}-{i}" for i in range(CONVERSATIONS)]
            with ThreadPoolExecutor(CONVERSATIONS) as ex:
                for future in [ex.submit(self.converse, cid) for cid in cids]:
                    future.result()
            if len(_pids(notes_file)) >= 2:
                return


def _pids(notes_file: Path) -> set[int]:
    """The processes the approved calls ran in (each run writes a line with its pid)."""
    if not notes_file.exists():
        return set()
    return {json.loads(line)["pid"] for line in notes_file.read_text().splitlines() if line.strip()}


def _text(event) -> str:
    return "".join(getattr(part, "text", "") for part in event.content)


def _check_store(store: EventStore, run: _Run, notes_file: Path) -> None:
    """Every turn once and contiguous in the store; every approved call ran once."""
    for cid, turns in run.sent.items():
        with Session.open(cid, store=store) as s:
            events = list(s.history())
        if [e.seq for e in events] != list(range(1, len(events) + 1)):
            run.problem("not contiguous", f"{cid}: seq numbers {[e.seq for e in events]}")
        ids = Counter(e.id for e in events)
        if any(n > 1 for n in ids.values()):
            run.problem("stored twice", f"{cid}: events stored twice: {[i for i, n in ids.items() if n > 1]}")
        said = [(e.type, _text(e)) for e in events if e.type in ("user-message", "assistant-message") and _text(e)]
        expected = [m for q, a in turns for m in (("user-message", q), ("assistant-message", a))]
        if said != expected:
            run.problem("not contiguous", f"{cid}: the stored turns are {said}, expected {expected}")
        results = Counter(e.tool_call_id for e in events if e.type == "tool-result")
        if any(n > 1 for n in results.values()):
            run.problem("double run", f"{cid}: calls with two results: {[c for c, n in results.items() if n > 1]}")
    lines = [json.loads(line) for line in notes_file.read_text().splitlines()] if notes_file.exists() else []
    ran = Counter(line["text"] for line in lines)
    for note in run.approved:
        if ran[note] != 1:
            run.problem("double run", f"the approved note {note!r} was saved {ran[note]} times")
    for note in run.denied:
        if ran[note]:
            run.problem("double run", f"the denied note {note!r} was saved {ran[note]} times")
    if len(_pids(notes_file)) < 2:
        run.problem("one worker", f"every approved call ran in one process ({_pids(notes_file)})")


def _assert_clean(run: _Run) -> None:
    firsts = [next(d for d in run.details if d.startswith(kind + ":")) for kind in run.problems]
    assert not run.problems, f"{dict(run.problems)}; the first of each kind:\n" + "\n".join(firsts)


FRAMEWORKS = ["flask", "django", "fastapi"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_workers_on_one_store_directory(framework, tmp_path):
    notes = tmp_path / "notes.jsonl"
    store_dir = tmp_path / "store"
    server = _MultiProcessServer(framework, tmp_path / "host",
                                 {"CHAT_STORE_DIR": str(store_dir), "CHAT_NOTES_FILE": str(notes)})
    run = _Run([server])
    try:
        run.run(notes)
    finally:
        server.stop()
    _check_store(FileEventStore(store_dir), run, notes)
    _assert_clean(run)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_hosts_sharing_only_a_postgres_database(framework, tmp_path, pg_cluster):
    """Two servers (each with two workers) in separate working directories, each reaching
    the store only through ``$CHAT_DATABASE_URL``: what two hosts share."""
    from agentkit.stores.postgres import PostgresEventStore

    schema = pg_cluster.fresh_schema()
    notes = tmp_path / "notes.jsonl"  # the tests' tally, not state the app shares
    env = {"CHAT_DATABASE_URL": pg_cluster.url, "CHAT_DB_SCHEMA": schema, "CHAT_NOTES_FILE": str(notes)}
    servers = []
    try:
        for host in ("host-a", "host-b"):
            servers.append(_MultiProcessServer(framework, tmp_path / host, env))
        run = _Run(servers)
        run.run(notes)
    finally:
        for server in servers:
            server.stop()
    with PostgresEventStore(pg_cluster.conninfo, schema=schema, connect_timeout=5) as store:
        _check_store(store, run, notes)
    _assert_clean(run)


def _refund_steps(tally: Path) -> list[dict]:
    """Every refund step that ran (the tool writes a line to ``$CHAT_REFUNDS_FILE`` each time)."""
    return [json.loads(line) for line in tally.read_text().splitlines()] if tally.exists() else []


def test_a_tool_asks_a_person_under_two_flask_workers(tmp_path):
    """docs/web.md's ask-a-human walk-through under ``gunicorn -w 2`` on one store
    directory, every request on a new connection: the question is listed by whichever
    worker answers, a wrong-type answer is a 422 and leaves it pending, the right one
    resumes the call (the quote before the question ran once, the refund once); of two
    answers to one question sent at once, one answers 200 with the final answer and the
    other 409, and the refund ran once."""
    tally = tmp_path / "refunds.jsonl"
    server = _MultiProcessServer("flask", tmp_path / "host",
                                 {"CHAT_STORE_DIR": str(tmp_path / "store"), "CHAT_REFUNDS_FILE": str(tally)})
    client = _Run([server])

    def ask_refund(cid: str, to: str) -> str:
        status, body = client.post(f"/chat/{cid}", {"message": f"refund: 25 to {to}"})
        assert (status, body) == (200, {"answer": "", "finish_reason": "input-required"})
        for _ in range(3):  # whichever worker answers, right away
            status, body = client.get(f"/chat/{cid}/inputs")
            assert status == 200 and [q["question"] for q in body["pending"]] == [f"Refund 25 to {to}?"], body
        return str(body["pending"][0]["id"])

    try:
        rid = ask_refund("r1", "alice")
        status, body = client.post(f"/chat/r1/inputs/{rid}/answer", {"value": "yes"})
        assert status == 422 and "does not match its schema" in body["error"], body
        for _ in range(2):
            assert [q["id"] for q in client.get("/chat/r1/inputs")[1]["pending"]] == [rid]  # still pending
        status, body = client.post(f"/chat/r1/inputs/{rid}/answer", {"value": True})
        assert (status, body) == (200, {"answer": "Done. refunded 25 to alice", "finish_reason": "stop"})
        assert client.get("/chat/r1/inputs") == (200, {"pending": []})
        assert client.get("/chat/r1")[1]["messages"][-1] == {"role": "assistant", "text": "Done. refunded 25 to alice"}

        # two answers "yes" at once, each on its own connection (two in flight): at least
        # three rounds, more until a question asked in one worker was answered in the other
        # (the refund ran in another process than the quote), at most twenty (the worker
        # that asked often wins the race, its session being current: it can take a few)
        races = []
        for i in range(20):
            if i >= 3 and _crossed(_refund_steps(tally)):
                break
            cid = f"race-{i}"
            rid = ask_refund(cid, cid)
            start = threading.Barrier(2)

            def answer(_: int, cid: str = cid, rid: str = rid, start: threading.Barrier = start) -> tuple:
                start.wait(30)
                return client.post(f"/chat/{cid}/inputs/{rid}/answer", {"value": True})

            with ThreadPoolExecutor(2) as ex:
                both = sorted(ex.map(answer, range(2)), key=lambda b: b[0])
            assert [status for status, _ in both] == [200, 409], both
            assert both[0][1]["answer"] == f"Done. refunded 25 to {cid}", both
            assert "already answered" in both[1][1]["error"], both
            races.append(cid)
    finally:
        server.stop()

    lines = _refund_steps(tally)
    assert _crossed(lines), f"no question was answered in another worker than the one that asked it: {lines}"
    steps = Counter((line["session_id"], line["step"]) for line in lines)
    assert steps == Counter({(cid, step): 1 for cid in ["r1", *races] for step in ("quote", "pay")})


def _crossed(lines: list[dict]) -> bool:
    """True when some call's refund ran in another process than its quote."""
    pids: dict[str, dict[str, int]] = {}
    for line in lines:
        pids.setdefault(line["tool_call_id"], {})[line["step"]] = line["pid"]
    return any(len(set(steps.values())) == 2 for steps in pids.values())


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
