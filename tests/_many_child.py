"""One worker process of conversations shared through one store, for
tests/test_many_processes.py. ``<store>`` is ``file:<directory>`` or
``pg:<schema>:<conninfo>``. Every mode prints one JSON line on stdout when done.

``settle <store> <sid> <marker> <approve:0|1>``: open the session in a SessionPool,
approve its pending request when asked to, print ``{"ready": ...}``, wait for a line on
stdin (the parent releases every worker at once), then ``generate()``; print the answer.
``race <store> <sid> <marker> <approve|deny|generate>``: the same, but the decision (if
any) is made after the release, then ``generate()``.
``asks <store> <tag> <n> <sid,sid,...>``: two threads, each asking ``n`` times over the
given conversations through one pool; print every answer with its prompt and every error.
``push <store> <sid> <tag> <n>``: push ``n`` runtime events through a pooled session.
``stall <store> <sid> <marker>``: ask; the tool writes ``started`` to the marker, then
waits for ``<marker>.release`` before it returns; print the answer or the error (then,
after a line on stdin, ask ``again`` through the same pool and print that answer).
``txn <store> <sid> <marker>``: begin a transactional generation, print its handle, run
it; the model call writes ``model`` to the marker and waits for ``<marker>.release``, then
calls a tool that writes ``ran``; print the answer or the error.
``claim <store> <sid> <marker>``: open the session, print ``{"ready": true}``, read a
transaction's handle (``<generation id> <claim token>``) from stdin and run it; each
model call writes a line to the marker; print the answer or the error (after an answer,
wait for another line before closing).
``compact <store> <sid> <marker>``: compact keeping 2; the summary writes ``summarizing``
to the marker and waits for ``<marker>.release``; print what it covered (None: nothing).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _child
from _child import push_ticks, say
from _tools import calls_then_answers, outputs

from agentkit import AgentkitError, ApprovalPolicy, FunctionModel, Retention, SessionPool, ToolCall, ToolContext, tool
from agentkit.transactions import GenerationTransaction


def open_store(spec: str) -> Any:
    """The store ``spec`` names (a PostgreSQL store keeps two connections)."""
    return _child.open_store(spec, pool_size=2)


def echo_reply(request: Any) -> Any:
    """Answers ``answer: <prompt>``; a prompt ending in ``!`` goes through the slow tool."""
    last = request.messages[-1]
    if last.role == "user":
        if last.text.endswith("!"):
            return ToolCall("slow_echo", {"text": last.text})
        return "answer: " + last.text
    return "answer: " + outputs(last)


def refund_tools(marker: str, seconds: float) -> list[Any]:
    """The refund tool; while ``<marker>.hold`` exists it returns only once
    ``<marker>.release`` does."""

    @tool
    def refund(amount: int, ctx: ToolContext) -> str:
        """Refund an amount (a line in the marker file per run, with its idempotency key)."""
        with open(marker, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {ctx.idempotency_key}\n")
        time.sleep(seconds)
        while os.path.exists(marker + ".hold") and not os.path.exists(marker + ".release"):
            time.sleep(0.02)
        return f"refunded {amount}"

    return [refund]


def main(mode: str, spec: str, *args: str) -> None:
    store = open_store(spec)
    if mode in ("settle", "race"):
        sid, marker, verb = args

        def refund_reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "user":
                return ToolCall("refund", {"amount": 5})
            outputs = [p.output.as_text() for p in last.content if hasattr(p, "output")]
            return "done: " + " | ".join(outputs) if outputs else "nothing to do"

        with SessionPool(store, model=FunctionModel(refund_reply), tools=refund_tools(marker, 0.3),
                         approval=ApprovalPolicy(mode="ask-writes"), idle_timeout=None) as pool:
            session = pool.get(sid)
            pending = [p.id for p in session.pending_approvals()]
            if mode == "settle" and verb == "1":
                session.approve(pending[0])
            say(ready=pending)
            sys.stdin.readline()
            try:
                if verb == "approve":
                    session.approve(pending[0])
                elif verb == "deny":
                    session.deny(pending[0], reason="no")
                result = session.generate()
                say(text=result.text, finish=result.finish_reason)
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
    elif mode == "asks":
        tag, n, sids = args[0], int(args[1]), args[2].split(",")
        extra: dict[str, Any] = {}
        if len(args) > 3:  # retention: max_events
            extra["retention"] = Retention(max_events=int(args[3]), keep_last=2)
            extra["compactor"] = lambda messages, reason, cancel: f"summary of {len(messages)} messages"

        @tool
        def slow_echo(text: str) -> str:
            """Echo after a short wait."""
            time.sleep(0.02 + (hash(text) % 30) / 1000)
            return text

        answers: list[list[str]] = []
        errors: list[str] = []
        with SessionPool(store, model=FunctionModel(echo_reply), tools=[slow_echo], idle_timeout=None,
                         **extra) as pool:
            def asker(thread: int) -> None:
                for i in range(n):
                    prompt = f"{tag}-{thread}-{i}" + ("!" if i % 3 == 0 else "")
                    try:
                        answers.append([prompt, pool.get(sids[(i + thread) % len(sids)]).ask(prompt).text])
                    except AgentkitError as exc:
                        errors.append(f"{type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=asker, args=(t,)) for t in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        say(answers=answers, errors=errors)
    elif mode == "push":
        sid, tag, n = args
        push_ticks(store, sid, tag, int(n))
    elif mode == "stall":
        sid, marker = args
        release = Path(marker + ".release")

        @tool
        def stuck(text: str) -> str:
            """Write ``started``, then wait for the release file."""
            with open(marker, "a", encoding="utf-8") as fh:
                fh.write("started\n")
            while not release.exists():
                time.sleep(0.02)
            with open(marker, "a", encoding="utf-8") as fh:
                fh.write("finished\n")
            return "stuck " + text

        model = FunctionModel(calls_then_answers("stuck", "answer: "))
        with SessionPool(store, model=model, tools=[stuck], idle_timeout=None) as pool:
            try:
                say(text=pool.get(sid).ask("first").text)
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
                sys.stdin.readline()  # then one more turn through the same pooled session
                say(again=pool.get(sid).ask("again").text)
    elif mode == "txn":
        sid, marker = args
        release = Path(marker + ".release")

        @tool
        def effect(text: str) -> str:
            """Write ``ran`` to the marker."""
            with open(marker, "a", encoding="utf-8") as fh:
                fh.write("ran\n")
            return "done " + text

        def waiting_reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "user":
                with open(marker, "a", encoding="utf-8") as fh:
                    fh.write("model\n")
                while not release.exists():
                    time.sleep(0.02)
                return ToolCall("effect", {"text": last.text})
            return "answer: " + outputs(last)

        with SessionPool(store, model=FunctionModel(waiting_reply), tools=[effect], idle_timeout=None) as pool:
            session = pool.get(sid)
            txn = session.begin_generation("first")
            say(generation_id=txn.generation_id, claim_token=txn.claim_token)
            try:
                say(text=session.generate(transaction=txn).text)
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
    elif mode == "claim":
        sid, marker = args

        def noted_reply(request: Any) -> str:
            with open(marker, "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
            return "answer: " + request.messages[-1].text

        with SessionPool(store, model=FunctionModel(noted_reply), idle_timeout=None) as pool:
            session = pool.get(sid)
            say(ready=True)
            gid, token = sys.stdin.readline().split()  # the handle, sent once the session is open
            try:
                txn = GenerationTransaction(generation_id=gid, claim_token=token)
                say(text=session.generate(transaction=txn).text)
                sys.stdin.readline()  # its pool (and session) closes once told to
            except AgentkitError as exc:
                say(error=type(exc).__name__, message=str(exc))
    elif mode == "compact":
        sid, marker = args
        release = Path(marker + ".release")

        def slow_summary(messages: Any, *, reason: str, cancel: Any) -> str:
            with open(marker, "a", encoding="utf-8") as fh:
                fh.write("summarizing\n")
            while not release.exists():
                time.sleep(0.02)
            return f"summary B of {len(messages)} messages"

        with SessionPool(store, idle_timeout=None) as pool:
            event = pool.get(sid).compact(keep_last=2, compactor=slow_summary)
            say(compacted=None if event is None else event.covered_through)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    close = getattr(store, "close", None)
    if close is not None:
        close()


if __name__ == "__main__":
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1)  # a hung worker's stacks, on demand
    main(*sys.argv[1:])
