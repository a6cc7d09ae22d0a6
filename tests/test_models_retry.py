"""Retries shared by the provider adapters: backoff, Retry-After, bounds, cancellation.

Real SDK clients talk to loopback servers that answer 429/5xx/529 with the headers the
services send; policies use tiny delays so the file stays fast.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time

import anthropic
import openai
import pytest
from _procs import free_port
from fakes import anthropic_wire as aw
from fakes import openai_wire as ow
from fakes.server import DROP, FakeServer

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    ProviderUnavailableError,
    RateLimitError,
)
from agentkit.messages import Message
from agentkit.models import ModelRequest, RetryInfo, RetryPolicy, TextDelta
from agentkit.models._retry import parse_retry_after
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.openai import OpenAIChatModel

TINY = RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=0.005)


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def openai_model(server: FakeServer, **kw) -> OpenAIChatModel:
    kw.setdefault("retry", TINY)
    return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", **kw)


def req(cancel: CancelToken | None = None) -> ModelRequest:
    return ModelRequest(messages=(Message.user("hi"),), cancel=cancel or CancelToken())


def test_retry_after_header_sets_the_wait(server):
    server.add(
        ow.error(429, "Rate limit reached", type_="requests", headers={"retry-after": "0.2"}),
        ow.error(503, "busy", type_="server_error", headers={"retry-after-ms": "150"}),
        ow.text_stream("ok"),
    )
    seen: list[RetryInfo] = []
    start = time.monotonic()
    events = list(openai_model(server, on_retry=seen.append).stream(req()))
    waited = time.monotonic() - start
    assert TextDelta("ok") in events
    assert [(i.attempt, i.retry_after) for i in seen] == [(1, 0.2), (2, 0.15)]
    assert [i.delay for i in seen] == [0.2, 0.15]  # the server's wait beats the tiny backoff
    assert isinstance(seen[0].error, RateLimitError)
    assert isinstance(seen[1].error, ProviderUnavailableError)
    assert waited >= 0.3  # it really waited (a lower bound only)
    assert len(server.requests) == 3


def test_retry_after_as_http_date():
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": future}) <= 31
    assert parse_retry_after({"retry-after": "not a date"}) is None
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None


def test_backoff_is_exponential_capped_and_jittered():
    policy = RetryPolicy(initial_delay=1.0, max_delay=5.0, jitter=0.25)
    for _ in range(50):
        assert 0.75 <= policy.backoff(0) <= 1.0
        assert 1.5 <= policy.backoff(1) <= 2.0
        assert 3.0 <= policy.backoff(2) <= 4.0
        assert 3.75 <= policy.backoff(10) <= 5.0
    assert RetryPolicy(initial_delay=1.0, jitter=0).backoff(3) == 8.0


@pytest.mark.parametrize(
    "kwargs",
    [{"max_retries": -1}, {"initial_delay": -0.1}, {"max_elapsed": float("inf")}, {"jitter": 2}],
)
def test_retry_policy_rejects_bad_values(kwargs):
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


def test_retries_are_bounded_in_count(server):
    for _ in range(10):
        server.add(ow.error(500, "The server had an error", type_="server_error"))
    with pytest.raises(ProviderUnavailableError, match="giving up after 4 attempts") as info:
        list(openai_model(server).stream(req()))
    assert info.value.status_code == 500
    assert len(server.requests) == 4  # one attempt and three retries


def test_retries_are_bounded_in_total_time(server):
    server.add(ow.error(429, "slow down", type_="requests", headers={"retry-after": "30"}))
    policy = RetryPolicy(max_retries=5, initial_delay=0.001, max_elapsed=1.0)
    with pytest.raises(RateLimitError, match="retry time budget"):
        list(openai_model(server, retry=policy).stream(req()))
    assert len(server.requests) == 1  # a 30 s wait would pass the 1 s budget: give up now


def test_exhausted_quota_is_not_retried(server):
    server.add(
        ow.error(
            429, "You exceeded your current quota", type_="insufficient_quota", code="insufficient_quota"
        )
    )
    with pytest.raises(RateLimitError, match="exceeded your current quota"):
        list(openai_model(server).stream(req()))
    assert len(server.requests) == 1


@pytest.mark.timeout(60)
def test_cancel_interrupts_the_wait_between_attempts(server):
    for _ in range(3):
        server.add(aw.error(529, "overloaded_error", "Overloaded", headers={"retry-after": "30"}))
    cancel = CancelToken()
    model = AnthropicModel(
        "claude-fake-1",
        base_url=server.url,
        api_key="k",
        retry=RetryPolicy(max_retries=3, max_elapsed=300),
    )
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            list(model.stream(req(cancel)))
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    server.wait_for_requests(1)
    time.sleep(0.05)
    cancel.cancel("user pressed stop")
    worker.join(timeout=20)
    assert not worker.is_alive(), "the retry wait did not notice the cancellation"
    assert isinstance(outcome["error"], CancelledError)
    assert str(outcome["error"]) == "user pressed stop"
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_sdk_retries_are_disabled_even_on_a_given_client(server, provider):
    for _ in range(6):
        if provider == "openai":
            server.add(ow.error(500, "boom", type_="server_error"))
        else:
            server.add(aw.error(500, "api_error", "Internal server error"))
    policy = RetryPolicy(max_retries=1, initial_delay=0.001)
    if provider == "openai":
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=5)
        model = OpenAIChatModel("m", client=client, retry=policy)
    else:
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=5)
        model = AnthropicModel("m", client=client, retry=policy)
    with pytest.raises(ProviderUnavailableError):
        list(model.stream(req()))
    assert len(server.requests) == 2  # ours: one attempt plus one retry, none by the SDK


def test_connection_errors_are_retried_then_reported():
    port = free_port()  # nothing listens there now
    seen: list[RetryInfo] = []
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", retry=TINY, on_retry=seen.append)
    with pytest.raises(ProviderUnavailableError, match="could not be reached"):
        list(model.stream(req()))
    assert len(seen) == 3


def test_timeouts_are_retried():
    # the first reply hangs past the client timeout; every later attempt answers at once
    with FakeServer(responder=lambda rec: ow.text_stream("on time")) as server:
        server.add(ow.text_stream("late", hang=5.0))
        model = openai_model(server, timeout=1.0)
        events = list(model.stream(req()))
    assert TextDelta("on time") in events
    assert TextDelta("late") not in events
    assert len(server.requests) >= 2


def test_no_retry_once_events_were_yielded(server):
    server.add(
        ow.sse(
            [
                ow.chunk({"role": "assistant", "content": "partial "}),
                {"error": {"message": "The server had an error while processing", "type": "server_error"}},
            ]
        ),
        ow.text_stream("never fetched"),
    )
    got = []
    with pytest.raises(ProviderUnavailableError, match="while processing"):
        for ev in openai_model(server).stream(req()):
            got.append(ev)
    assert got == [TextDelta("partial ")]
    assert len(server.requests) == 1


def _model_for(provider: str, server: FakeServer, **kw):
    kw.setdefault("retry", TINY)
    if provider == "openai":
        return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", **kw)
    return AnthropicModel("claude-fake-1", base_url=server.url, api_key="k", **kw)


def _text_reply(provider: str, text: str):
    return ow.text_stream(text) if provider == "openai" else aw.stream(aw.text(text, pieces=1))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_stalling_before_any_event_is_retried(server, provider):
    # the first stream sends its opening event, then stalls past the client timeout
    gate = threading.Event()
    stalled = _text_reply(provider, "never")
    stalled.events = [stalled.events[0], (None, gate), *stalled.events[1:]]
    server.add(stalled)
    server.responder = lambda rec: _text_reply(provider, "second try")  # every later attempt
    seen: list[RetryInfo] = []
    try:
        events = list(_model_for(provider, server, timeout=1.0, on_retry=seen.append).stream(req()))
    finally:
        gate.set()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["second try"]
    assert isinstance(seen[0].error, ProviderUnavailableError)
    assert "timed out" in str(seen[0].error)
    assert len(server.requests) >= 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_connection_dropped_mid_stream_is_a_provider_error(server, provider):
    reply = _text_reply(provider, "partial")
    cut = next(i for i, (_, data) in enumerate(reply.events) if "partial" in json.dumps(data)) + 1
    reply.events = [*reply.events[:cut], (None, DROP)]
    server.add(reply, _text_reply(provider, "never fetched"))
    got = []
    with pytest.raises(ProviderUnavailableError) as info:
        for ev in _model_for(provider, server).stream(req()):
            got.append(ev)
    assert got == [TextDelta("partial")]
    assert info.value.provider == provider
    assert len(server.requests) == 1  # text had been passed on: never replayed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_connection_dropped_before_any_event_is_retried(server, provider):
    reply = _text_reply(provider, "lost")
    reply.events = [reply.events[0], (None, DROP)]
    server.add(reply, _text_reply(provider, "recovered"))
    events = list(_model_for(provider, server).stream(req()))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["recovered"]
    assert len(server.requests) == 2



@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cancel_stops_a_stream_between_chunks(server, provider):
    gate = threading.Event()
    reply = _text_reply(provider, "first")
    cut = next(i for i, (_, data) in enumerate(reply.events) if "first" in json.dumps(data)) + 1
    reply.events = [*reply.events[:cut], (None, gate), *reply.events[cut:]]
    server.add(reply)
    cancel = CancelToken()
    got = []
    with pytest.raises(CancelledError, match="stop now"):
        for ev in _model_for(provider, server).stream(req(cancel)):
            got.append(ev)
            if isinstance(ev, TextDelta):
                cancel.cancel("stop now")
                gate.set()
    assert got == [TextDelta("first")]
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_given_client_gets_the_timeout_and_keeps_its_own_key(provider):
    with FakeServer(responder=lambda rec: _text_reply(provider, "on time")) as server:
        late = _text_reply(provider, "late")
        late.hang = 5.0  # past the model's timeout, far below the client's own
        server.add(late)
        if provider == "openai":
            client = openai.OpenAI(api_key="sk-client", base_url=server.url + "/v1", timeout=600)
            model = OpenAIChatModel("m", client=client, timeout=1.0, retry=TINY)
        else:
            client = anthropic.Anthropic(api_key="sk-client", base_url=server.url, timeout=600)
            model = AnthropicModel("m", client=client, timeout=1.0, retry=TINY)
        events = list(model.stream(req()))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["on time"]
    assert len(server.requests) >= 2  # the first attempt hit the 1 s timeout given to the model
    assert "sk-client" in json.dumps(server.requests[-1].headers)
    with pytest.raises(ConfigurationError, match="either client= or api_key="):
        if provider == "openai":
            OpenAIChatModel("m", client=client, api_key="sk-other")
        else:
            AnthropicModel("m", client=client, api_key="sk-other")
