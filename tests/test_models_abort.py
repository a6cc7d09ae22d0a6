"""Aborting a model call whose server sends only keep-alives, or nothing at all.

Real SDK clients read from loopback servers that, after the response headers, send
``: keepalive`` SSE comments (OpenAI-compatible servers), ``event: ping`` (Anthropic) or
no byte at all. Neither SDK hands those to agentkit, so a check between stream events
never runs: cancelling must shut the connection down from the cancelling thread. The
bounds below are generous on purpose (a stuck call would run for 30 s or more).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from fakes import anthropic_wire as aw
from fakes import gemini_wire as gw
from fakes import openai_wire as ow
from fakes.server import FakeServer, Trickle

from agentkit import CancelledError, CancelToken, Session
from agentkit.messages import Message
from agentkit.models import ModelRequest, RetryPolicy, TextDelta
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.gemini import GeminiModel
from agentkit.models.openai import OpenAIChatModel

# Gemini sends no SSE comments (the google-genai SDK would read one as a broken chunk):
# blank lines, which the SDK skips, are its keep-alives here
KEEPALIVE = {"openai": b": keepalive\n\n", "anthropic": b'event: ping\ndata: {"type": "ping"}\n\n', "gemini": b"\n"}


def _model(provider: str, server: FakeServer):
    # a long client timeout: only cancellation can end the call in time
    retry = RetryPolicy(max_retries=2, initial_delay=0.001)
    if provider == "openai":
        return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", timeout=120, retry=retry)
    if provider == "gemini":
        return GeminiModel(gw.MODEL, base_url=server.url, api_key="k", timeout=120, retry=retry)
    return AnthropicModel("claude-fake-1", base_url=server.url, api_key="k", timeout=120, retry=retry)


def _idle_reply(provider: str, idle: str):
    """A stream that, after its headers, only sends keep-alives or nothing (or that sends
    not even its headers), then answers if anyone is still listening after 30 s."""
    reply = _answer(provider, "too late")
    if idle == "no headers":
        reply.hang = 30.0
        return reply, None
    pause: object = Trickle(KEEPALIVE[provider]) if idle == "keep-alives" else threading.Event()
    reply.events = [(None, pause), *reply.events]
    return reply, pause


def _answer(provider: str, text: str):
    if provider == "gemini":
        return gw.stream(gw.text(text), pieces=1)
    return ow.text_stream(text) if provider == "openai" else aw.stream(aw.text(text, pieces=1))


def _release(pause: object) -> None:
    if pause is not None:
        (pause.stop if isinstance(pause, Trickle) else pause).set()  # type: ignore[attr-defined]


def _wait_until_idle(server: FakeServer, pause: object) -> None:
    server.wait_for_requests(1)
    if isinstance(pause, Trickle):
        for _ in range(200):
            if pause.sent >= 3:
                return
            threading.Event().wait(0.05)
        raise AssertionError("the fake never started its keep-alives")
    threading.Event().wait(0.3)  # the client is now blocked reading the silent server


def _start(fn: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    """Run ``fn`` on a thread; the dict gets its "result" or "error"."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


def _stream_on_a_thread(provider: str, server: FakeServer):
    """(cancel token, thread, outcome) of a model call streaming on another thread."""
    cancel = CancelToken()
    request = ModelRequest(messages=(Message.user("hi"),), cancel=cancel)
    worker, outcome = _start(lambda: list(_model(provider, server).stream(request)))
    return cancel, worker, outcome


@pytest.mark.timeout(60)
@pytest.mark.parametrize("idle", ["keep-alives", "nothing", "no headers"])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_cancel_ends_a_model_call_on_an_idle_stream(provider, idle):
    reply, pause = _idle_reply(provider, idle)
    with FakeServer() as server:
        server.add(reply)
        cancel, worker, outcome = _stream_on_a_thread(provider, server)
        try:
            _wait_until_idle(server, pause)
            cancel.cancel("user pressed stop")
            worker.join(timeout=10)
            assert not worker.is_alive(), f"the model call ran on after cancel while the server sent {idle}"
            if isinstance(pause, Trickle):  # the server notices: the connection is gone
                assert pause.client_left.wait(10), "the connection stayed open after the cancel"
        finally:
            _release(pause)
            worker.join(timeout=30)
    assert isinstance(outcome.get("error"), CancelledError), outcome
    assert str(outcome["error"]) == "user pressed stop"
    assert len(server.requests) == 1  # a cancelled call is not retried


@pytest.mark.timeout(60)
def test_cancel_ends_a_plain_completion_the_server_never_answers():
    # stream=False: the whole answer comes with the headers, so there is nothing to shut
    # down until then
    with FakeServer() as server:
        late = ow.completion("too late")
        late.hang = 30.0
        server.add(late)
        model = OpenAIChatModel("m", base_url=server.url + "/v1", stream=False, timeout=120)
        cancel = CancelToken()
        request = ModelRequest(messages=(Message.user("hi"),), cancel=cancel)
        worker, outcome = _start(lambda: list(model.stream(request)))
        server.wait_for_requests(1)
        cancel.cancel("user pressed stop")
        worker.join(timeout=10)
        assert not worker.is_alive(), "the plain completion ran on after cancel"
    assert isinstance(outcome.get("error"), CancelledError), outcome


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["abort_current_generation", "close"])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_session_abort_and_close_end_generate_during_keep_alives(provider, how):
    reply, pause = _idle_reply(provider, "keep-alives")
    with FakeServer() as server:
        server.add(reply)
        session = Session(_model(provider, server))
        session.push_user_message("hi")
        worker, outcome = _start(session.generate)
        try:
            _wait_until_idle(server, pause)
            getattr(session, how)()
            worker.join(timeout=10)
            assert not worker.is_alive(), f"generate() ran on after {how}() during keep-alives"
        finally:
            _release(pause)
            worker.join(timeout=30)
            session.close()
    assert isinstance(outcome.get("error"), CancelledError), outcome


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_finished_call_leaves_no_cancel_hook_behind(provider):
    # the hook that shuts the connection down is dropped once the attempt ends, so a
    # token reused for many calls does not collect them
    with FakeServer() as server:
        for _ in range(3):
            server.add(_answer(provider, "ok"))
        cancel = CancelToken()
        model = _model(provider, server)
        for _ in range(3):
            list(model.stream(ModelRequest(messages=(Message.user("hi"),), cancel=cancel)))
    assert cancel._callbacks == []


class _HookRecordingToken(CancelToken):
    """Keeps every cancel hook registered on it, as a cancel racing the end of a call would."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[Callable[[], object]] = []

    def _on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        self.hooks.append(callback)
        return super()._on_cancel(callback)


def _two_calls(provider: str, *, fire_late_hooks: bool) -> int:
    """Two calls on one model; returns how many connections the server saw."""
    with FakeServer() as server:
        for _ in range(2):
            server.add(_answer(provider, "ok"))
        model = _model(provider, server)
        cancel = _HookRecordingToken()
        list(model.stream(ModelRequest(messages=(Message.user("hi"),), cancel=cancel)))
        assert cancel.hooks, "no cancel hook was registered for the streamed response"
        if fire_late_hooks:
            for hook in cancel.hooks:
                hook()  # fires after the response was closed: must do nothing
        second = list(model.stream(ModelRequest(messages=(Message.user("again"),))))
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["ok"]
    return server.connections


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_late_cancel_spares_the_connection_back_in_the_pool(provider):
    # the generation ended and its connection went back to the client's pool (the
    # anthropic SDK reads its stream to the end, so it reuses connections): a cancel hook
    # that fires now must not shut down a connection another call may be using
    baseline = _two_calls(provider, fire_late_hooks=False)
    assert _two_calls(provider, fire_late_hooks=True) == baseline
    if provider == "anthropic":
        assert baseline == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_call_left_behind_by_a_cancel_is_closed_when_the_server_answers(provider):
    # cancelled before the headers came: once they come, the connection is let go at once,
    # not held open while the server streams keep-alives
    reply, _ = _idle_reply(provider, "no headers")
    reply.hang = 1.0
    trickle = Trickle(KEEPALIVE[provider])
    reply.events = [(None, trickle), *reply.events]
    with FakeServer() as server:
        server.add(reply)
        cancel, worker, outcome = _stream_on_a_thread(provider, server)
        try:
            server.wait_for_requests(1)
            cancel.cancel("user pressed stop")
            worker.join(timeout=10)
            assert isinstance(outcome.get("error"), CancelledError), outcome
            assert trickle.client_left.wait(20), "the abandoned response was never closed"
        finally:
            trickle.stop.set()
