"""Agent turns on Celery workers behind a Flask app: a request answers at once (202) and
the browser streams the turn from the store while a worker runs it.

Routes (``<cid>`` is a conversation id, ``<tid>`` a turn id):
  POST /chat/<cid>                         {"message": "..."} -> 202 {"session_id", "turn_id", "stream"}
  GET  /chat/<cid>/turns/<tid>/stream      the turn's events as Server-Sent Events, until its turn-finished
  POST /chat/<cid>/turns/<tid>/cancel      -> 200 {"cancelled": true} (false: it had finished)
  GET  /chat/<cid>                         the conversation so far
  GET  /chat/<cid>/approvals               tool calls waiting for a person's answer
  POST /chat/<cid>/approvals/<id>/approve  {"note": "..."} -> 200 {"turn_id", ...}: the turn that resumes
                                           on a worker; 409 when it was decided already
  POST /chat/<cid>/approvals/<id>/deny     {"reason": "..."} -> the same
  POST /chat/<cid>/resume                  -> 202 {"turn_id", ...}: generate() on a worker, no new message

The demo agent is examples/_chat.py's (``note: ...`` needs an approval, ``slow:<seconds>``
runs a tool that stops when the turn is cancelled). Sessions and job records live in
PostgreSQL (``$CHAT_DATABASE_URL``, schema ``$CHAT_DB_SCHEMA``); Redis is the broker
(``$CHAT_REDIS_URL``, default ``redis://127.0.0.1:6379/0``). Run, from the repository
root, a worker and the web app:

    celery --workdir examples -A celery_app worker --loglevel=info
    flask --app examples/celery_app.py run --port 8000

A broker that is down makes POST /chat answer 503, naming it, with nothing recorded.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import _chat
from celery import Celery
from flask import Flask, Response, jsonify, request

from agentkit.celery import AgentTasks, BrokerUnavailableError
from agentkit.stores.postgres import PostgresJobStore
from agentkit.web import SSE_HEADERS

DATABASE_URL = os.environ.get("CHAT_DATABASE_URL") or ""
if not DATABASE_URL:
    raise SystemExit("set CHAT_DATABASE_URL to a PostgreSQL URL: the web app and the workers share its sessions")
REDIS_URL = os.environ.get("CHAT_REDIS_URL", "redis://127.0.0.1:6379/0")

celery = Celery("celery_app", broker=REDIS_URL, backend=REDIS_URL)
jobs = PostgresJobStore(DATABASE_URL, schema=os.environ.get("CHAT_DB_SCHEMA", "agentkit"))
tasks = AgentTasks(celery, store=_chat.make_store(), job_store=jobs, sessions=_chat.session_settings)


def create_app() -> Flask:
    web = Flask(__name__)
    atexit.register(tasks.pool.close)

    def error(status: int) -> Any:
        return lambda exc: (jsonify(error=str(exc)), status)  # agentkit's messages say what to do

    for kind in _chat.CLIENT_ERRORS:
        web.register_error_handler(kind, error(400))
    for kind in _chat.CONFLICT_ERRORS:
        web.register_error_handler(kind, error(409))
    web.register_error_handler(BrokerUnavailableError, error(503))

    def accepted(cid: str, turn_id: str, status: int = 202) -> tuple[Response, int]:
        return jsonify(session_id=cid, turn_id=turn_id, stream=f"/chat/{cid}/turns/{turn_id}/stream"), status

    @web.post("/chat/<cid>")
    def chat(cid: str) -> tuple[Response, int]:
        return accepted(cid, tasks.enqueue_ask(cid, _chat.message_of(request.get_json(silent=True))))

    @web.post("/chat/<cid>/resume")
    def resume(cid: str) -> tuple[Response, int]:
        return accepted(cid, tasks.enqueue_generate(cid))

    @web.get("/chat/<cid>/turns/<tid>/stream")
    def stream(cid: str, tid: str) -> Response:
        last = request.headers.get("Last-Event-ID") or "0"  # a browser reconnecting goes on from there
        if not last.isdigit():
            raise ValueError(f"Last-Event-ID must be the id of an event of the stream, not {last!r}")
        after = int(last)
        return Response(tasks.sse_turn(cid, tid, after=after, heartbeat=_chat.heartbeat()),
                        mimetype="text/event-stream", headers=SSE_HEADERS)

    @web.post("/chat/<cid>/turns/<tid>/cancel")
    def cancel(cid: str, tid: str) -> Response:
        return jsonify(cancelled=tasks.cancel_turn(cid, tid, reason="cancelled by the user"))

    @web.get("/chat/<cid>")
    def history(cid: str) -> Response:
        with tasks.pool.session(cid) as session:
            return jsonify(_chat.history(session))

    @web.get("/chat/<cid>/approvals")
    def approvals(cid: str) -> Response:
        with tasks.pool.session(cid) as session:
            return jsonify(_chat.pending(session))

    @web.post("/chat/<cid>/approvals/<approval_id>/approve")
    def approve(cid: str, approval_id: str) -> tuple[Response, int]:
        body = request.get_json(silent=True) or {}
        with tasks.pool.session(cid) as session:  # decided against the state in PostgreSQL (409 if stale)
            session.approve(approval_id, remember=bool(body.get("remember", False)), note=body.get("note"))
        return accepted(cid, tasks.enqueue_generate(cid), 200)

    @web.post("/chat/<cid>/approvals/<approval_id>/deny")
    def deny(cid: str, approval_id: str) -> tuple[Response, int]:
        body = request.get_json(silent=True) or {}
        with tasks.pool.session(cid) as session:
            session.deny(approval_id, reason=str(body.get("reason") or "denied by the reviewer"))
        return accepted(cid, tasks.enqueue_generate(cid), 200)

    return web
