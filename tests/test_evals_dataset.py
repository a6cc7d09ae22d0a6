"""dataset_from_sessions: stored sessions as a pydantic-evals Dataset (agentkit/evals/_dataset.py);
a YAML or JSON file of cases, loaded by pydantic-evals' own Dataset.from_file, run as an eval."""

from __future__ import annotations

from typing import Any

import pytest
from _evals import require_evals

from agentkit import Agent, ConfigurationError, FileEventStore, FunctionModel, ScriptedModel, Session, ToolCall, tool

require_evals()

from pydantic_evals import Dataset  # noqa: E402

from agentkit.evals import (  # noqa: E402
    EVALUATORS,
    AgentOutput,
    AnswerMatches,
    ToolCallsMatch,
    agent_task,
    dataset_from_sessions,
)


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def _store(tmp_path) -> FileEventStore:
    store = FileEventStore(tmp_path / "sessions")
    agent = Agent(ScriptedModel([ToolCall("lookup", {"order": "A1"}), "A1 has shipped."]), tools=[lookup])
    agent.session("a-tools", store).ask("Where is order A1?")
    two_turns = Agent(ScriptedModel(["Hello!", "Goodbye!"]))
    s = two_turns.session("b-two-turns", store)
    s.ask("hi")
    s.ask("bye")
    Agent(ScriptedModel(["4"])).session("c-plain", store).ask("2+2?")
    with Session.open("d-empty", store=store, model=ScriptedModel([])) as empty:
        empty.push_runtime_event("note", {"what": "no prompt yet"})
    return store


def test_no_ids_is_every_session_with_a_prompt_and_a_case_is_its_first_turn(tmp_path):
    store = _store(tmp_path)
    dataset = dataset_from_sessions(store)
    assert isinstance(dataset, Dataset)
    assert [c.name for c in dataset.cases] == ["a-tools", "b-two-turns", "c-plain"]  # d-empty has no prompt
    assert [c.inputs for c in dataset.cases] == ["Where is order A1?", "hi", "2+2?"]
    tools_case, two_turns, _ = dataset.cases
    expected = tools_case.expected_output
    assert isinstance(expected, AgentOutput)
    assert expected.text == "A1 has shipped."
    assert [(c.tool_name, c.input, c.output.as_text()) for c in expected.tool_calls] == [
        ("lookup", {"order": "A1"}, "A1: shipped")]
    assert len(expected.steps) == 2 and expected.usage.total_tokens > 0
    assert tools_case.metadata == {"session_id": "a-tools", "turns": 1, "model": "scripted",
                                   "tool_calls": [{"name": "lookup", "input": {"order": "A1"}}]}
    # the first turn only: the second prompt's answer is not the expected output
    assert two_turns.expected_output.text == "Hello!" and two_turns.metadata["turns"] == 2


def test_ids_are_those_sessions_in_that_order(tmp_path):
    store = _store(tmp_path)
    dataset = dataset_from_sessions(store, ["c-plain", "a-tools"], name="picked")
    assert dataset.name == "picked"
    assert [(c.name, c.inputs) for c in dataset.cases] == [("c-plain", "2+2?"), ("a-tools", "Where is order A1?")]


def test_bad_ids_are_named_before_anything_runs(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(ConfigurationError, match=r"'nope'.*its sessions are: a-tools, b-two-turns, c-plain, d-empty"):
        dataset_from_sessions(store, ["a-tools", "nope"])
    with pytest.raises(ConfigurationError, match=r"d-empty \(no user message\)"):
        dataset_from_sessions(store, ["d-empty"])
    with pytest.raises(ConfigurationError, match=r"session_ids=\['a-tools'\]"):
        dataset_from_sessions(store, "a-tools")
    with pytest.raises(ConfigurationError, match="more than once"):
        dataset_from_sessions(store, ["a-tools", "a-tools"])
    with pytest.raises(ConfigurationError, match="needs an event store"):
        dataset_from_sessions("sessions/")  # type: ignore[arg-type]


def test_an_empty_store_gives_an_empty_dataset(tmp_path):
    assert dataset_from_sessions(FileEventStore(tmp_path)).cases == []


def test_the_recorded_sessions_pass_against_the_same_answers_and_a_different_answer_fails(tmp_path):
    store = _store(tmp_path)
    dataset = dataset_from_sessions(store, ["a-tools", "c-plain"])
    dataset.add_evaluator(ToolCallsMatch())
    dataset.add_evaluator(AnswerMatches())

    def reply(request):
        last = request.messages[-1]
        if last.text == "Where is order A1?":
            return ToolCall("lookup", {"order": "A1"})
        return "A1 has shipped." if last.role == "tool" else "five"

    report = dataset.evaluate_sync(agent_task(Agent(FunctionModel(reply), tools=[lookup])), progress=False)
    verdicts = {c.name: {n: a.value for n, a in c.assertions.items()} for c in report.cases}
    assert verdicts == {"a-tools": {"ToolCallsMatch": True, "AnswerMatches": True},
                        "c-plain": {"ToolCallsMatch": True, "AnswerMatches": False}}
    assert report.cases[1].assertions["AnswerMatches"].reason == "expected '4'; got 'five'"


_YAML = """\
name: support
cases:
  - name: refund
    inputs: "Refund order A7"
    expected_output: "Refund started for A7."
    evaluators:
      - ToolCalled:
          tool: refund
          arguments: {order: A7}
  - name: status
    inputs:
      prompt: "Where is A1?"
    evaluators:
      - ToolNotCalled: refund
evaluators:
  - MaxSteps: 3
  - MaxTokens: 10000
"""


@tool
def refund(order: str) -> str:
    """Start a refund."""
    return f"refund started for {order}"


def _support_reply(request):
    last = request.messages[-1]
    if last.role == "tool":
        return "Refund started for A7." if last.content[0].tool_name == "refund" else "A1 has shipped."
    if "Refund" in last.text:
        return ToolCall("refund", {"order": "A7"})
    return ToolCall("lookup", {"order": "A1"})


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_a_yaml_or_json_file_becomes_a_dataset_and_is_evaluated(tmp_path, fmt):
    path = tmp_path / "support.yaml"
    path.write_text(_YAML)
    if fmt == "json":  # the same cases as JSON: pydantic-evals' own writer
        loaded = Dataset[Any, str, Any].from_file(path, custom_evaluator_types=EVALUATORS)
        path = tmp_path / "support.json"
        loaded.to_file(path, custom_evaluator_types=EVALUATORS)
    dataset = Dataset[Any, str, Any].from_file(path, custom_evaluator_types=EVALUATORS)
    dataset.add_evaluator(AnswerMatches())
    agent = Agent(FunctionModel(_support_reply), tools=[lookup, refund])
    report = dataset.evaluate_sync(agent_task(agent), progress=False)
    assert report.failures == []
    verdicts = {c.name: {n: a.value for n, a in c.assertions.items()} for c in report.cases}
    assert verdicts == {
        "refund": {"ToolCalled(refund)": True, "MaxSteps": True, "MaxTokens": True, "AnswerMatches": True},
        # status has no expected answer: AnswerMatches fails, saying so
        "status": {"ToolNotCalled(refund)": True, "MaxSteps": True, "MaxTokens": True, "AnswerMatches": False},
    }
    assert "no expected output" in report.cases[1].assertions["AnswerMatches"].reason


def test_a_dataset_from_sessions_saves_to_yaml_and_loads_back(tmp_path):
    dataset = dataset_from_sessions(_store(tmp_path))
    path = tmp_path / "cases.yaml"
    dataset.to_file(path)
    again = Dataset[str, AgentOutput, dict].from_file(path)
    assert [(c.name, c.inputs, c.metadata) for c in again.cases] == [
        (c.name, c.inputs, c.metadata) for c in dataset.cases]
    assert [c.expected_output for c in again.cases] == [c.expected_output for c in dataset.cases]
