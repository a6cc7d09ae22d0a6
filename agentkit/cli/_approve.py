"""Tool approvals at the terminal: the approver ``agentkit chat`` gives its session."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import ConfigurationError
from ._render import Screen, read_answer, short

_APPROVAL_MODES = ("autopilot", "ask-writes", "ask-all", "read-only")


class TerminalApprover:
    """Asks ``[y]es / [n]o / [a]lways`` at the terminal when a tool call needs approval.
    It is called on the generation's thread; ``abort`` (set on Ctrl-C) makes a pending
    question give up, which denies the call."""

    def __init__(self, screen: Screen, *, interactive: bool, abort: threading.Event) -> None:
        self._screen = screen
        self._interactive = interactive
        self._abort = abort
        self._always: set[str] = set()

    def options(self, mode: str | None) -> dict[str, Any]:
        """Session arguments that make a tool needing approval ask at this terminal."""
        import agentkit

        policy = getattr(agentkit, "ApprovalPolicy", None)
        if policy is None:
            if mode is not None:
                raise ConfigurationError(
                    f"--approval {mode}: this build of agentkit has no approvals (agentkit.ApprovalPolicy); "
                    "leave --approval out"
                )
            return {}
        if mode is not None and mode not in _APPROVAL_MODES:
            raise ConfigurationError(f"--approval {mode!r}: choose one of {', '.join(_APPROVAL_MODES)}")
        return {"approval": policy(mode=mode or "ask-writes"), "approver": self}

    def __call__(self, request: Any) -> Any:
        """The approver: asks ``[y]es / [n]o / [a]lways`` (called on the generation's thread)."""
        name = str(getattr(request, "tool_name", "?"))
        if name in self._always:
            return True
        self._screen.line(f"[approve] {name} {short(getattr(request, 'input', None))}")
        while True:
            self._screen.write("allow? [y]es / [n]o / [a]lways: ")
            answer = read_answer(self._interactive, self._abort)
            if answer is None:
                self._screen.line("(no answer: denied)")
                return False
            self._screen.typed()
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return True
            if choice in ("n", "no"):
                return False
            if choice in ("a", "always"):
                self._always.add(name)
                return _remember()
            self._screen.line("please answer y, n or a")


def _remember() -> Any:
    """The approver's answer for "always": an ``ApprovalDecision`` that remembers, where
    this build has one that takes ``remember``; else True (this REPL still remembers)."""
    import dataclasses

    import agentkit

    decision = getattr(agentkit, "ApprovalDecision", None)
    if not (isinstance(decision, type) and dataclasses.is_dataclass(decision)):
        return True
    make: Any = decision
    names = {f.name for f in dataclasses.fields(decision)}
    if "remember" not in names:
        return True
    kwargs: dict[str, Any] = {"remember": True}
    for key in ("approved", "approve", "allow", "allowed"):
        if key in names:
            kwargs[key] = True
    try:
        return make(**kwargs)
    except TypeError:
        return True
