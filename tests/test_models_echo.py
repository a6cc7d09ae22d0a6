"""EchoModel: the offline demo model behind ``--model echo``."""

from __future__ import annotations

import pytest
from _tools import add

from agentkit import CancelledError, ConfigurationError, ModelError, Session, get_model
from agentkit.models import EchoModel
from agentkit.models.registry import _SPEC_FORMS
from agentkit.streaming import TextDeltaEvent


def _answer(session: Session, text: str) -> str:
    session.push_user_message(text)
    return session.generate().text


def test_the_spec_echo_is_in_the_provider_table():
    assert isinstance(get_model("echo"), EchoModel)
    model = get_model("echo:demo")
    assert isinstance(model, EchoModel) and model.model_name == "demo"
    assert "echo" in [form for form, _ in _SPEC_FORMS]
    with pytest.raises(ConfigurationError, match="'echo', the offline demo"):
        get_model("bogus")


def test_it_echoes_and_calls_tools_by_its_documented_rules():
    with Session(model="echo", tools=[add]) as s:
        assert _answer(s, "hi there") == "echo: hi there"
        assert _answer(s, 'call add {"a": 2, "b": 40}') == "add returned: 42"
        assert _answer(s, "call nope") == "nope returned (error): unknown tool 'nope'; available tools: add"
        assert _answer(s, "call add {not json") == "echo: the input of 'call add' is not JSON: {not json"
        assert _answer(s, "call add [1]") == "echo: the input of 'call add' must be a JSON object"
        assert "count <n>" in _answer(s, "help")
        assert _answer(s, "count 3") == "1 2 3"
        assert _answer(s, "count many").startswith("echo: 'count' takes a whole number")
        s.push_user_message("fail")
        with pytest.raises(ModelError, match="failed on purpose"):
            s.generate()


def test_count_streams_one_number_per_delta_and_stops_when_cancelled():
    with Session(model=EchoModel(delay=0)) as s:
        s.push_user_message("count 5")
        with s.stream() as stream:
            deltas = [e.text for e in stream if isinstance(e, TextDeltaEvent)]
        assert deltas == ["1", " 2", " 3", " 4", " 5"]
    with Session(model=EchoModel(delay=0.05)) as s:
        s.push_user_message("count 1000000")
        stream = s.stream()
        for event in stream:
            if isinstance(event, TextDeltaEvent) and event.text == " 3":
                break
        stream.close()
        with pytest.raises(CancelledError):
            _ = stream.result


def test_bad_delay_is_refused():
    with pytest.raises(ConfigurationError, match="delay must be a number of seconds >= 0"):
        EchoModel(delay=-1)



def test_call_ids_are_unique_across_model_instances(tmp_path):
    """A resumed conversation (a new process, a new EchoModel) never repeats a call id:
    a repeated id would be answered from the earlier call's result."""
    from agentkit import FileEventStore

    for _ in range(2):
        with Session.open("s", store=FileEventStore(tmp_path), model=EchoModel(), tools=[add]) as s:
            assert _answer(s, 'call add {"a": 1, "b": 2}') == "add returned: 3"
    with Session.open("s", store=FileEventStore(tmp_path), model=EchoModel(), tools=[add]) as s:
        ids = [e.tool_call_id for e in s.events if e.type == "tool-result"]
        assert len(ids) == 2 and len(set(ids)) == 2
