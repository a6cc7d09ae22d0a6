"""agentkit.web: Server-Sent Events from an agent stream; closing it cancels the generation."""

from __future__ import annotations

import asyncio
import gc
import json
import threading

import pytest
from _procs import wait_for

from agentkit import FunctionModel, Session, ToolCall, ToolContext, tool
from agentkit.web import ask_async, sse, sse_async


def _echo(request):
    return "answer to " + [m for m in request.messages if m.role == "user"][-1].text


def _records(text):
    assert text.endswith("\n\n")
    return [json.loads(chunk.removeprefix("data: ")) for chunk in text.strip("\n").split("\n\n")]


def test_sse_writes_one_data_record_per_agent_event():
    with Session(FunctionModel(_echo)) as s:
        chunks = list(sse(s.ask_stream("hi")))
    assert all(c.startswith("data: ") and c.endswith("\n\n") and c.count("\n") == 2 for c in chunks)
    records = [r for c in chunks for r in _records(c)]
    assert records[0]["type"] == "generation-start" and records[-1]["type"] == "generation-end"
    assert "".join(r["text"] for r in records if r["type"] == "text-delta") == "answer to hi"


def _blocking_model(started: threading.Event, cancelled: threading.Event):
    def fn(request):
        started.set()
        hit = threading.Event()
        forget = request.cancel._on_cancel(hit.set)
        if hit.wait(30):
            cancelled.set()
        forget()
        return "too late"

    return FunctionModel(fn)


def test_closing_the_sse_iterator_cancels_the_generation():
    started, cancelled = threading.Event(), threading.Event()
    with Session(_blocking_model(started, cancelled)) as s:
        events = sse(s.ask_stream("hang"))
        assert json.loads(next(events).removeprefix("data: "))["type"] == "generation-start"
        started.wait(30)
        events.close()  # what a WSGI server does when the client disconnects
        assert cancelled.is_set()
        assert any(e.type == "control" and e.action == "generation-aborted" for e in s.events)


def test_sse_async_and_its_cancellation():
    started, cancelled = threading.Event(), threading.Event()
    with Session(FunctionModel(_echo)) as s:

        async def collect():
            return [chunk async for chunk in sse_async(s.ask_stream("hi"))]

        records = [r for c in asyncio.run(collect()) for r in _records(c)]
        assert records[-1]["type"] == "generation-end"
        assert asyncio.run(ask_async(s, "again")).text == "answer to again"

    with Session(_blocking_model(started, cancelled)) as s:

        async def disconnect():
            agen = sse_async(s.ask_stream("hang"))
            await agen.__anext__()
            await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
            await agen.aclose()  # what an ASGI server does when the client disconnects

        asyncio.run(disconnect())
        wait_for(cancelled.is_set, what="the generation to be cancelled")
        assert any(e.type == "control" and e.action == "generation-aborted" for e in s.events)


def _end_record(chunks):
    (end,) = [r for c in chunks for r in _records(c) if r["type"] == "generation-end"]
    return end


def _lookup_model():
    """Calls the tool once per question (a large output), then answers."""

    def fn(request):
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall(name="lookup", input={"q": last.text})
        return "found it"

    return FunctionModel(fn)


@tool
def lookup(q: str) -> str:
    """Look a question up."""
    return "a long internal record " * 40


def test_generation_end_carries_the_answer_only_whatever_the_history():
    with Session(_lookup_model(), tools=[lookup]) as s:
        first = _end_record(list(sse(s.ask_stream("q0"))))
        for i in range(1, 50):
            s.ask(f"q{i}")
        chunks = list(sse(s.ask_stream("q50")))
        later = _end_record(chunks)
        assert later == {"type": "generation-end", "result": {
            "text": "found it", "output": None, "finish_reason": "stop", "usage": later["result"]["usage"]}}
        assert set(later["result"]["usage"]) == set(first["result"]["usage"])
        strip = lambda end: {**end["result"], "usage": None}  # noqa: E731 - token counts grow with history
        assert strip(later) == strip(first)  # the same payload after 50 turns as after one: not O(history)
        assert "internal record" not in chunks[-1]  # the tool's output stays on the server

        full = _end_record(list(sse(s.ask_stream("q51"), include_messages=True)))
        assert [m["role"] for m in full["result"]["messages"]] == ["user", "assistant", "tool", "assistant"] * 52

        async def collect():
            return [c async for c in sse_async(s.ask_stream("q52"), include_messages=True)]

        assert len(_end_record(asyncio.run(collect()))["result"]["messages"]) == 4 * 53


def test_generation_end_carries_a_structured_output_as_json():
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    model = FunctionModel(lambda request: ToolCall(name="final_answer", input={"value": 7}))
    with Session(model) as s:
        end = _end_record(list(sse(s.ask_stream("seven?", output_type=Answer))))
    assert end["result"]["output"] == {"value": 7}


class _SlowTool:
    """A model that calls ``slow`` when asked "go", and answers; ``slow`` waits for
    its cancel token, and records that it saw it."""

    def __init__(self):
        self.started, self.cancelled = threading.Event(), threading.Event()

        @tool
        def slow(ctx: ToolContext) -> str:
            """Take a long time."""
            self.started.set()
            if ctx.cancel.wait(60):
                self.cancelled.set()
                return "stopped"
            return "done"

        self.tool = slow

    def session(self):
        def fn(request):
            last = request.messages[-1]
            return ToolCall(name="slow", input={}) if last.role == "user" and last.text == "go" else "answered"

        return Session(FunctionModel(fn), tools=[self.tool])


def _aborted(s):
    return any(e.type == "control" and e.action == "generation-aborted" for e in s.events)


def test_an_sse_iterator_closed_before_its_first_item_cancels_the_generation():
    slow = _SlowTool()
    with slow.session() as s:
        events = sse(s.ask_stream("go"))
        assert slow.started.wait(30)
        events.close()  # a WSGI server whose client left before the first write
        assert slow.cancelled.is_set() and _aborted(s)
        assert list(events) == []
        assert s.ask("again").text == "answered"  # the session is free


def test_an_async_sse_iterator_closed_before_its_first_item_cancels_the_generation():
    slow = _SlowTool()
    with slow.session() as s:
        events = sse_async(s.ask_stream("go"))
        assert slow.started.wait(30)
        asyncio.run(events.aclose())
        assert slow.cancelled.is_set() and _aborted(s)
        assert s.ask("again").text == "answered"


@pytest.mark.parametrize("make", [sse, sse_async])
def test_an_sse_response_dropped_before_it_starts_cancels_the_generation(make):
    slow = _SlowTool()
    with slow.session() as s:
        events = make(s.ask_stream("go"))
        assert slow.started.wait(30)
        del events  # the server never iterated it, nor closed it
        gc.collect()
        assert slow.cancelled.wait(30)
        wait_for(lambda: _aborted(s), what="generation-aborted to be committed")
        assert s.ask("again").text == "answered"
