"""``agentkit chat``: the REPL.

Each line typed is a user message; the answer streams as the model writes it (the
session's :meth:`~agentkit.Session.stream`). Lines starting with ``/`` are commands.
Ctrl-C while an answer is written aborts that generation (the REPL goes on); Ctrl-C
twice at the prompt, ``/exit`` or Ctrl-D quits.

A failed turn (an error, or Ctrl-C before the model answered) leaves no dangling user
message: the message stays in the log, as everything does, but a ``context-replaced``
event takes it back out of what the model sees, so the next message does not arrive
glued to it. A turn the model answered in part (it called tools) keeps its message.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..context._projection import build_model_messages
from ..errors import AgentkitError, CancelledError, SessionError
from ..events import AssistantMessageEvent, ContextReplacedEvent, Event
from ..models.registry import get_model
from ..session._session import Session
from ..stores.base import EventStore
from ..streaming._events import GenerationEndEvent
from ..streaming._stream import AgentStream
from ._approve import _NOTE, TerminalApprover, approval_policy
from ._render import Screen

_COMMANDS = (
    ("/help", "this list"),
    ("/tools", "the tools the model may call"),
    ("/history", "the conversation as the model sees it"),
    ("/compact [N]", "summarise the conversation but for its last N events"),
    ("/model [SPEC]", "show the model, or use SPEC from the next message on"),
    ("/exit", "quit (also /quit, Ctrl-D, or Ctrl-C twice at the prompt)"),
)


def run_chat(
    *,
    spec: str,
    session_id: str | None,
    store: EventStore | None,
    store_dir: str | None,
    system: str | None,
    tools: Sequence[Any],
    approval: str | None,
) -> int:
    """Open (or resume) the session and run the REPL on this terminal until it quits."""
    interactive = sys.stdin.isatty()
    repl = _Repl(Screen(sys.stdout), interactive=interactive, spec=spec, tools=tools)
    kwargs: dict[str, Any] = {"model": repl.model, "tools": tools, "system": system,
                              "approval": approval_policy(approval), "approver": repl.approver}
    if store is None:
        session = Session(**kwargs)
    elif session_id is None:
        session = Session(store=store, **kwargs)
    else:
        session = Session.open(session_id, store=store, **kwargs)
    if interactive:
        try:
            import readline  # noqa: F401 - line editing and history for input()
        except ImportError:  # pragma: no cover - e.g. Windows
            pass
    with session:
        repl.session = session
        repl.banner(store_dir)
        return repl.loop()


class _Repl:
    def __init__(self, screen: Screen, *, interactive: bool, spec: str, tools: Sequence[Any]) -> None:
        self.screen = screen
        self.interactive = interactive
        self.spec = spec
        self.model = get_model(spec)
        self.tools = list(tools)
        self.session: Session = None  # type: ignore[assignment]  # set by run_chat
        self.approver = TerminalApprover(screen, interactive=interactive)

    # -- the loop -----------------------------------------------------------------------

    def banner(self, store_dir: str | None) -> None:
        if not self.interactive:
            return  # piped: the output is the answers only
        sid = self.session.session_id
        where = (
            f"session {sid}, saved in {store_dir} (resume: --session {sid} --store {store_dir})"
            if store_dir else "not saved (pass --store DIR to keep it)"
        )
        self.screen.line(f"agentkit chat · model {self.spec} · {where}")
        earlier = len(self.session.model_messages())
        if earlier:
            self.screen.line(f"resumed: {earlier} earlier messages (/history shows them)")
        self.screen.line("/help lists the commands; Ctrl-C stops an answer")

    def _read(self) -> str | None:
        if self.interactive:
            try:
                return input("> ")
            except EOFError:
                return None
        line = sys.stdin.readline()
        return line if line else None

    def loop(self) -> int:
        interrupted = False
        while True:
            try:
                line = self._read()
            except UnicodeDecodeError as exc:
                self.screen.line(f"[error] that line is not valid text ({exc.reason}); nothing was sent")
                continue
            except KeyboardInterrupt:
                if not self.interactive:
                    raise
                if interrupted:  # the second in a row: quit, and let more Ctrl-Cs not disturb closing
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    self.screen.typed()
                    return 130
                interrupted = True
                self.screen.typed()
                self.screen.line("(Ctrl-C again, /exit or Ctrl-D quits)")
                continue
            interrupted = False
            if line is None:
                self.screen.end_line()
                return 0
            text = line.strip()
            if not text:
                continue
            try:
                if text.startswith("/") and not text.startswith("//"):
                    if not self.command(text):
                        return 0
                else:
                    self.turn(text[1:] if text.startswith("//") else text)
            except KeyboardInterrupt:  # between the steps of a turn, or in a command
                if not self.interactive:
                    raise
                self.screen.line("[interrupted]")
            except SessionError:
                raise  # closed or failed: the session refuses work
            except AgentkitError as exc:
                self.screen.line(f"[error] {exc}")

    def command(self, text: str) -> bool:
        """Run a slash command; False means quit."""
        name, _, arg = text.partition(" ")
        arg = arg.strip()
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            for usage, what in _COMMANDS:
                self.screen.line(f"  {usage:<15} {what}")
            self.screen.line("  //text          send a message that starts with /")
        elif name == "/tools":
            self._tools()
        elif name == "/history":
            self.screen.history(self.session.model_messages())
        elif name == "/compact":
            self._compact(arg)
        elif name == "/model":
            if arg:
                self.model, self.spec = get_model(arg), arg
            self.screen.line(f"model: {self.spec}")
        else:
            self.screen.line(f"unknown command {name!r}: /help lists the commands")
        return True

    def _tools(self) -> None:
        if not self.tools:
            self.screen.line("no tools (add some with --tools json or --tools module:attribute)")
        for t in self.tools:
            name = getattr(t, "name", type(t).__name__)
            description = str(getattr(t, "description", "") or "").strip().splitlines()
            self.screen.line(f"  {name}: {description[0] if description else ''}")

    def _compact(self, arg: str) -> None:
        compact = getattr(self.session, "compact", None)
        if compact is None:
            self.screen.line("this build of agentkit has no compaction (Session.compact): nothing was changed")
            return
        kwargs: dict[str, Any] = {"reason": "manual"}
        if arg:
            try:
                kwargs["keep_last"] = int(arg)
            except ValueError:
                self.screen.line(f"/compact takes a number of events to keep, not {arg!r}")
                return
        before = len(self.session.model_messages())
        if compact(**kwargs) is None:
            self.screen.line("nothing to compact: the conversation is within what is kept")
            return
        after = len(self.session.model_messages())
        self.screen.line(f"compacted: the model now sees {after} messages (was {before})")

    def turn(self, text: str) -> None:
        """Send ``text`` and stream the answer; Ctrl-C aborts it."""
        user = self.session.push_user_message(text)
        abort = self.approver.abort = threading.Event()  # set on Ctrl-C: a pending approval gives up
        stream = self.session.stream(model=self.model)
        error: BaseException | None = None
        interrupted = False
        try:
            for event in stream:
                self.screen.event(event)
                if isinstance(event, GenerationEndEvent):
                    error = event.error
        except KeyboardInterrupt:
            _close(stream)  # first: a pending approval stays pending (denied below), not "no answer"
            abort.set()  # then let the abandoned question go
            if self.interactive:  # (piped, it may be blocked reading: the chat ends below)
                self.approver.settle()
            error, interrupted = CancelledError("interrupted"), True
        try:
            self._after(user, error)
        finally:
            if interrupted and not self.interactive:
                raise KeyboardInterrupt  # piped input: Ctrl-C ends the chat

    def _after(self, user: Event, error: BaseException | None) -> None:
        """Report a failed turn and take its message back if the model did not answer it."""
        self.screen.end_line()
        if error is None:
            return
        if isinstance(error, CancelledError):
            self.screen.line("[interrupted]")
            # a question Ctrl-C cut short is a deny, not a question put again next turn
            for request in self.session.pending_approvals():
                self.session.deny(request.id, reason="interrupted at the terminal (Ctrl-C)", note=_NOTE)
                self.screen.line(f"(denied: {request.tool_name}; it will not run)")
                self.screen.reported.add(request.tool_call_id)  # the next turn settles it quietly
        else:
            self.screen.line(f"[error] {type(error).__name__}: {error}")
        if isinstance(error, SessionError):
            raise error
        if _take_back(self.session, user):
            self.screen.line("(the model did not answer that message; it was taken back: send it again to retry)")


def _close(stream: AgentStream) -> None:
    """Cancel the generation and wait for it to stop, even through more Ctrl-Cs."""
    while True:
        try:
            stream.close("interrupted at the terminal (Ctrl-C)")
            return
        except KeyboardInterrupt:
            continue


def _take_back(session: Session, user: Event) -> bool:
    """Remove the unanswered user message ``user`` from what the model sees (the log
    keeps it); False when the model answered it, even in part."""
    events = session.events
    if any(isinstance(e, AssistantMessageEvent) and e.seq > user.seq for e in events):
        return False
    view = build_model_messages(e for e in events if e.seq != user.seq)
    session.push_event(ContextReplacedEvent(messages=tuple(view), reason="turn-failed"))
    return True
