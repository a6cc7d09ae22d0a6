"""Real Redis and real Celery workers for the Celery tests (and bench/celery_jobs.py).

- :class:`Redis`: Debian's ``redis-server`` on a free 127.0.0.1 port, in a temp dir,
  without persistence (``--save '' --appendonly no``); :meth:`Redis.restart` brings it back
  on the same port (a restarted broker), :meth:`Redis.stop` takes it away (a broker down).
- :class:`Worker`: ``celery -A <module> worker`` as a subprocess in a process group of its
  own (prefork or threads pool, ``--concurrency``), ready once it answers a ping;
  :meth:`Worker.kill` SIGKILLs the whole group (a worker host dying), :meth:`Worker.stop`
  asks it to finish its tasks and leave.
- :class:`Rig`: a Redis, a PostgreSQL schema of its own and the settings a worker's app
  module reads from the environment (``tests/_celery_app.py`` is the one these tests use;
  :func:`Rig.tasks` builds the same app in the test process).

The ``redis``/``rig`` fixtures are in tests/conftest.py. Without redis-server or the
``celery`` package a test skips, saying what to install; in CI (``AGENTKIT_CI=1``) it fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _procs import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

HOW_TO = (
    "the Celery tests need redis-server and the celery extra: on Debian/Ubuntu "
    "`apt-get install -y redis-server` and `pip install -e '.[celery,postgres]'`. "
    "In CI (AGENTKIT_CI=1) they fail instead of skipping."
)


def what_is_missing() -> str | None:
    """None when redis-server and the celery and redis packages are here, else what lacks."""
    missing = []
    if find_redis() is None:
        missing.append("redis-server")
    for module in ("celery", "redis"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"the Python package {module!r}")
    return None if not missing else f"missing {' and '.join(missing)}: {HOW_TO}"


def find_redis() -> str | None:
    """The redis-server binary (Debian's /usr/bin/redis-server, or one on PATH)."""
    if os.path.isfile("/usr/bin/redis-server"):
        return "/usr/bin/redis-server"
    return shutil.which("redis-server")


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60.0, interval: float = 0.05) -> Any:
    """Poll ``condition()`` until it returns something truthy (returned); AssertionError
    naming ``what`` after ``timeout`` seconds (a last guard: tests wait on conditions)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class Redis:
    """One redis-server on 127.0.0.1 (no persistence), started at construction."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_redis() or "redis-server"
        self.dir = tempfile.mkdtemp(prefix="agentkit-redis-")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = os.path.join(self.dir, "redis.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self.dir, "--protected-mode", "no", "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        wait_for(self.answers, f"redis-server on port {self.port} (log: {self.log})", timeout=30)

    def answers(self) -> bool:
        """True when the server answers PING."""
        import redis

        try:
            return bool(redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5,
                                    socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        """Stop the server (it loses everything: no persistence)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def restart(self) -> None:
        """Stop, then start again on the same port (empty)."""
        self.stop()
        self.start()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Worker:
    """One ``celery worker`` process (and its pool's children) in its own process group."""

    def __init__(self, module: str, env: dict[str, str], *, pool: str = "prefork", concurrency: int = 2,
                 name: str = "w1", log_dir: str | None = None, path: str = HERE) -> None:
        self.module = module
        self.name = f"{name}@127.0.0.1"
        self.pool = pool
        self.concurrency = concurrency
        self.log = os.path.join(log_dir or tempfile.gettempdir(), f"celery-{name}-{os.getpid()}.log")
        self.env = {**os.environ, **env,
                    "PYTHONPATH": os.pathsep.join([path, ROOT, os.environ.get("PYTHONPATH", "")])}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        cmd = [sys.executable, "-m", "celery", "-A", self.module, "worker", "-P", self.pool,
               "-c", str(self.concurrency), "-n", self.name, "--without-gossip", "--without-mingle",
               "--without-heartbeat", "-l", "INFO"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def wait_ready(self, app: Any, timeout: float = 90.0) -> Worker:
        """Wait until the worker answers a ping through the broker."""

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"celery worker {self.name} exited ({self.proc.returncode}): {self.tail()}")
            try:
                return bool(app.control.ping(destination=[self.name], timeout=0.5))
            except Exception:  # noqa: BLE001 - the broker may still be starting
                return False

        wait_for(ready, f"celery worker {self.name} to answer a ping ({self.log})", timeout=timeout)
        return self

    def tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as fh:
                return fh.read()[-chars:]
        except OSError:
            return ""

    def children(self) -> list[int]:
        """The pids of the worker's pool processes (prefork), from /proc."""
        if self.proc is None:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.proc.pid:
                    found.append(int(entry))
        return found

    def kill(self) -> None:
        """SIGKILL the worker and its pool's children (a host dying). The jobs' own
        processes run in groups of their own and are not killed."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown (SIGTERM: finish the tasks at hand), then SIGKILL the group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class Rig:
    """A Redis, a PostgreSQL schema and the workers started on them, for one test."""

    def __init__(self, redis: Redis, pg: Any, *, module: str = "_celery_app", **settings: Any) -> None:
        self.redis = redis
        self.pg = pg
        self.schema = pg.fresh_schema()
        self.module = module
        self.dir = tempfile.mkdtemp(prefix="agentkit-celery-")
        self.settings = {"visibility_timeout": 300.0, "heartbeat": 2.0, "store_retry_for": 60.0, **settings}
        self.workers: list[Worker] = []
        self._made: list[Any] = []

    @property
    def env(self) -> dict[str, str]:
        """What a worker's app module reads (tests/_celery_app.py)."""
        return {
            "AGENTKIT_CELERY_BROKER": self.redis.url,
            "AGENTKIT_CELERY_PG": self.pg.conninfo,
            "AGENTKIT_CELERY_SCHEMA": self.schema,
            "AGENTKIT_CELERY_SETTINGS": repr(self.settings),
        }

    def tasks(self, **overrides: Any) -> Any:
        """The app module's ``make()`` in this process: (app, tasks, store, job_store)."""
        module = __import__(self.module)
        made = module.make(self.redis.url, self.pg.conninfo, self.schema, **{**self.settings, **overrides})
        self._made.append(made)
        return made

    def worker(self, *, pool: str = "prefork", concurrency: int = 2, name: str | None = None,
               ready: bool = True) -> Worker:
        w = Worker(self.module, self.env, pool=pool, concurrency=concurrency,
                   name=name or f"w{len(self.workers) + 1}", log_dir=self.dir)
        self.workers.append(w)
        w.start()
        if ready:
            w.wait_ready(self.tasks()[0] if not self._made else self._made[0][0])
        return w

    def close(self) -> None:
        for w in self.workers:
            w.kill()  # a test's jobs have ended (or are left to end on their own)
        for made in self._made:
            for closable in made[2:]:
                closable.close()
        shutil.rmtree(self.dir, ignore_errors=True)
