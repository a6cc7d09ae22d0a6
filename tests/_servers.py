"""Throwaway local servers for the tests, one shape for each kind: start on 127.0.0.1,
wait until it answers, serve, stop.

- :class:`ThreadedHTTP`: a ``http.server`` handler served on a thread of the test process
  (the provider fakes, the sites the browser and HTTP tools visit).
- :class:`ServerProcess`: a server in a child process (gunicorn, uvicorn, Django, the
  examples): ``started()`` waits until it answers, failing with its output if it exits.

PostgreSQL has its own (``tests/_pg.py``, the ``pg_cluster`` fixture of conftest.py); the
MCP servers theirs (``tests/mcp_servers/helpers.py``, ``oauth_server.py``), built on these.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _procs import free_port, listening, stop, wait_for


class ThreadedHTTP:
    """A ``ThreadingHTTPServer`` bound on 127.0.0.1 (a free port) serving ``handler`` on a
    daemon thread from :meth:`start` until :meth:`stop` (or as a context manager).
    ``quiet``: errors of these types while answering are not reported (a client that hung
    up mid-answer); ``tls`` serves HTTPS."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, quiet: tuple[type[BaseException], ...] = (),
                 tls: ssl.SSLContext | None = None, poll_interval: float = 0.05) -> None:
        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], quiet):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": poll_interval},
                                        daemon=True)

    def start(self) -> ThreadedHTTP:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ThreadedHTTP:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerProcess:
    """A server started as a child process (``argv``) listening on 127.0.0.1:``port``;
    its output goes to ``log`` (a file) or, without one, its stderr to a pipe.
    :meth:`answers` says whether it is up (a TCP connect; override for more);
    :meth:`started` waits for that; :meth:`stop` ends it."""

    def __init__(self, argv: Sequence[str], *, port: int | None = None, env: dict[str, str] | None = None,
                 cwd: Path | str | None = None, log: Path | None = None) -> None:
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._log_fh = open(log, "wb") if log is not None else None  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(list(argv), env=env, cwd=cwd, stdout=self._log_fh or subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT if self._log_fh else subprocess.PIPE)

    def answers(self) -> bool:
        return listening(self.port)

    def output(self) -> str:
        """The end of what the server printed (once it has exited, for a pipe)."""
        if self.log is not None:
            return self.log.read_text(errors="replace")[-3000:]
        return self.proc.stderr.read().decode(errors="replace")[-3000:] if self.proc.stderr else ""

    def started(self, what: str, timeout: float = 60) -> ServerProcess:
        """Wait until the server answers; fail with its output if it exits first."""

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{what} exited: {self.output()}")
            return self.answers()

        wait_for(up, timeout=timeout, what=f"{what} to answer")
        return self

    def stop(self, timeout: float = 20) -> None:
        stop(self.proc, timeout)
        if self._log_fh is not None:
            self._log_fh.close()
