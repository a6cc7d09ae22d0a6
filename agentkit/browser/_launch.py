"""Starting and stopping a Chromium process (private).

The browser runs in its own process group (``setsid``), so stopping it ends its zygote,
renderer and utility processes too, and in its own temporary profile directory, removed
when it stops. It is spawned with ``posix_spawn``, which maps our pipe ends onto the fds
3 and 4 ``--remote-debugging-pipe`` expects without running Python code in the child
(``preexec_fn`` is unsafe in a program with threads, and agentkit always has some).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence

from ..errors import BrowserError

# Headless, quiet and offline apart from the pages asked for: no first-run UI, no
# background connections (update checks, sync, component downloads), no QUIC.
BASE_FLAGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-gpu",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--remote-debugging-pipe",
)


class BrowserProcess:
    """One running Chromium: its pid (also its process group id), the pipe ends to talk
    to it, and its temporary directory."""

    def __init__(self, executable: str, *, headless: bool, args: Sequence[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="agentkit-chromium-")
        self.log_path = os.path.join(self.dir, "chromium.log")
        flags = [*BASE_FLAGS, f"--user-data-dir={os.path.join(self.dir, 'profile')}"]
        if headless:
            flags.append("--headless")
        if os.geteuid() == 0:  # Chromium refuses to start its sandbox as root
            flags.append("--no-sandbox")
        to_browser = os.pipe()
        from_browser = os.pipe()
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            self.pid = os.posix_spawn(
                executable, [executable, *flags, *args, "about:blank"], dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, devnull, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                    (os.POSIX_SPAWN_DUP2, to_browser[0], 3),
                    (os.POSIX_SPAWN_DUP2, from_browser[1], 4),
                ],
                setsid=True,
            )
        except OSError as exc:
            os.close(to_browser[1])
            os.close(from_browser[0])
            shutil.rmtree(self.dir, ignore_errors=True)
            raise BrowserError(f"could not start {executable}: {exc}") from None
        finally:
            for fd in (devnull, log, to_browser[0], from_browser[1]):
                os.close(fd)
        self.write_fd = to_browser[1]
        self.read_fd = from_browser[0]
        self._status: int | None = None

    def exited(self) -> bool:
        """True once the browser's main process has exited. It is not reaped here, so its
        pid (the group id) cannot be reused before :meth:`stop` kills the group."""
        if self._status is None:
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped elsewhere
                return True
            return info is not None
        return True

    def log_tail(self, lines: int = 5) -> str:
        """The last lines the browser wrote to stderr (for start-up errors)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the browser to exit by itself, then kill its
        whole process group, reap it and remove its directory. Idempotent."""
        deadline = time.monotonic() + grace
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            os.killpg(self.pid, signal.SIGKILL)  # stragglers: renderers, zygotes, utilities
        except (ProcessLookupError, PermissionError):  # the group is gone already
            pass
        if self._status is None:
            try:
                _, self._status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped elsewhere
                self._status = -1
        shutil.rmtree(self.dir, ignore_errors=True)
