"""A throwaway PostgreSQL cluster for the tests and bench/store.py: initdb into a temp
dir, pg_ctl start on 127.0.0.1 with a free port. Runs the server binaries Debian's
``postgresql`` package installs (/usr/lib/postgresql/*/bin) or ones on PATH; as root,
through ``runuser -u postgres`` (initdb refuses to run as root)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import uuid

from _procs import free_port

HOW_TO = (
    "the PostgreSQL tests need the PostgreSQL server binaries (initdb, pg_ctl) and psycopg: "
    "on Debian/Ubuntu `apt-get install -y postgresql` and `pip install -e '.[postgres]'` "
    "(or set AGENTKIT_PG_BIN to the directory holding initdb). In CI (AGENTKIT_CI=1) they fail instead of skipping."
)


def find_bin_dir() -> str | None:
    """The directory holding initdb and pg_ctl, or None."""
    explicit = os.environ.get("AGENTKIT_PG_BIN")
    if explicit:  # only there
        ok = all(os.path.isfile(os.path.join(explicit, tool)) for tool in ("initdb", "pg_ctl"))
        return explicit if ok else None
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(os.path.dirname(found))
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "initdb")) and os.path.isfile(os.path.join(c, "pg_ctl")):
            return c
    return None


class Cluster:
    """One running PostgreSQL server in a temp dir; ``conninfo`` reaches it."""

    def __init__(self, bin_dir: str, *, fsync: bool = False) -> None:
        self.bin_dir = bin_dir
        self.dir = tempfile.mkdtemp(prefix="agentkit-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.port = free_port()
        self.user = "agentkit"
        self.conninfo = f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres"
        self.url = f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            os.chmod(self.dir, 0o777)
        self.fsync = fsync
        self._run("initdb", "-D", self.data, "-U", self.user, "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._as, os.path.join(self.bin_dir, tool), *args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            tail = ""
            if os.path.exists(self.log):
                with open(self.log, encoding="utf-8", errors="replace") as fh:
                    tail = fh.read()[-2000:]
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stdout}{res.stderr}{tail}")

    def start(self) -> None:
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync={'on' if self.fsync else 'off'} "
            f"-c max_connections=100 -c shared_buffers=16MB"
        )
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", opts, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def fresh_schema(self) -> str:
        """A schema name no test used yet (each test gets its own tables)."""
        return "t_" + uuid.uuid4().hex[:12]

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def freeze_and_cut_lock(pid: int, conninfo: str) -> None:
    """SIGSTOP ``pid``, then end the server side of the one turn lock held (its lock
    connection), as a network partition or a server-side timeout would."""
    import psycopg

    os.kill(pid, signal.SIGSTOP)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        (holder,) = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted").fetchall()
        conn.execute("SELECT pg_terminate_backend(%s)", holder)
