"""The web examples (examples/flask_app.py, django_app.py, fastapi_app.py) against the
real frameworks: each one's own test client, a real server on 127.0.0.1 hit by
concurrent requests, two server processes on one store, and a client that disconnects
from a stream."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from _procs import free_port, wait_for
from _servers import ServerProcess

from agentkit import FileEventStore, Session

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))

import _chat  # noqa: E402

FRAMEWORKS = ["flask", "django", "fastapi"]


# -- each framework's own test client ------------------------------------------------


class _Client:
    """The framework's test client behind one small interface: post/get -> (status, json),
    stream -> SSE records."""

    def __init__(self, framework: str, store_dir: Path) -> None:
        self.pool = _chat.make_pool(str(store_dir))
        if framework == "flask":
            import flask_app

            self._c = flask_app.create_app(pool=self.pool).test_client()
        elif framework == "django":
            import django_app
            from django.test import Client

            django_app.POOL = self.pool
            self._c = Client()
        else:
            import fastapi_app
            from fastapi.testclient import TestClient

            self._c = TestClient(fastapi_app.create_app(pool=self.pool))
        self.framework = framework

    def post(self, url: str, body: object) -> tuple[int, dict]:
        if self.framework == "django":
            r = self._c.post(url, data=json.dumps(body), content_type="application/json")
            return r.status_code, json.loads(r.content)
        r = self._c.post(url, json=body)
        return r.status_code, r.json() if self.framework == "fastapi" else r.get_json()

    def get(self, url: str) -> dict:
        r = self._c.get(url)
        assert r.status_code == 200
        return json.loads(r.get_data() if self.framework == "flask" else r.content)

    def stream(self, url: str, body: object) -> list[dict]:
        if self.framework == "django":
            r = self._c.post(url, data=json.dumps(body), content_type="application/json")
            assert r["Content-Type"].startswith("text/event-stream")
            text = b"".join(r.streaming_content).decode()
        elif self.framework == "flask":
            r = self._c.post(url, json=body)
            assert r.mimetype == "text/event-stream"
            text = r.get_data(as_text=True)
        else:
            r = self._c.post(url, json=body)
            assert r.headers["content-type"].startswith("text/event-stream")
            text = r.text
        return _sse_records(text)

    def close(self) -> None:
        self.pool.close()


def _sse_records(text: str) -> list[dict]:
    return [json.loads(chunk[len("data: "):]) for chunk in text.split("\n\n") if chunk.startswith("data: ")]


@pytest.fixture(params=FRAMEWORKS)
def client(request, tmp_path):
    c = _Client(request.param, tmp_path)
    yield c
    c.close()


def test_post_a_message_and_get_the_answer(client):
    status, body = client.post("/chat/c1", {"message": "hello"})
    assert status == 200 and body == {"answer": "You said: hello", "finish_reason": "stop"}
    client.post("/chat/c1", {"message": "again"})
    assert client.get("/chat/c1")["messages"] == [
        {"role": "user", "text": "hello"}, {"role": "assistant", "text": "You said: hello"},
        {"role": "user", "text": "again"}, {"role": "assistant", "text": "You said: again"},
    ]


def test_a_bad_body_is_a_400_saying_what_to_send(client):
    status, body = client.post("/chat/c1", {"text": "wrong key"})
    assert status == 400 and "message" in body["error"]
    status, body = client.post("/chat/bad%20id!", {"message": "x"})
    assert status in (400, 404)


def test_the_stream_endpoint_sends_server_sent_events(client):
    records = client.stream("/chat/s1/stream", {"message": "streamed"})
    assert records[0]["type"] == "generation-start" and records[-1]["type"] == "generation-end"
    assert "".join(r["text"] for r in records if r["type"] == "text-delta") == "You said: streamed"
    assert client.get("/chat/s1")["messages"][-1] == {"role": "assistant", "text": "You said: streamed"}


def test_pending_approvals_approve_and_deny(client):
    _chat.NOTES.clear()
    status, body = client.post("/chat/a1", {"message": "note: buy milk"})
    assert status == 200 and body["finish_reason"] == "approval-required"
    (pending,) = client.get("/chat/a1/approvals")["pending"]
    assert pending["tool_name"] == "save_note" and pending["input"] == {"text": "buy milk"}
    status, body = client.post(f"/chat/a1/approvals/{pending['id']}/approve", {"note": "alice"})
    assert status == 200 and body["answer"] == "Done. saved: buy milk" and _chat.NOTES == ["buy milk"]
    assert client.get("/chat/a1/approvals")["pending"] == []

    client.post("/chat/a1", {"message": "note: sell the car"})
    (pending,) = client.get("/chat/a1/approvals")["pending"]
    status, body = client.post(f"/chat/a1/approvals/{pending['id']}/deny", {"reason": "not today"})
    assert status == 200 and "denied: not today" in body["answer"] and _chat.NOTES == ["buy milk"]
    status, body = client.post(f"/chat/a1/approvals/{pending['id']}/deny", {"reason": "twice"})
    assert status == 409 and pending["id"] in body["error"]  # decided already: a conflict


def _refund_steps(tally: Path) -> list[tuple[str, str]]:
    """(step, who) for every refund step that ran, in order (the tool's tally file)."""
    if not tally.exists():
        return []
    return [(line["step"], line["to"]) for line in map(json.loads, tally.read_text().splitlines())]


def test_a_tool_asks_a_person_and_the_answer_resumes_it(client, tmp_path, monkeypatch):
    tally = tmp_path / "refunds.jsonl"
    monkeypatch.setenv("CHAT_REFUNDS_FILE", str(tally))
    status, body = client.post("/chat/h1", {"message": "refund: 25 to alice"})
    assert status == 200 and body == {"answer": "", "finish_reason": "input-required"}
    (question,) = client.get("/chat/h1/inputs")["pending"]
    assert (question["question"], question["schema"], question["tool_name"]) == \
        ("Refund 25 to alice?", {"type": "boolean"}, "refund")
    assert question["expires_at"] > question["requested_at"]
    answer_url = f"/chat/h1/inputs/{question['id']}/answer"
    assert _refund_steps(tally) == [("quote", "alice")]  # the step before the question ran

    status, body = client.post(answer_url, {"value": "yes"})  # not a boolean
    assert status == 422 and "does not match its schema" in body["error"]
    assert [q["id"] for q in client.get("/chat/h1/inputs")["pending"]] == [question["id"]]  # still pending
    status, body = client.post(answer_url, {"answer": True})
    assert status == 400 and '"value"' in body["error"]
    status, body = client.post("/chat/h1/inputs/not-a-request/answer", {"value": True})
    assert status == 404 and "not-a-request" in body["error"]

    status, body = client.post(answer_url, {"value": True})
    assert status == 200 and body == {"answer": "Done. refunded 25 to alice", "finish_reason": "stop"}
    assert _refund_steps(tally) == [("quote", "alice"), ("pay", "alice")]  # the quote did not run again
    status, body = client.post(answer_url, {"value": False})
    assert status == 409 and "already answered" in body["error"]
    assert client.get("/chat/h1/inputs")["pending"] == []

    client.post("/chat/h1", {"message": "refund: 7.5 to bob"})
    (question,) = client.get("/chat/h1/inputs")["pending"]
    status, body = client.post(f"/chat/h1/inputs/{question['id']}/cancel", {"reason": "wrong customer"})
    assert status == 200 and "cancelled it: wrong customer" in body["answer"]
    status, body = client.post(f"/chat/h1/inputs/{question['id']}/cancel", None)
    assert status == 409 and "closed" in body["error"]
    status, body = client.post(f"/chat/h1/inputs/{question['id']}/answer", {"value": True})
    assert status == 409
    assert _refund_steps(tally) == [("quote", "alice"), ("pay", "alice"), ("quote", "bob")]  # bob got nothing
    assert client.get("/chat/h1")["messages"][-1]["text"].startswith("Done. this call asked a person")

    client.post("/chat/h1", {"message": "refund: 3 to carol"})
    (question,) = client.get("/chat/h1/inputs")["pending"]
    status, body = client.post(f"/chat/h1/inputs/{question['id']}/answer", {"value": False})
    assert status == 200 and body["answer"].startswith("Done. no refund: a person declined quote")
    assert _refund_steps(tally)[3:] == [("quote", "carol")]  # a "no": no refund


# -- real servers ----------------------------------------------------------------------


class _Server(ServerProcess):
    """An example started as its README says, on 127.0.0.1, in its own process."""

    def __init__(self, framework: str, store_dir: Path, heartbeat: float = 0.2) -> None:
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CHAT_STORE_DIR": str(store_dir),
               "CHAT_SSE_HEARTBEAT": str(heartbeat)}
        for key in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            env.pop(key, None)
        script = str(EXAMPLES / f"{framework}_app.py")
        if framework.startswith("gunicorn-"):  # the Flask example as its docstring says, in production
            argv = [sys.executable, "-m", "gunicorn", "--chdir", str(EXAMPLES), "-b", f"127.0.0.1:{port}",
                    "-w", "1", "-k", framework.removeprefix("gunicorn-"), "--threads", "4", "flask_app:create_app()"]
        elif framework == "django":
            argv = [sys.executable, script, "runserver", "--noreload", f"127.0.0.1:{port}"]
        else:
            argv = [sys.executable, script, "--port", str(port), "--store", str(store_dir)]
        super().__init__(argv, port=port, env=env, cwd=ROOT)
        self.started(f"the {framework} server")

    def ask(self, cid: str, message: str) -> str:
        r = requests.post(f"{self.url}/chat/{cid}", json={"message": message}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["answer"]


# Django's development server (runserver) listens with a backlog of 10 connections: more
# connecting at the same moment can be reset on a loaded machine before it accepts them
# (gunicorn and uvicorn listen with 2048). Its requests stay concurrent, at most 8 in flight.
_IN_FLIGHT = {"django": 8}


def _all_at_once(send, jobs, framework=None):
    """``send(job)`` for every job, each on its own thread, all released together (at
    most ``_IN_FLIGHT[framework]`` in flight at once for a server with a small backlog)."""
    start = threading.Barrier(len(jobs))
    slots = threading.BoundedSemaphore(_IN_FLIGHT.get(framework, len(jobs)))

    def one(job):
        start.wait(30)
        with slots:
            return send(job)

    with ThreadPoolExecutor(len(jobs)) as ex:
        return list(ex.map(one, jobs))


def _check_store(store_dir: Path, asked: dict[str, list[str]]) -> None:
    """Every message once, each followed by the answer to it, seq numbers in order."""
    store = FileEventStore(store_dir)
    for cid, questions in asked.items():
        with Session.open(cid, store=store) as s:
            events = s.events
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        log = [(e.type, e.content[0].text) for e in events if e.type in ("user-message", "assistant-message")]
        assert sorted(text for kind, text in log if kind == "user-message") == sorted(questions)
        assert [kind for kind, _ in log] == ["user-message", "assistant-message"] * len(questions)
        for (_, q), (_, a) in zip(log[::2], log[1::2], strict=True):
            assert a == f"You said: {q}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_real_server_answers_concurrent_requests_over_several_conversations(framework, tmp_path):
    server = _Server(framework, tmp_path / "store")
    try:
        jobs = [(f"conv{c}", f"conv{c} question {i}") for i in range(6) for c in range(4)]
        answers = _all_at_once(lambda job: server.ask(*job), jobs, framework)
        assert answers == [f"You said: {q}" for _, q in jobs]
        for c in range(4):
            r = requests.get(f"{server.url}/chat/conv{c}", timeout=30).json()["messages"]
            assert [m["role"] for m in r] == ["user", "assistant"] * 6
    finally:
        server.stop()
    _check_store(tmp_path / "store", {f"conv{c}": [q for cid, q in jobs if cid == f"conv{c}"] for c in range(4)})


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_server_processes_on_one_store(framework, tmp_path):
    servers = [_Server(framework, tmp_path / "store") for _ in range(2)]
    try:
        jobs = [(servers[i % 2], f"conv{c}", f"conv{c} q{i}") for i in range(6) for c in range(4)]
        answers = _all_at_once(lambda job: job[0].ask(job[1], job[2]), jobs, framework)
        assert answers == [f"You said: {q}" for _, _, q in jobs]
    finally:
        for server in servers:
            server.stop()
    _check_store(tmp_path / "store", {f"conv{c}": [q for _, cid, q in jobs if cid == f"conv{c}"] for c in range(4)})


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_client_that_leaves_a_stream_cancels_the_generation(framework, tmp_path):
    server = _Server(framework, tmp_path / "store")
    try:
        with requests.post(f"{server.url}/chat/d1/stream", json={"message": "slow:60"}, stream=True, timeout=30) as r:
            lines = r.iter_lines()
            first = next(line for line in lines if line and not line.startswith(b":"))  # not a keep-alive
            assert json.loads(first[len(b"data: "):])["type"] == "generation-start"
            next(line for line in lines if b"tool-start" in line)  # the slow tool runs
        # the connection is closed: the server notices and cancels the generation

        def aborted():
            with Session.open("d1", store=FileEventStore(tmp_path / "store")) as s:
                return any(e.type == "control" and e.action == "generation-aborted" for e in s.events)

        wait_for(aborted, timeout=30, what="the generation to be cancelled")
        assert server.ask("d1", "still there?") == "You said: still there?"
    finally:
        server.stop()


@pytest.mark.parametrize("server_kind", ["gunicorn-sync", "gunicorn-gthread", "flask", "django", "fastapi"])
def test_a_client_that_leaves_a_quiet_stream_is_noticed_within_one_heartbeat(server_kind, tmp_path):
    """The client reads up to the slow tool's start and closes its socket; the server
    writes nothing more until a keep-alive. The tool runs 1.5 heartbeats unless its cancel
    token is set: it must be (gunicorn used to notice at the second keep-alive, after two
    heartbeats, and the tool ran to its end)."""
    heartbeat = 2.0
    server = _Server(server_kind, tmp_path / "store", heartbeat=heartbeat)
    try:
        body = json.dumps({"message": f"slow:{1.5 * heartbeat}"}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
            conn.sendall(b"POST /chat/q1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            received = b""
            while b"tool-start" not in received:
                chunk = conn.recv(65536)
                assert chunk, f"the server closed the stream early: {received!r}"
                received += chunk
            conn.settimeout(0.2)  # take what was sent with it, so closing sends FIN, not a reset
            try:
                while conn.recv(65536):
                    pass
            except TimeoutError:
                pass
        # closed while the tool runs; the next write the server makes is a keep-alive

        def tool_result():
            with Session.open("q1", store=FileEventStore(tmp_path / "store")) as s:
                return next((e for e in s.events if e.type == "tool-result"), None), s.events

        wait_for(lambda: tool_result()[0] is not None, timeout=60, what="the slow tool's result")
        result, _ = tool_result()
        assert result.output.as_text() == "stopped", "the tool ran to its end: the disconnect was noticed too late"
        # the abort is committed after the stopped call's result, by the generation's own thread
        wait_for(lambda: any(e.type == "control" and e.action == "generation-aborted" for e in tool_result()[1]),
                 timeout=60, what="the generation-aborted event")
        assert server.ask("q1", "still there?") == "You said: still there?"
    finally:
        server.stop()
