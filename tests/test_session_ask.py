"""Session.ask / ask_stream / ask_async: the prompt is committed when the caller's turn
comes, so concurrent callers each get the answer to their own message, in arrival order."""

from __future__ import annotations

import asyncio
import threading

import pytest
from _procs import wait_for

from agentkit import CancelledError, CancelToken, FileEventStore, FunctionModel, Session


def _echo(request):
    return "answer to " + [m for m in request.messages if m.role == "user"][-1].text


def _held_model(release: threading.Event):
    """Answers like _echo, but the first inference waits for ``release``."""
    first = [True]

    def fn(request):
        if first[0]:
            first[0] = False
            release.wait(30)
        return _echo(request)

    return FunctionModel(fn)


def _conversation(session):
    return [(e.type, e.content[0].text) for e in session.events if e.type in ("user-message", "assistant-message")]


def test_concurrent_asks_each_get_the_answer_to_their_own_message_in_arrival_order():
    release = threading.Event()
    answers: dict[int, str] = {}
    with Session(_held_model(release)) as s:
        threads = []
        for i in range(5):
            t = threading.Thread(target=lambda i=i: answers.__setitem__(i, s.ask(f"q{i}").text))
            t.start()
            threads.append(t)
            wait_for(lambda i=i: len(s._queue) == i + 1, what=f"ask {i} queued")
        # the first holds the gate; the others wait with their prompts not yet committed
        assert [text for _, text in _conversation(s)] == ["q0"]
        release.set()
        for t in threads:
            t.join(30)
        assert answers == {i: f"answer to q{i}" for i in range(5)}
        expected = []
        for i in range(5):
            expected += [("user-message", f"q{i}"), ("assistant-message", f"answer to q{i}")]
        assert _conversation(s) == expected


def test_an_ask_cancelled_while_waiting_never_commits_its_prompt():
    release = threading.Event()
    with Session(_held_model(release)) as s:
        first = threading.Thread(target=lambda: s.ask("q0"))
        first.start()
        wait_for(lambda: len(s._queue) == 1, what="first ask running")
        token = CancelToken()
        errors = []

        def second():
            try:
                s.ask("never", cancel=token)
            except CancelledError as exc:
                errors.append(exc)

        t = threading.Thread(target=second)
        t.start()
        wait_for(lambda: len(s._queue) == 2, what="second ask queued")
        token.cancel("the client left")
        t.join(30)
        release.set()
        first.join(30)
        assert errors and "never" not in [text for _, text in _conversation(s)]


def test_ask_refuses_a_bad_prompt_before_waiting():
    with Session(FunctionModel(_echo)) as s, pytest.raises(Exception, match="prompt|content|str"):
        s.ask(42)  # type: ignore[arg-type]
    assert s.events == ()


def test_ask_stream_yields_the_turn_and_commits_the_prompt_at_its_turn():
    with Session(FunctionModel(_echo)) as s:
        s.ask("first")
        stream = s.ask_stream("second")
        types = [e.type for e in stream]
        assert types[0] == "generation-start" and types[-1] == "generation-end"
        assert stream.result.text == "answer to second"
        assert _conversation(s)[-2:] == [("user-message", "second"), ("assistant-message", "answer to second")]


def test_ask_async_and_async_iteration_of_a_stream():
    with Session(FunctionModel(_echo)) as s:

        async def main():
            result = await s.ask_async("hello")
            seen = [event.type async for event in s.ask_stream("again")]
            return result.text, seen

        text, seen = asyncio.run(main())
        assert text == "answer to hello"
        assert seen[0] == "generation-start" and "text-delta" in seen and seen[-1] == "generation-end"
        assert _conversation(s)[-1] == ("assistant-message", "answer to again")


def test_cancelling_the_awaiting_task_cancels_the_generation():
    started = threading.Event()
    seen_cancel = threading.Event()

    def model_fn(request):
        started.set()
        cancelled = threading.Event()
        forget = request.cancel._on_cancel(cancelled.set)
        if cancelled.wait(30):  # the model call is told through its request's token
            seen_cancel.set()
        forget()
        return "late"

    with Session(FunctionModel(model_fn)) as s:

        async def main():
            task = asyncio.ensure_future(s.ask_async("hang"))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        wait_for(seen_cancel.is_set, what="the generation's token cancelled")
        wait_for(lambda: not s._queue, what="the generation to end")
        assert any(e.type == "control" and e.action == "generation-aborted" for e in s.events)


def test_asks_of_two_session_objects_over_one_file_store_take_turns(tmp_path):
    """Two objects over one stored session (as in two processes): the store's turn lock
    and refresh keep every answer with its question and the log in order."""
    store = FileEventStore(tmp_path)
    a = Session.open("c", store=store, model=FunctionModel(_echo))
    b = Session.open("c", store=store, model=FunctionModel(_echo))
    answers: dict[str, str] = {}
    try:
        def run(session, name):
            for i in range(5):
                answers[f"{name}{i}"] = session.ask(f"{name}{i}").text

        threads = [threading.Thread(target=run, args=(a, "a")), threading.Thread(target=run, args=(b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert answers == {k: f"answer to {k}" for k in answers} and len(answers) == 10
        log = _conversation(Session.open("c", store=store))
        assert len(log) == 20
        for (kind_q, q), (kind_a, a_text) in zip(log[::2], log[1::2], strict=True):
            assert (kind_q, kind_a, a_text) == ("user-message", "assistant-message", f"answer to {q}")
    finally:
        a.close()
        b.close()
