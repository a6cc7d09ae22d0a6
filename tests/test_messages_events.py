"""Data layer: messages, events, usage, lossless serialisation."""

from __future__ import annotations

import json

import pytest
from _deep import nested

from agentkit import ConfigurationError, Usage
from agentkit.events import (
    AssistantMessageEvent,
    ContextReplacedEvent,
    ControlEvent,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
    event_from_dict,
)
from agentkit.messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolOutput,
    ToolResultPart,
    normalize_prompt,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def _all_events():
    return [
        UserMessageEvent(
            content=(
                TextPart(text="look"),
                ImagePart(data=PNG, media_type="image/png"),
                ImagePart(url="https://example.invalid/cat.jpg", media_type="image/jpeg"),
                FilePart(data=b"%PDF-1.7", media_type="application/pdf", filename="a.pdf"),
            )
        ),
        AssistantMessageEvent(
            content=(
                ReasoningPart(text="think", signature="sig=="),
                ReasoningPart(redacted_data="opaque"),
                TextPart(text="calling"),
                ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1, "b": [2, {"x": None}]}),
                ToolCallPart(tool_call_id="c2", tool_name="add", input="{bad", input_error="bad json"),
            ),
            usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7, cache_read_tokens=1),
            finish_reason="tool-calls",
            model="m",
        ),
        ToolResultEvent(tool_call_id="c1", tool_name="add", output=ToolOutput(kind="json", value={"r": 3})),
        ToolResultEvent(tool_call_id="c2", tool_name="add", output=ToolOutput.error("nope")),
        ToolResultEvent(
            tool_call_id="c3",
            tool_name="shot",
            output=ToolOutput(kind="content", value=(TextPart(text="img"), ImagePart(data=PNG))),
        ),
        ToolResultEvent(tool_call_id="c4", tool_name="x", output=ToolOutput(kind="error-json", value=[1])),
        RuntimeEvent(runtime_type="job-finished", data={"execution_id": "j1", "exit_code": 0}),
        ContextReplacedEvent(messages=(Message.user("summary"), Message.assistant("ok")), reason="overflow"),
        ControlEvent(action="generation-aborted", data={"reason": "x"}),
    ]


@pytest.mark.parametrize("event", _all_events(), ids=lambda e: e.type)
def test_every_event_round_trips_through_json(event):
    committed = event.with_seq(42)
    data = json.loads(json.dumps(committed.to_dict()))
    restored = event_from_dict(data)
    assert restored == committed
    assert type(restored) is type(committed)
    assert restored.seq == 42 and restored.id == event.id and restored.timestamp == event.timestamp


def test_events_are_frozen_and_keyword_only():
    ev = UserMessageEvent(content=(TextPart(text="hi"),))
    with pytest.raises(AttributeError):
        ev.seq = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        UserMessageEvent((TextPart(text="hi"),))  # type: ignore[misc]


def test_event_ids_are_unique_and_uncommitted_seq_is_zero():
    a, b = (UserMessageEvent(content=(TextPart(text="x"),)) for _ in range(2))
    assert a.id != b.id
    assert a.seq == 0


def test_unknown_event_type_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="unknown event type 'mystery'"):
        event_from_dict({"type": "mystery", "id": "x", "timestamp": 0})


def test_missing_field_is_named():
    with pytest.raises(ConfigurationError, match="missing field 'tool_call_id'"):
        event_from_dict({"type": "tool-result", "id": "x", "timestamp": 0, "tool_name": "t", "output": {}})


def test_runtime_event_data_must_be_json():
    with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
        RuntimeEvent(runtime_type="timer-fired", data={"when": object()})
    with pytest.raises(ConfigurationError, match="non-empty"):
        RuntimeEvent(runtime_type="", data={})


def test_message_roles_restrict_parts():
    with pytest.raises(ConfigurationError, match="a user message cannot hold a ToolCallPart"):
        Message(role="user", content=(ToolCallPart(tool_call_id="1", tool_name="t"),))
    with pytest.raises(ConfigurationError, match="unknown message role"):
        Message(role="robot", content=())  # type: ignore[arg-type]
    msg = Message(role="assistant", content=[TextPart(text="a"), TextPart(text="b")])  # list accepted
    assert msg.content == (TextPart(text="a"), TextPart(text="b")) and msg.text == "ab"


def test_image_part_needs_exactly_one_source_and_base64_round_trips():
    with pytest.raises(ConfigurationError):
        ImagePart()
    with pytest.raises(ConfigurationError):
        ImagePart(data=b"x", url="http://x")
    img = ImagePart(data=PNG)
    assert ImagePart.from_base64(img.base64()) == img


def test_prompt_normalisation_accepts_text_and_parts():
    img = ImagePart(url="https://example.invalid/a.png")
    assert normalize_prompt("hi") == (TextPart(text="hi"),)
    assert normalize_prompt(["see", img]) == (TextPart(text="see"), img)
    with pytest.raises(ConfigurationError, match="prompt is empty"):
        normalize_prompt([])
    with pytest.raises(ConfigurationError, match="prompt is empty"):
        normalize_prompt("  \n")
    with pytest.raises(ConfigurationError, match="must be str, TextPart"):
        normalize_prompt(["x", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        normalize_prompt(b"bytes")  # type: ignore[arg-type]


def test_message_round_trip_and_tool_output_text():
    msg = Message(
        role="tool",
        content=(ToolResultPart(tool_call_id="1", tool_name="t", output=ToolOutput(kind="json", value=[1, 2])),),
    )
    assert Message.from_dict(json.loads(json.dumps(msg.to_dict()))) == msg
    assert msg.content[0].output.as_text() == "[1, 2]"
    assert ToolOutput.error("boom").is_error and not ToolOutput.text("ok").is_error


def test_usage_sums():
    total = Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage(
        input_tokens=10, cache_read_tokens=4, cache_write_tokens=5
    )
    assert total == Usage(input_tokens=11, output_tokens=2, total_tokens=3, cache_read_tokens=4, cache_write_tokens=5)
    assert Usage.from_dict(total.to_dict()) == total


def test_control_event_data_must_be_json_before_it_can_reach_a_store():
    with pytest.raises(ConfigurationError, match="control event 'x' data is not JSON-serialisable"):
        ControlEvent(action="x", data={"lock": object()})
    with pytest.raises(ConfigurationError, match="non-empty string action"):
        ControlEvent(action="")


NOT_STRICT_JSON = [
    ({1: "a", "b": 2}, r"\$ has the key 1 \(int\)"),  # mixed keys: json.dumps(sort_keys=True) fails
    ({1: "a"}, r"would come back as '1'"),
    ({"p": (1, 2)}, r"\$\.p is a tuple"),
    ({"x": float("nan")}, r"\$\.x is nan"),
    ({"x": [float("-inf")]}, r"\$\.x\[0\] is -inf"),
    ({"when": {1.5: "x"}}, r"\$\.when has the key 1\.5"),
    ({"deep": nested(500)}, r"nested deeper than 500 levels"),  # 501 with the dict
]


@pytest.mark.parametrize(("data", "match"), NOT_STRICT_JSON)
def test_event_data_that_would_not_come_back_unchanged_is_refused(data, match):
    with pytest.raises(ConfigurationError, match=match):
        RuntimeEvent(runtime_type="t", data=data)
    with pytest.raises(ConfigurationError, match=match):
        ControlEvent(action="a", data=data)


def test_event_data_nested_500_levels_is_accepted_and_round_trips():
    ev = RuntimeEvent(runtime_type="t", data={"deep": nested(499)})  # 500 levels with the dict
    assert event_from_dict(json.loads(json.dumps(ev.to_dict()))) == ev


def test_restoring_an_event_takes_its_stored_data_as_it_is():
    # an older agentkit stored NaN (as the token NaN) and deeper nesting: still readable
    data = json.loads('{"n": NaN, "deep": ' + "[" * 600 + "]" * 600 + "}")
    ev = event_from_dict({"type": "runtime", "id": "x", "timestamp": 0, "runtime_type": "t", "data": data})
    assert ev.data is data
    with pytest.raises(ConfigurationError, match="not JSON-serialisable"):  # new events are checked
        RuntimeEvent(runtime_type="t", data=ev.data)


def test_event_ids_are_128_random_bits_and_differ_in_a_forked_child():
    import os
    import re

    from agentkit.events import new_id

    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    if not hasattr(os, "fork"):
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id must not repeat the parent's
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{32}", child) and child != new_id()
