"""Tool approvals at the terminal: the approver ``agentkit chat`` gives its session."""

from __future__ import annotations

import threading

from ..approvals._policy import ApprovalDecision, ApprovalMode, ApprovalPolicy, ApprovalRequest
from ..errors import ConfigurationError
from ._render import Screen, read_answer, short

_MODES: tuple[ApprovalMode, ...] = ("autopilot", "ask-writes", "ask-all", "read-only")
_NOTE = "agentkit chat"


def approval_policy(mode: str | None) -> ApprovalPolicy:
    """The policy for ``--approval MODE`` (default ``ask-writes``)."""
    for known in _MODES:
        if (mode or "ask-writes") == known:
            return ApprovalPolicy(mode=known)
    raise ConfigurationError(f"--approval {mode!r}: choose one of {', '.join(_MODES)}")


class TerminalApprover:
    """Asks ``[y]es / [n]o / [a]lways`` at the terminal when a tool call needs approval.

    The session calls it on a thread of its own while the REPL waits for events. ``a``
    approves with ``remember=True``: the session commits the rule, so later calls of
    that tool run without asking, also after a resume. ``abort`` (the REPL sets a new
    one per turn, and sets it on Ctrl-C) makes a pending question give up: a deny."""

    def __init__(self, screen: Screen, *, interactive: bool) -> None:
        self._screen = screen
        self._interactive = interactive
        self.abort = threading.Event()
        self._asking = 0
        self._idle = threading.Condition()

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        abort = self.abort  # this turn's: a later turn's does not revive this question
        with self._idle:
            self._asking += 1
        try:
            return self._ask(request, abort)
        finally:
            with self._idle:
                self._asking -= 1
                self._idle.notify_all()

    def settle(self) -> None:
        """Wait until no question is being asked (after ``abort`` was set), so that the
        REPL's prompt is the only reader of the terminal again."""
        with self._idle:
            while self._asking:
                try:
                    self._idle.wait()
                except KeyboardInterrupt:
                    continue

    def _ask(self, request: ApprovalRequest, abort: threading.Event) -> ApprovalDecision:
        self._screen.line(f"[approve] {request.tool_name} {short(request.input)}")
        while True:
            self._screen.write("allow? [y]es / [n]o / [a]lways: ")
            answer = read_answer(self._interactive, abort)
            if answer is None:
                if not abort.is_set():  # the input ended (an aborted question says nothing)
                    self._screen.line("(no answer: denied)")
                return ApprovalDecision.deny("no answer at the terminal", note=_NOTE)
            self._screen.typed()
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return ApprovalDecision.approve(note=_NOTE)
            if choice in ("n", "no"):
                return ApprovalDecision.deny("denied at the terminal", note=_NOTE)
            if choice in ("a", "always"):
                return ApprovalDecision.approve(remember=True, note=_NOTE)
            self._screen.line("please answer y, n or a")
