"""A chat service in FastAPI over agentkit: async routes over one SessionPool. The sync
runtime runs on worker threads (``ask_async``, ``sse_async``); the event loop never
blocks. The routes are those of ``flask_app.py``:
  POST /chat/<cid>   POST /chat/<cid>/stream   GET /chat/<cid>   GET /chat/<cid>/approvals
  POST /chat/<cid>/approvals/<id>/approve      POST /chat/<cid>/approvals/<id>/deny
  GET /chat/<cid>/inputs   POST /chat/<cid>/inputs/<id>/answer   POST /chat/<cid>/inputs/<id>/cancel

Run: python examples/fastapi_app.py --port 8000 [--store DIR]   (uvicorn on 127.0.0.1). In
production, several worker processes:
``uvicorn --workers 4 --app-dir examples --factory fastapi_app:create_app`` (one store
directory, or $CHAT_DATABASE_URL for PostgreSQL and several hosts; see docs/deployment.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import _chat
from anyio import to_thread
from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentkit import SessionPool
from agentkit.web import SSE_HEADERS, sse_async


def create_app(store_dir: str | None = None, pool: SessionPool | None = None) -> FastAPI:
    if pool is None:
        pool = _chat.make_pool(store_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await to_thread.run_sync(pool.close)

    app = FastAPI(lifespan=lifespan)

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=_chat.status_of(exc))

    for error in _chat.HANDLED_ERRORS:
        app.add_exception_handler(error, refused)

    @app.post("/chat/{cid}")
    async def ask(cid: str, body: Any = Body(None)) -> dict[str, Any]:
        message = _chat.message_of(body)
        # opening a session reads the store: on a worker thread, like the generation
        session = await to_thread.run_sync(pool.get, cid)
        return _chat.answer(await session.ask_async(message))

    @app.post("/chat/{cid}/stream")
    async def ask_stream(cid: str, body: Any = Body(None)) -> StreamingResponse:
        message = _chat.message_of(body)
        session = await to_thread.run_sync(pool.get, cid)
        stream = session.ask_stream(message)
        # a client that goes away cancels the response task: that cancels the generation
        return StreamingResponse(sse_async(stream, heartbeat=_chat.heartbeat()),
                                 media_type="text/event-stream", headers=SSE_HEADERS)

    @app.get("/chat/{cid}")
    async def history(cid: str) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.history(pool.get(cid)))

    @app.get("/chat/{cid}/approvals")
    async def approvals(cid: str) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.pending(pool.get(cid)))

    @app.post("/chat/{cid}/approvals/{approval_id}/approve")
    async def approve(cid: str, approval_id: str, body: Any = Body(None)) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.approve(pool.get(cid), approval_id, body or {}))

    @app.post("/chat/{cid}/approvals/{approval_id}/deny")
    async def deny(cid: str, approval_id: str, body: Any = Body(None)) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.deny(pool.get(cid), approval_id, body or {}))

    @app.get("/chat/{cid}/inputs")
    async def inputs(cid: str) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.inputs(pool.get(cid)))

    @app.post("/chat/{cid}/inputs/{request_id}/answer")
    async def answer_input(cid: str, request_id: str, body: Any = Body(None)) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.answer_input(pool.get(cid), request_id, body))

    @app.post("/chat/{cid}/inputs/{request_id}/cancel")
    async def cancel_input(cid: str, request_id: str, body: Any = Body(None)) -> dict[str, Any]:
        return await to_thread.run_sync(lambda: _chat.cancel_input(pool.get(cid), request_id, body))

    return app


if __name__ == "__main__":
    import uvicorn

    args = _chat.command_line(__doc__)
    uvicorn.run(create_app(args.store), host="127.0.0.1", port=args.port, log_level="warning")
