"""A small threaded HTTP server on 127.0.0.1 that answers scripted replies.

The provider fakes build on it: each test queues replies (JSON bodies, server-sent-event
streams, error bodies with status codes and headers) and afterwards reads
``server.requests`` to assert what the real SDK sent over the wire.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Union

from _procs import wait_for
from _servers import ThreadedHTTP

DROP = object()
"""Put ``(None, DROP)`` among a reply's ``events`` to cut the connection there, without
ending the chunked body (a server that crashed or a proxy that gave up)."""


@dataclass
class Trickle:
    """Put ``(None, Trickle(frame))`` among a reply's ``events`` to send ``frame`` (raw
    SSE bytes, e.g. ``b": keepalive\n\n"``) every ``every`` seconds until the client
    hangs up, ``stop`` is set or ``limit`` seconds pass, then go on with the events.
    ``sent`` counts the frames written; ``client_left`` says whether the client hung up."""

    frame: bytes
    every: float = 0.05
    limit: float = 30.0
    stop: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    client_left: threading.Event = field(default_factory=threading.Event)


@dataclass
class Reply:
    """One scripted HTTP answer.

    ``json`` sends a JSON body; ``events`` sends a ``text/event-stream`` of
    ``(event_name_or_None, data)`` pairs (``data`` is a str, or JSON-encoded); ``raw``
    sends bytes as they are; ``chunks`` streams bytes as they are, one HTTP chunk each,
    under ``headers``' content type (binary streams such as AWS event streams; gates and
    ``DROP`` work there as in ``events``). ``hang`` keeps the connection open this many seconds
    before the body. A ``threading.Event`` in ``events`` pauses the stream until it is set;
    ``DROP`` cuts the connection there.
    """

    status: int = 200
    json: Any = None
    events: Sequence[tuple[str | None, Any]] | None = None
    raw: bytes | None = None
    chunks: Sequence[Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0
    gates_passed: list[bool] = field(default_factory=list)
    """For each ``threading.Event`` among ``events``: whether it was set (the stream
    pauses there until it is, for up to 30 s)."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


Responder = Callable[[Recorded], Union[Reply, None]]


class FakeServer:
    """Serve queued :class:`Reply` objects (or ``responder(request)`` results) in order.

    Use as a context manager. ``url`` is the base URL; ``requests`` the recorded requests.
    """

    def __init__(self, responder: Responder | None = None, *,
                 check: Callable[[Recorded], Reply | None] | None = None) -> None:
        self.replies: deque[Reply | Responder] = deque()
        self.requests: list[Recorded] = []
        self.connections = 0
        """How many TCP connections clients opened."""
        self.responder = responder
        self.check = check
        """A validator run before replying; a Reply it returns is sent instead."""
        self._lock = threading.Lock()
        self._closing = threading.Event()  # ends a reply's hang when the server stops
        self._http = ThreadedHTTP(self._handler_class(), quiet=(ConnectionError, TimeoutError), poll_interval=0.02)

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> FakeServer:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._http.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.port}"

    def add(self, *replies: Reply | Responder) -> FakeServer:
        """Queue replies (or callables returning one) for the next requests."""
        with self._lock:
            self.replies.extend(replies)
        return self

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        return [r.body for r in self.requests]

    def wait_for_requests(self, n: int, timeout: float = 30.0) -> None:
        wait_for(lambda: len(self.requests) >= n, timeout, f"{n} request(s) (got {len(self.requests)} so far)")

    # -- serving -----------------------------------------------------------------------

    def _next_reply(self, rec: Recorded) -> Reply:
        with self._lock:
            self.requests.append(rec)
            if self.check is not None:
                rejected = self.check(rec)
                if rejected is not None:
                    return rejected
            item: Reply | Responder | None = self.replies.popleft() if self.replies else self.responder
        if item is None:
            return Reply(status=500, json={"error": {"message": "fake server: no reply queued"}})
        if callable(item) and not isinstance(item, Reply):
            result = item(rec)
            if result is None:
                return Reply(status=500, json={"error": {"message": "fake server: responder gave None"}})
            return result
        return item

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def setup(self) -> None:
                with fake._lock:
                    fake.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                rec = Recorded(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                self._send(fake._next_reply(rec))

            do_GET = do_POST  # noqa: N815

            def _send(self, reply: Reply) -> None:
                if reply.hang:
                    fake._closing.wait(reply.hang)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.chunks is not None:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for data in reply.chunks:
                        if not self._stream_item(reply, data):
                            return
                        if isinstance(data, bytes):
                            self._chunk(data)
                    self._chunk(b"")
                    return
                if reply.events is not None:
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    try:
                        for name, data in reply.events:
                            if not self._stream_item(reply, data):
                                return
                            if isinstance(data, (threading.Event, Trickle)):
                                continue
                            text = data if isinstance(data, str) else json.dumps(data)
                            frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                            self._chunk(frame.encode("utf-8"))
                        self._chunk(b"")
                    except OSError:  # the client hung up before a trickle began: it left all the same
                        for data in reply.events:
                            if isinstance(data[1], Trickle):
                                data[1].client_left.set()
                        self.close_connection = True
                    return
                if reply.raw is not None:
                    payload = reply.raw
                    ctype = "application/octet-stream"
                else:
                    payload = json.dumps(reply.json).encode("utf-8")
                    ctype = "application/json"
                if "content-type" not in {k.lower() for k in reply.headers}:
                    self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

            def _stream_item(self, reply: Reply, data: Any) -> bool:
                """Pass a gate or a trickle, or cut the connection at ``DROP``; False
                when the stream ends here."""
                if isinstance(data, threading.Event):  # a gate: pause the stream here
                    reply.gates_passed.append(data.wait(30.0))
                elif isinstance(data, Trickle):
                    return self._trickle(data)
                elif data is DROP:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return False
                return True

            def _trickle(self, trickle: Trickle) -> bool:
                deadline = time.monotonic() + trickle.limit
                while not trickle.stop.is_set() and time.monotonic() < deadline:
                    try:
                        self._chunk(trickle.frame)
                    except OSError:  # the client hung up
                        trickle.client_left.set()
                        self.close_connection = True
                        return False
                    trickle.sent += 1
                    trickle.stop.wait(trickle.every)
                return True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
                self.wfile.flush()

        return Handler
