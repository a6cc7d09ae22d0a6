"""``agentkit chat`` under a real pseudo-terminal: keystrokes in, screen out.

The chat runs as a subprocess whose controlling terminal is the pty's slave side, so a
Ctrl-C typed into the master reaches it as SIGINT from the terminal, exactly as at a
keyboard. The offline demo model (``--model echo``) answers.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentkit
from agentkit import FileEventStore
from agentkit.context import build_model_messages

pytestmark = pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")
_ROOT = str(Path(__file__).resolve().parent.parent)  # this checkout's agentkit, from any cwd
_GUARD = 60.0  # seconds before a missing screen text fails the test (never a timing check)

# Become a session leader and take the pty (our stdin) as the controlling terminal, so the
# terminal's Ctrl-C is delivered as SIGINT; then run the agentkit command.
_LAUNCH = (
    "import fcntl, os, signal, sys, termios\n"
    # Ctrl-C interrupts as at a terminal, even when the tests were started where SIGINT is
    # ignored (a background job of a non-interactive shell)
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "os.setsid()\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'agentkit.cli', *sys.argv[1:]])\n"
)

_TOOLS_MODULE = '''
from agentkit import tool

@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@tool
def delete_file(path: str) -> str:
    """Delete a file (a write: needs approval)."""
    return "deleted " + path

@tool
def write_note(text: str) -> str:
    """Write a note (a write: needs approval)."""
    return "noted"

TOOLS = [add, delete_file, write_note]
'''


class Terminal:
    """A process on a pty: ``type`` keystrokes, ``expect`` text on the screen."""

    def __init__(self, *args: str, cwd: str) -> None:
        import pty

        self.master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY",
                                                                  "ANTHROPIC_API_KEY")}
        env.update(TERM="dumb", PYTHONPATH=os.pathsep.join([_ROOT, env.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
            close_fds=True,
        )
        os.close(slave)
        self.screen = ""  # everything shown so far, escape sequences removed
        self._seen = 0  # expect() looks after this position

    def _pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the process ended and closed the terminal
            return False
        if not data:
            return False
        self.screen += _ANSI.sub("", data.decode(errors="replace"))
        return True

    def expect(self, text: str) -> str:
        """Wait until ``text`` appears after the last match; returns the screen up to it."""
        deadline = time.monotonic() + _GUARD
        while True:
            at = self.screen.find(text, self._seen)
            if at >= 0:
                shown, self._seen = self.screen[self._seen : at + len(text)], at + len(text)
                return shown
            if time.monotonic() > deadline or not self._pump(0.2):
                raise AssertionError(f"{text!r} never appeared; the screen after the last match:\n"
                                     f"{self.screen[self._seen:]}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def line(self, text: str, *, at_prompt: bool = True) -> None:
        """Type ``text`` and Enter, at the next prompt (``at_prompt``) or at once."""
        if at_prompt:
            self.expect("> ")
        self.type(text + "\r")

    def interrupt_at_prompt(self) -> None:
        """Type Ctrl-C at a prompt until the REPL shows its hint. A SIGINT that lands in
        the instant between the prompt and readline's wait for a key (a typist faster
        than any human) is seen only with the next key (CPython's input()); a second
        Ctrl-C then counts as the same one."""
        self._interrupt_until(lambda: "Ctrl-C again" in self.screen[self._seen:])

    def interrupt_until_exit(self) -> None:
        """Type Ctrl-C until the process ends (the REPL ignores Ctrl-C once it quits)."""
        self._interrupt_until(lambda: self.proc.poll() is not None)

    def _interrupt_until(self, done) -> None:
        for _ in range(5):
            self.type("\x03")
            deadline = time.monotonic() + 5.0
            while not done() and time.monotonic() < deadline:
                if not self._pump(0.1):  # the terminal closed: the process is ending
                    self.proc.wait(timeout=_GUARD)
            if done():
                return
        raise AssertionError(f"Ctrl-C had no effect:\n{self.screen[self._seen:]}")

    def wait(self) -> int:
        deadline = time.monotonic() + _GUARD
        while self._pump(0.2) and time.monotonic() < deadline:
            pass
        code = self.proc.wait(timeout=_GUARD)
        os.close(self.master)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def terminals(tmp_path):
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        t = Terminal(*args, cwd=str(tmp_path))
        started.append(t)
        return t

    yield start
    for t in started:
        t.kill()


def _model_view(store_dir, session_id):
    stored = FileEventStore(store_dir).load(session_id)
    assert stored is not None
    return [(m.role, m.content[0].text if hasattr(m.content[0], "text") else m.content[0].kind)
            for m in build_model_messages(stored.events)]


def test_slash_commands_streaming_and_tool_calls(terminals, tmp_path):
    (tmp_path / "mytools.py").write_text(_TOOLS_MODULE)
    t = terminals("chat", "--model", "echo", "--tools", "mytools:TOOLS")
    t.expect("model echo")
    t.line("hello there")
    t.expect("echo: hello there")
    t.line("/help")
    for command in ("/tools", "/history", "/compact", "/model", "/exit"):
        t.expect(command)
    t.line("/tools")
    t.expect("add: Add two numbers.")
    t.line('call add {"a": 2, "b": 40}')
    shown = t.expect('[tool] add {"a": 2, "b": 40}')
    assert "[approve]" not in shown  # read-only: ask-writes (the default) does not ask
    t.expect("[result] add: 42")
    t.expect("add returned: 42")
    t.line("/history")
    t.expect("user: hello there")
    t.expect("assistant: echo: hello there")
    t.expect("tool: [result] add: 42")
    t.line("/model")
    t.expect("model: echo")
    t.line("/model nonsense")
    t.expect("invalid model spec 'nonsense'")
    t.line("/frobnicate")
    t.expect("unknown command '/frobnicate'")
    t.line("//not a command")
    t.expect("echo: /not a command")
    t.line("/compact 1")
    if hasattr(agentkit.Session, "compact"):
        t.expect("compacted: the model now sees")
    else:
        t.expect("this build of agentkit has no compaction")
    t.line("/exit")
    assert t.wait() == 0


def test_ctrl_c_aborts_the_generation_not_the_repl_and_takes_the_message_back(terminals, tmp_path):
    store = str(tmp_path / "sessions")
    t = terminals("chat", "--session", "c1", "--store", store, "--model", "echo")
    t.line("count 1000000")  # one number every 0.1 s: it streams for more than a day
    t.expect("1 2 3")  # the answer is on the screen while the generation still runs
    t.type("\x03")
    t.expect("[interrupted]")
    t.expect("taken back")
    t.line("and now?")
    t.expect("echo: and now?")
    t.expect("> ")
    t.interrupt_at_prompt()  # at the prompt: a hint
    t.expect("Ctrl-C again")
    t.line("still here")
    t.expect("echo: still here")
    t.expect("> ")
    t.interrupt_at_prompt()
    t.expect("Ctrl-C again")
    t.expect("> ")
    t.interrupt_until_exit()  # the second one in a row quits
    assert t.wait() == 130
    assert "Traceback" not in t.screen
    stored = FileEventStore(store).load("c1")
    types = [e.type for e in stored.events]
    assert types[:3] == ["user-message", "control", "context-replaced"]  # kept in the log...
    # ...but the model never sees the aborted message glued to the next one
    assert _model_view(store, "c1") == [
        ("user", "and now?"), ("assistant", "echo: and now?"),
        ("user", "still here"), ("assistant", "echo: still here"),
    ]


def test_a_failed_turn_does_not_double_up_with_the_next_message(terminals, tmp_path):
    store = str(tmp_path / "sessions")
    t = terminals("chat", "--session", "f1", "--store", store, "--model", "echo")
    t.line("first")
    t.expect("echo: first")
    t.line("fail")
    t.expect("[error] ModelError: the echo model failed on purpose")
    t.line("second")
    t.expect("echo: second")  # not an answer to "fail second"
    t.line("/history")
    history = t.expect("assistant: echo: second")
    assert "user: fail" not in history
    t.line("/exit")
    assert t.wait() == 0
    assert _model_view(store, "f1") == [
        ("user", "first"), ("assistant", "echo: first"), ("user", "second"), ("assistant", "echo: second"),
    ]


def test_resume_across_two_runs_with_a_store(terminals, tmp_path):
    store = str(tmp_path / "sessions")
    first = terminals("chat", "--session", "r1", "--store", store, "--model", "echo")
    first.expect(f"session r1, saved in {store} (resume: --session r1 --store {store})")
    first.line("remember the number 7")
    first.expect("echo: remember the number 7")
    first.expect("> ")
    first.type("\x04")  # Ctrl-D quits too
    assert first.wait() == 0

    second = terminals("chat", "--session", "r1", "--store", store, "--model", "echo")
    second.expect("resumed: 2 earlier messages")
    second.line("/history")
    second.expect("user: remember the number 7")
    second.expect("assistant: echo: remember the number 7")
    second.line("what was it?")
    second.expect("echo: what was it?")
    second.line("/exit")
    assert second.wait() == 0
    assert [text for _, text in _model_view(store, "r1")] == [
        "remember the number 7", "echo: remember the number 7", "what was it?", "echo: what was it?",
    ]


def test_the_approval_prompt_yes_no_always(terminals, tmp_path):
    (tmp_path / "mytools.py").write_text(_TOOLS_MODULE)
    store = str(tmp_path / "sessions")
    args = ("chat", "--session", "a1", "--store", store, "--model", "echo", "--tools", "mytools:TOOLS")
    t = terminals(*args)
    t.line('call delete_file {"path": "a.txt"}')
    t.expect('[approve] delete_file {"path": "a.txt"}')
    t.expect("allow? [y]es / [n]o / [a]lways: ")
    t.line("n", at_prompt=False)
    t.expect("[error] delete_file: denied: denied at the terminal")  # the live view
    t.expect("delete_file returned (error): denied: denied at the terminal")
    t.line('call delete_file {"path": "b.txt"}')
    t.expect("allow? [y]es / [n]o / [a]lways: ")
    t.line("what?", at_prompt=False)
    t.expect("please answer y, n or a")
    t.line("y", at_prompt=False)
    t.expect("delete_file returned: deleted b.txt")
    t.line('call delete_file {"path": "c.txt"}')
    t.expect("allow? [y]es / [n]o / [a]lways: ")
    t.line("a", at_prompt=False)
    t.expect("delete_file returned: deleted c.txt")
    t.line('call delete_file {"path": "d.txt"}')  # always: not asked again
    assert "[approve]" not in t.expect("delete_file returned: deleted d.txt")
    t.line('call write_note {"text": "x"}')
    t.expect("allow? [y]es / [n]o / [a]lways: ")
    t.type("\x03")  # Ctrl-C at the question: no answer (a deny) and the generation stops
    t.expect("[interrupted]")
    t.expect("(denied: write_note; it will not run)")
    t.line("still here")
    # the interrupted question is not put again, and the next turn, which settles the
    # denied call, does not show it as a call made (or run) again
    next_turn = t.expect("echo: still here")
    assert "[approve]" not in next_turn and "write_note" not in next_turn, next_turn
    t.line("/history")  # a denied call is an [error] there, as in the live view
    t.expect("tool: [error] delete_file: denied: denied at the terminal")
    t.expect("tool: [error] write_note: denied: interrupted at the terminal (Ctrl-C)")
    t.line("/exit")
    assert t.wait() == 0

    again = terminals(*args)  # "always" was remembered by the session: it survives a resume
    again.line('call delete_file {"path": "e.txt"}')
    assert "[approve]" not in again.expect("delete_file returned: deleted e.txt")
    again.line("/exit")
    assert again.wait() == 0


def test_model_help_lists_the_spec_forms():
    out = subprocess.run([sys.executable, "-m", "agentkit.cli", "chat", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    flat = " ".join(out.stdout.split())
    for form in ("openai:<model>", "anthropic:<model>", "openai-compatible:<model>@<url>", "echo"):
        assert form in flat
    assert "--session" in flat and "--store" in flat


def test_bad_chat_arguments_are_clear(tmp_path):
    def chat(*args):
        env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_MODEL"}
        env["PYTHONPATH"] = _ROOT
        return subprocess.run([sys.executable, "-m", "agentkit.cli", "chat", *args], capture_output=True,
                              text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, cwd=tmp_path)

    out = chat("--session", "x", "--model", "echo")
    assert out.returncode == 2 and "--session 'x' needs --store DIR" in out.stderr
    out = chat()
    assert out.returncode != 0 and "--model echo" in out.stderr
    out = chat("--model", "echo", "--tools", "nomodule")
    assert out.returncode == 2 and "write 'json' or 'module:attribute'" in out.stderr
    out = chat("--model", "echo", "--tools", "no_such_module_here:X")
    assert out.returncode == 2 and "cannot load it" in out.stderr


def test_piped_chat_prints_only_the_answers(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "agentkit.cli", "chat", "--model", "echo", "--tools", "json"],
        input='one\n/tools\ncall json_validate {"json": "{}"}\n', capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "echo: one",
        "  json_validate: " + agentkit.json_tools()[0].description.splitlines()[0],
        "  json_transform: " + agentkit.json_tools()[1].description.splitlines()[0],
        '[tool] json_validate {"json": "{}"}',
        "[result] json_validate: " + json.loads(json.dumps("valid JSON (object)")),
        "json_validate returned: valid JSON (object)",
    ]


def test_piped_chat_reads_approval_answers_from_its_input(tmp_path):
    (tmp_path / "mytools.py").write_text(_TOOLS_MODULE)
    out = subprocess.run(
        [sys.executable, "-m", "agentkit.cli", "chat", "--model", "echo", "--tools", "mytools:TOOLS"],
        input='call delete_file {"path": "a.txt"}\nmaybe\ny\ncall write_note {"text": "x"}\n',
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": _ROOT},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        '[approve] delete_file {"path": "a.txt"}',
        "allow? [y]es / [n]o / [a]lways: please answer y, n or a",
        "allow? [y]es / [n]o / [a]lways: " + '[tool] delete_file {"path": "a.txt"}',
        "[result] delete_file: deleted a.txt",
        "delete_file returned: deleted a.txt",
        '[approve] write_note {"text": "x"}',
        "allow? [y]es / [n]o / [a]lways: ",  # the input ended: no answer is a deny
        "(no answer: denied)",
        '[tool] write_note {"text": "x"}',
        "[error] write_note: denied: no answer at the terminal",
        "write_note returned (error): denied: no answer at the terminal",
    ]


def test_ctrl_c_in_a_piped_chat_ends_it_and_takes_the_message_back(tmp_path):
    import signal

    store = str(tmp_path / "sessions")
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from agentkit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "chat", "--session", "p1", "--store", store, "--model", "echo"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": _ROOT},
    )
    try:
        proc.stdin.write(b"count 1000000\n")
        proc.stdin.flush()
        shown = b""
        while b"1 2 3" not in shown:
            chunk = os.read(proc.stdout.fileno(), 1024)
            assert chunk, proc.stderr.read().decode()
            shown += chunk
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and b"interrupted" in err and b"Traceback" not in err
    assert [e.type for e in FileEventStore(store).load("p1").events] == ["user-message", "control", "context-replaced"]
    assert _model_view(store, "p1") == []
