"""The provider error seam: each adapter owns translate_error, the retry loop only retries.

A third adapter built on agentkit.models.adapter gets translation and retries without
any change to the retry loop; garbage from a provider's stream becomes a ProviderError
(retried before the first event, as server faults are) on the real SDKs.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes import anthropic_wire as aw
from fakes import openai_wire as ow
from fakes.server import FakeServer, Reply

from agentkit import (
    ContextOverflowError,
    ModelError,
    ProviderError,
    ProviderUnavailableError,
    run_agent,
)
from agentkit.messages import Message
from agentkit.models import FinishEvent, ModelRequest, RetryInfo, RetryPolicy, StreamEvent, TextDelta
from agentkit.models.adapter import ProviderModel, TranslatedError
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.openai import OpenAIChatModel

ROOT = Path(__file__).resolve().parents[1]
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)


class WireDown(Exception):
    """A third SDK's exception, unknown to agentkit."""

    def __init__(self, code: int) -> None:
        super().__init__(f"wire down ({code})")
        self.code = code


class Flaky(ProviderUnavailableError):
    """An adapter's own error type whose constructor takes only a message."""

    def __init__(self, message: str) -> None:
        super().__init__(message, provider="wire", status_code=503)


class WireModel(ProviderModel):
    """A minimal adapter: fails with the given exceptions, then answers."""

    provider = "wire"
    model_name = "wire-1"

    def __init__(self, failures: list[Exception], *, retry: RetryPolicy = FAST,
                 on_retry: Callable[[RetryInfo], object] | None = None) -> None:
        self.failures = failures
        self.attempts = 0
        self.retry = retry
        self.on_retry = on_retry

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        def attempt() -> Iterator[StreamEvent]:
            self.attempts += 1
            if self.failures:
                raise self.failures.pop(0)
            yield TextDelta("fine")
            yield FinishEvent("stop")

        return attempt

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        if isinstance(exc, WireDown):
            if exc.code == 413:
                return TranslatedError(error=ContextOverflowError(str(exc), provider="wire", status_code=413))
            return TranslatedError(
                error=ProviderUnavailableError(str(exc), provider="wire", status_code=exc.code), retryable=True
            )
        return None


def req() -> ModelRequest:
    return ModelRequest(messages=(Message.user("hi"),))


def test_a_third_adapter_gets_its_errors_translated_and_retried():
    seen: list[RetryInfo] = []
    model = WireModel([WireDown(503), WireDown(502)], on_retry=seen.append)
    assert run_agent(model, "hi").text == "fine"
    assert model.attempts == 3
    assert [(i.error.provider, i.error.status_code) for i in seen] == [("wire", 503), ("wire", 502)]


def test_a_translated_error_that_is_not_retryable_is_raised_at_once():
    model = WireModel([WireDown(413)])
    with pytest.raises(ContextOverflowError) as info:
        list(model.stream(req()))
    assert (info.value.provider, info.value.status_code) == ("wire", 413)
    assert isinstance(info.value.__cause__, WireDown)
    assert model.attempts == 1


def test_an_exception_the_adapter_does_not_translate_propagates_unchanged():
    with pytest.raises(KeyError):
        list(WireModel([KeyError("x")]).stream(req()))


def test_exhausted_retries_keep_an_adapter_error_type_whose_constructor_is_narrower():
    # issue 20: the retry loop used to rebuild the error as
    # type(error)(msg, provider=..., status_code=...), a TypeError for this class
    model = WireModel([Flaky("shard 3 is down") for _ in range(5)])
    with pytest.raises(Flaky) as info:
        list(model.stream(req()))
    assert "shard 3 is down" in str(info.value)
    assert "giving up after 3 attempts" in str(info.value)
    assert (info.value.provider, info.value.status_code) == ("wire", 503)
    assert model.attempts == 3


def test_model_errors_carry_provider_and_status_code_as_attributes():
    for cls in (ModelError, ContextOverflowError, ProviderError, ProviderUnavailableError):
        err = cls("boom", provider="p", status_code=400)
        assert (err.provider, err.status_code, str(err)) == ("p", 400, "boom")
        plain = cls("boom")
        assert (plain.provider, plain.status_code) == ("", None)


def test_context_overflow_from_a_provider_names_it(ow_server):
    ow_server.add(ow.error(400, "This model's maximum context length is 128000 tokens",
                           code="context_length_exceeded"))
    model = OpenAIChatModel("gpt-4.1-mini", base_url=ow_server.url + "/v1", retry=FAST)
    with pytest.raises(ContextOverflowError) as info:
        list(model.stream(req()))
    assert (info.value.provider, info.value.status_code) == ("openai", 400)


def test_adapters_translate_only_what_they_know():
    openai_model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    anthropic_model = AnthropicModel("m", base_url="http://127.0.0.1:9", api_key="k")
    for model in (openai_model, anthropic_model):
        assert model.translate_error(KeyError("not an SDK error")) is None


def test_the_langchain_adapter_builds_on_the_public_adapter_module():
    tree = ast.parse((ROOT / "agentkit" / "adapters" / "langchain" / "chat_model.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "models.adapter" in imported
    assert not {m for m in imported if m.startswith("models._")}, imported


def test_one_provider_table():
    for path in ("agentkit/models/__init__.py", "agentkit/models/registry.py"):
        source = (ROOT / path).read_text()
        assert ("_PROVIDERS: dict" in source) == path.endswith("registry.py"), path
        assert "_LAZY" not in source


# -- garbage from the provider (issue 10 item 6) -------------------------------------------


@pytest.fixture
def ow_server():
    with FakeServer() as s:
        yield s


def _garbage(provider: str):
    if provider == "openai":
        return Reply(events=[(None, "{not json at all"), (None, "[DONE]")])
    reply = aw.stream(aw.text("never", pieces=1))
    reply.events = [reply.events[0], ("content_block_start", "<html>502 Bad Gateway</html>")]
    return reply


def _good(provider: str):
    return ow.text_stream("recovered") if provider == "openai" else aw.stream(aw.text("recovered", pieces=1))


def _model(provider: str, server: FakeServer, **kw):
    kw.setdefault("retry", FAST)
    if provider == "openai":
        return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", **kw)
    return AnthropicModel("claude-fake-1", base_url=server.url, api_key="k", **kw)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_garbage_stream_event_is_a_provider_error_not_a_json_error(ow_server, provider):
    for _ in range(3):
        ow_server.add(_garbage(provider))
    with pytest.raises(ProviderError) as info:
        list(_model(provider, ow_server).stream(req()))
    assert not isinstance(info.value, json.JSONDecodeError)
    assert isinstance(info.value.__cause__, json.JSONDecodeError)
    assert info.value.provider == provider
    assert "not valid JSON" in str(info.value)
    assert len(ow_server.requests) == 3  # a server fault: retried as the policy says


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_garbage_stream_event_before_any_output_is_retried(ow_server, provider):
    ow_server.add(_garbage(provider), _good(provider))
    seen: list[RetryInfo] = []
    events = list(_model(provider, ow_server, on_retry=seen.append).stream(req()))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["recovered"]
    assert isinstance(seen[0].error, ProviderUnavailableError)


def test_garbage_after_output_was_passed_on_is_raised_not_replayed(ow_server):
    ow_server.add(
        Reply(events=[(None, ow.chunk({"role": "assistant", "content": "partial"})), (None, "{garbage")]),
        ow.text_stream("never fetched"),
    )
    got = []
    with pytest.raises(ProviderUnavailableError, match="not valid JSON"):
        for event in _model("openai", ow_server).stream(req()):
            got.append(event)
    assert got == [TextDelta("partial")]
    assert len(ow_server.requests) == 1
