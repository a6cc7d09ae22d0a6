"""PlanningAgent.stream: a planning run's progress and its stages' agent events, with the
result contract of Agent.stream."""

from __future__ import annotations

import json

import pytest
from _plan_child import GOAL, executor, planner, synthesizer, work_tool
from test_planning import replanner

from agentkit import (
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    Limits,
    OutputValidationError,
    PlanningAgent,
    Session,
)
from agentkit.events import ControlEvent
from agentkit.planning import (
    PlanCreatedEvent,
    PlanReplannedEvent,
    PlanStageEvent,
    PlanStepEndEvent,
    PlanStepStartEvent,
    PlanSynthesizedEvent,
)


def runs(kinds: list[str]) -> list[str]:
    """``kinds`` with repeats in a row written once."""
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]



def _top(events) -> list[str]:
    """The run's own events (the stages' come wrapped in plan-stage-event, once per stage)."""
    return runs([e.type if e.type != "plan-stage-event" else f"{e.stage}:{e.index}" for e in events])


def test_the_stream_of_a_planning_run_shows_its_progress_and_every_stage(tmp_path):
    revise = {"decision": "revise", "reason": "beta is down; use the mirror",
              "steps": [{"description": "collect beta from the mirror", "tools": ["work"]}]}
    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m", fail_on=("collect beta",))],
                          planner=planner(["collect alpha", "collect beta"]), replanner=replanner(revise),
                          synthesizer=synthesizer())
    heard: list[str] = []
    with Session() as session:
        session.subscribe(lambda e: heard.append(e.action) if isinstance(e, ControlEvent) else None)
        with agent.stream(GOAL, session=session) as stream:
            events = list(stream)
        result = stream.result
    assert _top(events) == [
        "generation-start",
        "planner:None", "plan-created",
        "plan-step-start", "executor:0", "plan-step-end",
        "plan-step-start", "executor:1", "plan-step-end",
        "replanner:None", "plan-replanned",
        "plan-step-start", "executor:2", "plan-step-end",
        "synthesizer:None", "plan-synthesized",
        "generation-end",
    ]
    # the same progress the session's log records, in the same order
    progress = [e.type for e in events if e.type.startswith("plan-") and e.type != "plan-stage-event"]
    assert len(progress) == len([a for a in heard if a.startswith("plan-")]) == 9
    created = events[[e.type for e in events].index("plan-created")]
    assert isinstance(created, PlanCreatedEvent) and not created.resumed
    assert [s.description for s in created.plan.steps] == ["collect alpha", "collect beta"]
    starts = [e for e in events if isinstance(e, PlanStepStartEvent)]
    ends = [e for e in events if isinstance(e, PlanStepEndEvent)]
    assert [(s.index, s.description) for s in starts] == [(0, "collect alpha"), (1, "collect beta"),
                                                          (2, "collect beta from the mirror")]
    assert [e.result.ok for e in ends] == [True, False, True]
    assert "beta is unavailable" in ends[1].result.error
    (replanned,) = [e for e in events if isinstance(e, PlanReplannedEvent)]
    assert replanned.decision == "revise" and replanned.after == 1 and len(replanned.plan.steps) == 3
    (synthesized,) = [e for e in events if isinstance(e, PlanSynthesizedEvent)]
    # each stage generation streams whole, wrapped: start, its steps and messages, end
    stages = [e for e in events if isinstance(e, PlanStageEvent)]
    for stage in ("planner", "executor", "replanner", "synthesizer"):
        inner = [e.event.type for e in stages if e.stage == stage]
        assert inner[0] == "generation-start" and inner[-1] == "generation-end"
        assert "message-start" in inner and "usage" in inner
    executor_calls = [e.event for e in stages if e.stage == "executor" and e.event.type == "tool-end"
                      and e.event.record.tool_name == "work"]
    assert [c.record.input["step"] for c in executor_calls] == ["collect alpha", "collect beta",
                                                                 "collect beta from the mirror"]
    # the result: the contract of Agent.stream, with the PlanResult as its output
    plan = result.output
    assert result.text == plan.text == synthesized.text == "Report: collect alpha; collect beta from the mirror"
    assert result.finish_reason == plan.finish_reason == "completed" and plan.revisions == 1
    assert result.usage == plan.usage and result.usage.total_tokens > 0
    assert [r.input["step"] for r in result.tool_calls if r.tool_name == "work"] == [
        "collect alpha", "collect beta", "collect beta from the mirror"]
    assert [s.index for s in result.steps] == list(range(len(result.steps))) and len(result.steps) >= 8
    assert [(m.role, m.text) for m in result.messages] == [("user", GOAL), ("assistant", plan.text)]
    end = json.loads(json.dumps(events[-1].to_dict()))
    assert end["result"]["output"]["text"] == plan.text and end["result"]["finish_reason"] == "completed"
    assert all(json.loads(json.dumps(e.to_dict())) for e in events)


def test_a_planning_stream_stopped_by_its_limits_streams_budget_exceeded(tmp_path):
    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")], synthesizer=synthesizer(),
                          planner=planner(["collect alpha", "collect beta", "collect gamma"]),
                          limits=Limits(model_calls=3))
    with agent.stream(GOAL) as stream:
        top = _top(list(stream))
    assert top == ["generation-start", "planner:None", "plan-created", "plan-step-start", "executor:0",
                   "plan-step-end", "budget-exceeded", "synthesizer:None", "plan-synthesized", "generation-end"]
    assert stream.result.finish_reason == "budget-exceeded"


def test_a_failed_planning_stream_ends_with_its_error_and_bad_input_fails_at_once():
    agent = PlanningAgent(FunctionModel(lambda r: "no plan, just words"))
    with pytest.raises(ConfigurationError, match="goal must be a non-empty str"):
        agent.stream("  ")
    with agent.stream("do something") as stream:
        events = list(stream)
    assert events[-1].type == "generation-end" and events[-1].error is not None
    with pytest.raises(OutputValidationError) as failed:
        _ = stream.result
    assert failed.value is events[-1].error


def test_a_resumed_planning_stream_announces_the_saved_plan(tmp_path):
    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")], planner=planner(["collect alpha"]),
                          synthesizer=synthesizer())
    store = FileEventStore(tmp_path / "store")
    with Session(store=store, session_id="run") as session:
        # a run interrupted after its plan: the plan is in the log, no step ran
        planned = agent.run(GOAL)
        session.push_user_message(GOAL)
        session.push_event(ControlEvent(action="plan-created", data={
            "run_id": "r1", "goal": GOAL, "plan": {"thought": "t", "steps": [{"description": "collect alpha"}]}}))
        with agent.stream(GOAL, session=session) as stream:
            events = list(stream)
    assert planned.text
    kinds = _top(events)
    assert kinds[:3] == ["generation-start", "plan-created", "plan-step-start"]
    assert "planner:None" not in kinds
    created = events[1]
    assert isinstance(created, PlanCreatedEvent) and created.resumed and created.run_id == "r1"
    assert stream.result.output.resumed


def test_a_planning_stream_goes_out_as_server_sent_events(tmp_path):
    from agentkit.web import sse

    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")], planner=planner(["collect alpha"]),
                          synthesizer=synthesizer())
    records = [json.loads(item[len("data: "):]) for item in sse(agent.stream(GOAL), heartbeat=None)
               if item.startswith("data: ")]
    assert [r["type"] for r in records][:2] == ["generation-start", "plan-stage-event"]
    assert "plan-step-end" in [r["type"] for r in records]
    end = records[-1]
    assert end["type"] == "generation-end" and end["result"]["text"] == "Report: collect alpha"
    assert end["result"]["output"]["steps"][0]["description"] == "collect alpha"



def test_closing_a_planning_stream_cancels_the_run_and_a_later_run_resumes_it():
    from agentkit import CancelledError, ToolContext, tool

    ran: list[str] = []

    @tool
    def work(step: str, ctx: ToolContext) -> str:
        """Do one piece of work (the first try of the second step runs until cancelled)."""
        ran.append(step)
        if ran == ["collect alpha", "collect beta"]:
            ctx.cancel.wait(60)
            return "stopped"
        return f"result of {step}"

    agent = PlanningAgent(executor(), tools=[work], planner=planner(["collect alpha", "collect beta"]),
                          synthesizer=synthesizer())
    with Session() as session:
        stream = agent.stream(GOAL, session=session)
        for event in stream:
            if isinstance(event, PlanStageEvent) and event.index == 1 and event.event.type == "tool-start":
                break  # the second step's tool is running
        stream.close()
        with pytest.raises(CancelledError):
            _ = stream.result
        kinds = [e.action for e in session.events if isinstance(e, ControlEvent) and e.action.startswith("plan-")]
        assert kinds == ["plan-created", "plan-step-started", "plan-step-finished", "plan-step-started"]
        result = agent.run(GOAL, session=session)
    assert result.resumed and result.text == "Report: collect alpha; collect beta"
    assert ran == ["collect alpha", "collect beta", "collect beta"]  # the finished step did not run again
