"""A chat service in single-file Django over agentkit: one SessionPool, sync views,
``StreamingHttpResponse`` for Server-Sent Events. The routes are those of
``flask_app.py``:
  POST /chat/<cid>   POST /chat/<cid>/stream   GET /chat/<cid>   GET /chat/<cid>/approvals
  POST /chat/<cid>/approvals/<id>/approve      POST /chat/<cid>/approvals/<id>/deny
  GET /chat/<cid>/inputs   POST /chat/<cid>/inputs/<id>/answer   POST /chat/<cid>/inputs/<id>/cancel

Run: python examples/django_app.py runserver --noreload 127.0.0.1:8000
(the store directory is $CHAT_STORE_DIR, default ./chat-store). In production, several
worker processes: ``gunicorn -w 4 --chdir examples django_app:application`` (one store
directory, or $CHAT_DATABASE_URL for PostgreSQL and several hosts; see docs/deployment.md).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import _chat
import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="agentkit-example-not-secret",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost", "testserver"],
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
    DATABASES={},
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402 - after settings.configure
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.http import require_GET, require_POST  # noqa: E402

from agentkit import SessionPool  # noqa: E402
from agentkit.web import SSE_HEADERS, sse  # noqa: E402

POOL: SessionPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> SessionPool:
    """The process's pool, made on first use (tests may set POOL first). The first
    requests arrive together on the server's threads: without the lock, each could make
    a pool of its own, and one conversation would have a Session in each (every answer
    stored, but a request served by a stale one would not show the others' turns)."""
    global POOL
    if POOL is None:
        with _POOL_LOCK:
            if POOL is None:
                POOL = _chat.make_pool()
    return POOL


def _body(request: HttpRequest) -> Any:
    try:
        return json.loads(request.body or b"{}")
    except ValueError:
        return None


def _json(fn: Any) -> Any:
    """A view answering JSON, with a 400 for what the request did wrong and a 409 (or
    404, 422) for what the conversation refuses (``_chat.status_of``)."""
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        try:
            return fn(request, **kwargs)
        except _chat.HANDLED_ERRORS as exc:
            return JsonResponse({"error": str(exc)}, status=_chat.status_of(exc))
    return view


@require_POST
@_json
def ask(request: HttpRequest, cid: str) -> HttpResponse:
    message = _chat.message_of(_body(request))
    with pool().session(cid) as session:
        return JsonResponse(_chat.answer(session.ask(message)))


@require_POST
@_json
def ask_stream(request: HttpRequest, cid: str) -> HttpResponse:
    message = _chat.message_of(_body(request))
    stream = pool().get(cid).ask_stream(message)
    # Django closes the iterator when the client goes away: that cancels the generation
    response = StreamingHttpResponse(sse(stream, heartbeat=_chat.heartbeat()), content_type="text/event-stream")
    for name, value in SSE_HEADERS.items():
        response[name] = value
    return response


@require_GET
@_json
def history(request: HttpRequest, cid: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.history(session))


@require_GET
@_json
def approvals(request: HttpRequest, cid: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.pending(session))


@require_POST
@_json
def approve(request: HttpRequest, cid: str, approval_id: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.approve(session, approval_id, _body(request) or {}))


@require_POST
@_json
def deny(request: HttpRequest, cid: str, approval_id: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.deny(session, approval_id, _body(request) or {}))


@require_GET
@_json
def inputs(request: HttpRequest, cid: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.inputs(session))


@require_POST
@_json
def answer_input(request: HttpRequest, cid: str, request_id: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.answer_input(session, request_id, _body(request)))


@require_POST
@_json
def cancel_input(request: HttpRequest, cid: str, request_id: str) -> HttpResponse:
    with pool().session(cid) as session:
        return JsonResponse(_chat.cancel_input(session, request_id, _body(request)))


urlpatterns = [
    path("chat/<str:cid>", lambda request, cid: (ask if request.method == "POST" else history)(request, cid=cid)),
    path("chat/<str:cid>/stream", ask_stream),
    path("chat/<str:cid>/approvals", approvals),
    path("chat/<str:cid>/approvals/<str:approval_id>/approve", approve),
    path("chat/<str:cid>/approvals/<str:approval_id>/deny", deny),
    path("chat/<str:cid>/inputs", inputs),
    path("chat/<str:cid>/inputs/<str:request_id>/answer", answer_input),
    path("chat/<str:cid>/inputs/<str:request_id>/cancel", cancel_input),
]

application = get_wsgi_application()

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
