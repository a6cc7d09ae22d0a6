"""A chat service in Flask over agentkit: one SessionPool, plain sync views.

Routes (``<cid>`` is a conversation id: letters, digits, ``-`` and ``_``):
  POST /chat/<cid>                     {"message": "..."} -> {"answer": "...", ...}
  POST /chat/<cid>/stream              {"message": "..."} -> Server-Sent Events
  GET  /chat/<cid>                     the conversation so far
  GET  /chat/<cid>/approvals           tool calls waiting for a person's answer
  POST /chat/<cid>/approvals/<id>/approve  {"remember": false, "note": "..."}
  POST /chat/<cid>/approvals/<id>/deny     {"reason": "..."}
  GET  /chat/<cid>/inputs              questions a tool asked a person (ctx.ask_human)
  POST /chat/<cid>/inputs/<id>/answer  {"value": <JSON matching the question's schema>}
  POST /chat/<cid>/inputs/<id>/cancel  {"reason": "..."}

A POST that ends with a tool asking a person answers ``"finish_reason":
"input-required"``; answering (or cancelling) the question resumes the generation and
returns its answer. An answer that breaks the schema is a 422 (the question stays
pending), an unknown question id a 404, one answered, cancelled or expired already a 409
(of two answers at once, from any workers, one wins); a decided approval is a 409 too.

Run: python examples/flask_app.py --port 8000 [--store DIR]   (a threaded server on
127.0.0.1). In production, several worker processes:
``gunicorn -w 4 --chdir examples 'flask_app:create_app()'`` (one store directory, or
``$CHAT_DATABASE_URL`` for PostgreSQL and several hosts; see docs/deployment.md).
"""

from __future__ import annotations

import atexit

import _chat
from flask import Flask, Response, jsonify, request

from agentkit import SessionPool
from agentkit.web import SSE_HEADERS, sse


def create_app(store_dir: str | None = None, pool: SessionPool | None = None) -> Flask:
    app = Flask(__name__)
    if pool is None:
        pool = _chat.make_pool(store_dir)
    atexit.register(pool.close)

    def refused(exc: Exception) -> tuple[Response, int]:
        return jsonify(error=str(exc)), _chat.status_of(exc)  # agentkit's messages say what was wrong

    for error in _chat.HANDLED_ERRORS:
        app.register_error_handler(error, refused)

    @app.post("/chat/<cid>")
    def ask(cid: str) -> Response:
        message = _chat.message_of(request.get_json(silent=True))
        with pool.session(cid) as session:
            return jsonify(_chat.answer(session.ask(message)))

    @app.post("/chat/<cid>/stream")
    def ask_stream(cid: str) -> Response:
        message = _chat.message_of(request.get_json(silent=True))
        # the stream outlives this view: the pool keeps the session open while it runs
        stream = pool.get(cid).ask_stream(message)
        return Response(sse(stream, heartbeat=_chat.heartbeat()), mimetype="text/event-stream",
                        headers=SSE_HEADERS)

    @app.get("/chat/<cid>")
    def history(cid: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.history(session))

    @app.get("/chat/<cid>/approvals")
    def approvals(cid: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.pending(session))

    @app.post("/chat/<cid>/approvals/<approval_id>/approve")
    def approve(cid: str, approval_id: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.approve(session, approval_id, request.get_json(silent=True) or {}))

    @app.post("/chat/<cid>/approvals/<approval_id>/deny")
    def deny(cid: str, approval_id: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.deny(session, approval_id, request.get_json(silent=True) or {}))

    @app.get("/chat/<cid>/inputs")
    def inputs(cid: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.inputs(session))

    @app.post("/chat/<cid>/inputs/<request_id>/answer")
    def answer_input(cid: str, request_id: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.answer_input(session, request_id, request.get_json(silent=True)))

    @app.post("/chat/<cid>/inputs/<request_id>/cancel")
    def cancel_input(cid: str, request_id: str) -> Response:
        with pool.session(cid) as session:
            return jsonify(_chat.cancel_input(session, request_id, request.get_json(silent=True)))

    return app


if __name__ == "__main__":
    args = _chat.command_line(__doc__)
    create_app(args.store).run(host="127.0.0.1", port=args.port, threaded=True)
