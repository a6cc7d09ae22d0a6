"""agent_task: an agentkit Agent as the task of a pydantic-evals evaluation, its runs on
threads in parallel (agentkit/evals/_task.py)."""

from __future__ import annotations

import threading

import pydantic
import pytest
from _evals import require_evals

from agentkit import Agent, ConfigurationError, FunctionModel, ScriptedModel, ToolCall, tool

require_evals()

from pydantic_evals import Case, Dataset  # noqa: E402

from agentkit.evals import AgentOutput, AnswerMatches, ToolCalled, ToolNotCalled, agent_task  # noqa: E402

_WAIT = 60.0  # a last guard: the barrier opens as soon as every case is running


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


@tool
def refund(order: str) -> str:
    """Start a refund."""
    return f"refund started for {order}"


def test_twenty_cases_run_in_parallel_and_the_report_judges_each(tmp_path):
    """Every case's first model call waits on one barrier of 20: it opens only when all 20
    runs are inside the model at once, so a serial evaluation would break it (and fail
    every case). Odd cases refund instead of looking up, and fail ToolNotCalled."""
    barrier = threading.Barrier(20, timeout=_WAIT)

    def reply(request):
        last = request.messages[-1]
        if last.role == "user":
            barrier.wait()
            n = int(last.text.split()[-1])
            return ToolCall("refund" if n % 2 else "lookup", {"order": f"A{n}"})
        return f"done: {last.content[0].output.as_text()}"

    agent = Agent(FunctionModel(reply), tools=[lookup, refund])
    dataset = Dataset(
        name="twenty",
        cases=[Case(name=f"case-{n}", inputs=f"order {n}", expected_output=f"done: A{n}: shipped") for n in range(20)],
        evaluators=[ToolCalled("lookup"), ToolNotCalled("refund"), AnswerMatches()],
    )
    report = dataset.evaluate_sync(agent_task(agent, name="candidate"), max_concurrency=20, progress=False)
    assert report.name == "candidate"
    assert report.failures == [] and not barrier.broken
    by_name = {c.name: c for c in report.cases}
    assert sorted(by_name) == sorted(f"case-{n}" for n in range(20))
    for n in range(20):
        case = by_name[f"case-{n}"]
        verdicts = {name: a.value for name, a in case.assertions.items()}
        ok = n % 2 == 0
        assert verdicts == {"ToolCalled(lookup)": ok, "ToolNotCalled(refund)": ok, "AnswerMatches": ok}, case.name
        assert case.metrics == {"tokens": case.output.usage.total_tokens, "steps": 2, "tool_calls": 1}
        assert [c.tool_name for c in case.output.tool_calls] == ["refund" if n % 2 else "lookup"]
    assert by_name["case-1"].assertions["ToolNotCalled(refund)"].reason == 'refund was called: refund({"order": "A1"})'
    assert "case-19" in report.render(width=200)


def test_max_concurrency_bounds_the_runs_at_once():
    """Never more than max_concurrency runs inside the model at once; a barrier of 4 opens
    twice over 8 cases, so 4 do run together."""
    barrier = threading.Barrier(4, timeout=_WAIT)
    lock = threading.Lock()
    inside = [0, 0]  # now, most seen

    def reply(request):
        with lock:
            inside[0] += 1
            inside[1] = max(inside[1], inside[0])
        try:
            barrier.wait()
            return "ok"
        finally:
            with lock:
                inside[0] -= 1

    dataset = Dataset(name="eight", cases=[Case(name=str(n), inputs=str(n)) for n in range(8)])
    report = dataset.evaluate_sync(agent_task(Agent(FunctionModel(reply))), max_concurrency=4, progress=False)
    assert report.failures == [] and len(report.cases) == 8
    assert inside[1] == 4


class Ticket(pydantic.BaseModel):
    order: str
    urgent: bool


def test_the_output_carries_text_tool_calls_usage_steps_and_structured_output():
    answer = ToolCall("final_answer", {"order": "A1", "urgent": True})
    model = ScriptedModel([ToolCall("lookup", {"order": "A1"}), answer])
    agent = Agent(model, tools=[lookup], output_type=Ticket)
    dataset = Dataset(name="one", cases=[Case(name="t", inputs={"prompt": "file a ticket for A1"})])
    report = dataset.evaluate_sync(agent_task(agent), progress=False)
    assert report.failures == []
    out = report.cases[0].output
    assert isinstance(out, AgentOutput)
    assert out.output == Ticket(order="A1", urgent=True)
    assert [c.tool_name for c in out.tool_calls] == ["lookup", "final_answer"]
    assert len(out.steps) == 2 and out.usage.total_tokens == sum(s.usage.total_tokens for s in out.steps) > 0
    assert out.finish_reason == "stop"
    assert model.requests[0].messages[-1].text == "file a ticket for A1"


def test_bad_inputs_fail_that_case_saying_what_inputs_must_be():
    dataset = Dataset(name="bad", cases=[Case(name="n", inputs=42), Case(name="ok", inputs="hi")])
    report = dataset.evaluate_sync(agent_task(Agent(ScriptedModel(["hello"]))), progress=False)
    assert [c.name for c in report.cases] == ["ok"]
    assert [f.name for f in report.failures] == ["n"]
    assert "inputs must be the prompt (a string) or a mapping with a 'prompt' string, got int" in \
        report.failures[0].error_message


def test_agent_task_needs_an_agent():
    with pytest.raises(ConfigurationError, match="needs an agentkit.Agent, got str"):
        agent_task("openai:gpt-4.1-mini")  # type: ignore[arg-type]


def test_replay_task_replays_each_stored_session_and_the_report_counts_the_turns_it_reproduced(tmp_path):
    from agentkit import FileEventStore, Session
    from agentkit.evals import ToolCallsMatch, dataset_from_sessions, replay_task

    def support(request):
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall("lookup", {"order": last.text.split()[-1]})
        return f"it says {last.content[0].output.as_text()}"

    store = FileEventStore(tmp_path)
    for n in range(3):
        with Session.open(f"chat-{n}", store=store, model=FunctionModel(support), tools=[lookup]) as s:
            s.ask(f"where is A{n}")
            s.ask(f"and B{n}")
    lookups: list[str] = []

    @tool
    def refund_instead(order: str) -> str:
        """Never run: the replay serves recorded results or answers with an error."""
        lookups.append(order)
        return "refunded"

    def candidate(request):  # answers chat-1's second turn with a different tool
        last = request.messages[-1]
        if last.role == "user" and last.text == "and B1":
            return ToolCall("refund_instead", {"order": "B1"})
        return support(request)

    dataset = dataset_from_sessions(store, inputs="session_id")
    assert sorted(c.inputs for c in dataset.cases) == ["chat-0", "chat-1", "chat-2"]
    dataset.add_evaluator(ToolCallsMatch())
    report = dataset.evaluate_sync(replay_task(store, model=FunctionModel(candidate)), progress=False)
    by_name = {c.name: c for c in report.cases}
    assert all(c.assertions["ToolCallsMatch"].value for c in report.cases)  # the first turns match
    assert {n: (c.metrics["turns"], c.metrics.get("turns_same", 0)) for n, c in by_name.items()} == {
        "chat-0": (2, 2), "chat-1": (2, 1), "chat-2": (2, 2)}
    assert by_name["chat-1"].attributes["differing_turns"] == [1]
    assert lookups == []  # "recorded" never runs a tool
    with pytest.raises(ConfigurationError, match="inputs="):
        dataset_from_sessions(store, inputs="nonsense")  # type: ignore[arg-type]
