"""PlanningAgent: plan, execute, replan, synthesize; budgets; resume after a real crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _plan_child import GOAL, answer, current_step, executor, planner, synthesizer, work_tool
from _procs import alive, within

from agentkit import (
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    Limits,
    PlanningAgent,
    PlanResult,
    ScriptedModel,
    Session,
    Usage,
)
from agentkit.events import ControlEvent
from agentkit.models import ModelSettings
from agentkit.planning import Stage

ROOT = Path(__file__).resolve().parents[1]


def replanner(*decisions):
    """A replanner that gives ``decisions`` in order (the last one repeats)."""
    calls: list[str] = []

    def run(request):
        calls.append(request.messages[0].content[0].text)
        return answer(decisions[min(len(calls), len(decisions)) - 1])

    model = FunctionModel(run)
    model.prompts = calls  # type: ignore[attr-defined]
    return model


def actions(session: Session) -> list[str]:
    return [e.action for e in session.events if isinstance(e, ControlEvent) and e.action.startswith("plan-")]


def test_a_failing_step_is_revised_and_the_run_goes_on(tmp_path):
    marker = tmp_path / "work.log"
    revise = {"decision": "revise", "reason": "beta is down; use the mirror",
              "steps": [{"description": "collect beta from the mirror", "tools": ["work"]},
                        {"description": "collect gamma"}]}
    rp = replanner(revise)
    synth = synthesizer()
    agent = PlanningAgent(executor(), tools=[work_tool(marker, fail_on=("collect beta",))],
                          planner=planner(["collect alpha", "collect beta", "collect gamma"]),
                          replanner=rp, synthesizer=synth)
    with Session() as session:
        result = agent.run(GOAL, session=session)
        assert isinstance(result, PlanResult)
        assert [(s.description, s.ok) for s in result.steps] == [
            ("collect alpha", True), ("collect beta", False),
            ("collect beta from the mirror", True), ("collect gamma", True),
        ]
        assert "beta is unavailable" in result.steps[1].error
        assert result.revisions == 1 and result.finish_reason == "completed"
        assert [s.description for s in result.plan.steps] == [
            "collect alpha", "collect beta", "collect beta from the mirror", "collect gamma"]
        assert len(rp.prompts) == 1 and "Step 2 failed" in rp.prompts[0]  # only after the failure
        assert result.text == "Report: collect alpha; collect beta from the mirror; collect gamma"
        assert actions(session) == [
            "plan-created",
            "plan-step-started", "plan-step-finished",
            "plan-step-started", "plan-step-finished", "plan-replanned",
            "plan-step-started", "plan-step-finished",
            "plan-step-started", "plan-step-finished",
            "plan-synthesized",
        ]
        # the control events are not shown to a model: the conversation is goal -> answer
        assert [(m.role, m.text) for m in session.model_messages()] == [("user", GOAL), ("assistant", result.text)]
        # every stage's usage is counted
        recorded = sum((Usage.from_dict(e.data["usage"]) for e in session.events
                        if isinstance(e, ControlEvent) and "usage" in e.data), Usage())
        assert result.usage == recorded and result.usage.total_tokens > 0
    assert marker.read_text().splitlines() == [
        "collect alpha", "collect beta", "collect beta from the mirror", "collect gamma"]


def test_the_executor_sees_the_goal_the_plan_and_earlier_results(tmp_path):
    ex = executor()
    agent = PlanningAgent(ex, tools=[work_tool(tmp_path / "m")], planner=planner(["collect alpha", "collect beta"]),
                          synthesizer=synthesizer())
    agent.run(GOAL)
    second = [r for r in ex.requests if current_step(r) == "collect beta"][0]
    prompt = second.messages[0].content[0].text
    assert GOAL in prompt
    assert "1. [done] collect alpha\n   result: result of collect alpha" in prompt
    assert "2. [current] collect beta (suggested tools: work)" in prompt
    assert second.system.startswith("You are the executor")


def test_replan_after_always_asks_after_every_step():
    rp = replanner({"decision": "continue"})
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))],
                          planner=planner(["collect alpha", "collect beta", "collect gamma"]),
                          replanner=rp, synthesizer=synthesizer(), replan_after="always")
    result = agent.run(GOAL)
    assert [s.ok for s in result.steps] == [True, True, True]
    assert [p.split("\n\n")[-1].split(" ")[1] for p in rp.prompts] == ["1", "2", "3"]
    assert result.revisions == 0


def test_the_replanner_may_finish_early():
    rp = replanner({"decision": "finish", "reason": "alpha answers it"})
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))],
                          planner=planner(["collect alpha", "collect beta"]),
                          replanner=rp, synthesizer=synthesizer(), replan_after="always")
    result = agent.run(GOAL)
    assert [s.description for s in result.steps] == ["collect alpha"]
    assert result.finish_reason == "finished-early"
    assert result.text == "Report: collect alpha"


def test_max_revisions_bounds_the_replanner(tmp_path):
    marker = tmp_path / "m"
    counter = iter(range(100))
    rp = FunctionModel(lambda r: answer({"decision": "revise", "steps": [{"description": f"retry {next(counter)}"}]}))
    failing = {"collect alpha", *(f"retry {i}" for i in range(100))}
    agent = PlanningAgent(executor(), tools=[work_tool(marker, fail_on=tuple(failing))],
                          planner=planner(["collect alpha"]), replanner=rp, synthesizer=synthesizer(),
                          max_revisions=2)
    result = agent.run(GOAL)
    assert rp.request_count == 2  # not asked again once its revisions are spent
    assert result.revisions == 2
    assert [s.description for s in result.steps] == ["collect alpha", "retry 0", "retry 1"]
    assert not any(s.ok for s in result.steps)
    assert result.finish_reason == "completed"


def test_a_limit_stops_execution_and_goes_straight_to_synthesis(tmp_path):
    marker = tmp_path / "m"
    synth = synthesizer()
    agent = PlanningAgent(executor(), tools=[work_tool(marker)],
                          planner=planner(["collect alpha", "collect beta", "collect gamma", "collect delta"]),
                          synthesizer=synth, limits=Limits(model_calls=5))
    with Session() as session:
        result = agent.run(GOAL, session=session)
        budget = [e.data for e in session.events if isinstance(e, ControlEvent) and e.action == "plan-budget-exceeded"]
    # planner 1 + two steps of 2 model calls each = 5: no third step
    assert [s.description for s in result.steps] == ["collect alpha", "collect beta"]
    assert result.finish_reason == "budget-exceeded"
    assert budget[0]["limit"] == "model_calls" and budget[0]["maximum"] == 5
    assert "the budget ran out" in synth.requests[0].messages[0].content[0].text
    assert result.text == "Report: collect alpha; collect beta"


def test_a_token_limit_stops_a_runaway_step_inside_it():
    from agentkit import ToolCall, tool

    @tool
    def dig(n: int) -> str:
        """Dig."""
        return "x" * 2000

    runaway = FunctionModel(lambda r: ToolCall(name="dig", input={"n": len(r.messages)}))
    agent = PlanningAgent(runaway, tools=[dig], planner=planner(["dig deep", "dig deeper"]),
                          synthesizer=synthesizer(), limits=Limits(total_tokens=4000),
                          executor=Stage(options={"max_steps": 100}))
    result = agent.run(GOAL)
    assert len(result.steps) == 1 and not result.steps[0].ok
    assert result.steps[0].finish_reason == "budget-exceeded"
    assert runaway.request_count < 100
    assert result.finish_reason == "budget-exceeded"


def test_an_executor_error_is_a_failed_step_the_replanner_reads():
    broken = FunctionModel(lambda r: (_ for _ in ()).throw(RuntimeError("provider down")))
    rp = replanner({"decision": "finish", "reason": "cannot go on"})
    agent = PlanningAgent(broken, tools=[], planner=planner(["collect alpha", "collect beta"]),
                          replanner=rp, synthesizer=synthesizer())
    result = agent.run(GOAL)
    assert [(s.ok, s.finish_reason) for s in result.steps] == [(False, "error")]
    assert "provider down" in result.steps[0].error
    assert "provider down" in rp.prompts[0]
    assert result.finish_reason == "finished-early"


def test_stages_take_their_own_models_and_settings():
    default = ScriptedModel([])  # never called: every stage has its own model
    ex = executor()
    agent = PlanningAgent(
        default, tools=[work_tool(Path(os.devnull))],
        planner={"model": planner(["collect alpha"]), "settings": ModelSettings(temperature=0)},
        executor=Stage(model=ex, system="Be thorough.", options={"settings": ModelSettings(reasoning_budget=2048)}),
        synthesizer=synthesizer(),
    )
    result = agent.run(GOAL)
    assert result.steps[0].ok
    assert agent.stage("planner").options["settings"].temperature == 0
    assert ex.requests[0].settings.reasoning_budget == 2048
    assert ex.requests[0].system.endswith("Be thorough.")
    assert default.request_count == 0


def test_a_finished_run_is_not_resumed_and_another_goal_starts_a_new_run():
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))], planner=planner(["collect alpha"]),
                          synthesizer=synthesizer())
    with Session() as session:
        first = agent.run(GOAL, session=session)
        second = agent.run(GOAL, session=session)
        assert first.run_id != second.run_id and not second.resumed
        assert actions(session).count("plan-created") == 2


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_plan_steps": 0}, "max_plan_steps"),
    ({"max_revisions": -1}, "max_revisions"),
    ({"replan_after": "sometimes"}, "replan_after"),
    ({"limits": {"total_tokens": 5}}, "limits must be a Limits"),
    ({"executor": {"model": "echo", "output_type": int}}, "may not set output_type"),
    ({"planner": {"model": "echo", "max_stepz": 2}}, "max_stepz"),
    ({"synthesizer": 42}, "synthesizer: model must be"),
])
def test_bad_configuration_is_refused_at_construction(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        PlanningAgent("echo", **kwargs)


def test_a_planning_run_killed_mid_plan_resumes_without_replanning_or_rerunning_finished_steps(tmp_path):
    root, marker = tmp_path / "store", tmp_path / "work.log"
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "_plan_child.py"), str(root), "plan-1", str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "step-2-running", line + child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)  # a real crash, in the middle of step 2's tool call
        child.wait(10)
        assert not alive(child.pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()  # now, not when the collector gets to it (another test counts fds)
        child.stderr.close()
    assert marker.read_text().splitlines() == ["collect alpha", "collect beta"]

    store = FileEventStore(root)
    never = FunctionModel(lambda r: (_ for _ in ()).throw(AssertionError("the planner was asked again")))
    agent = PlanningAgent(executor(), tools=[work_tool(marker)], planner=never, synthesizer=synthesizer())
    with Session.open("plan-1", store=store) as session:
        assert actions(session) == ["plan-created", "plan-step-started", "plan-step-finished", "plan-step-started"]
        result = within(lambda: agent.run(GOAL, session=session), 60)
        assert result.resumed
        assert never.request_count == 0
        assert [(s.description, s.ok, s.attempt) for s in result.steps] == [
            ("collect alpha", True, 1), ("collect beta", True, 2), ("collect gamma", True, 1)]
        assert result.text == "Report: collect alpha; collect beta; collect gamma"
        assert [(m.role, m.text) for m in session.model_messages()] == [("user", GOAL), ("assistant", result.text)]
        # the usage before the crash (planner, step 1) is part of the run's
        assert result.usage.total_tokens > sum((s.usage for s in result.steps), Usage()).total_tokens
    # step 1 ran once; step 2 ran again from scratch (its tool call was lost in the crash)
    assert marker.read_text().splitlines() == ["collect alpha", "collect beta", "collect beta", "collect gamma"]
    # the interrupted attempt's child session stays, with its uncertain tool call
    first_attempt = result.steps[1].session_id.replace("-2-2", "-2-1")
    assert first_attempt in store.list_sessions()
    with Session.open(first_attempt, store=store) as crashed:
        assert [u.tool_name for u in crashed.uncertain_tool_executions()] == ["work"]


def test_resuming_with_another_goal_is_refused(tmp_path):
    store = FileEventStore(tmp_path)
    broken_synth = FunctionModel(lambda r: (_ for _ in ()).throw(RuntimeError("synthesizer down")))
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))], planner=planner(["collect alpha"]),
                          synthesizer=broken_synth)
    with Session.open("s", store=store) as session:
        with pytest.raises(RuntimeError, match="synthesizer down"):
            agent.run(GOAL, session=session)
        with pytest.raises(ConfigurationError, match="unfinished planning run for another goal"):
            agent.run("something else", session=session)
        fixed = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))], planner=planner(["never"]),
                              synthesizer=synthesizer())
        result = fixed.run(GOAL, session=session)
        assert result.resumed and result.text == "Report: collect alpha"


def test_the_example_runs_offline_and_shows_the_revision():
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "planning_agent.py")],
                         capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "2. [FAILED] Find the population of Oporto" in out.stdout
    assert "revisions: 1" in out.stdout
    assert out.stdout.rstrip().endswith("answer: Lisbon is larger by 313,000 people (545,000 vs 232,000).")


def test_an_empty_plan_is_sent_back_to_the_planner():
    replies = iter([answer({"thought": "nothing to do", "steps": []}),
                    answer({"thought": "one step", "steps": [{"description": "collect alpha"}]})])
    planner_model = FunctionModel(lambda r: next(replies))
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))], planner=planner_model,
                          synthesizer=synthesizer())
    result = agent.run(GOAL)
    assert planner_model.request_count == 2
    assert [s.description for s in result.steps] == ["collect alpha"]


def test_deps_reach_the_executors_tools():
    from agentkit import ToolCall, ToolContext, tool

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is asking."""
        return ctx.deps["user"]

    def run(request):
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall(name="whoami", input={})
        return answer({"success": True, "result": last.content[0].output.as_text()})

    agent = PlanningAgent(FunctionModel(run), tools=[whoami], planner=planner(["greet"]), synthesizer=synthesizer())
    assert agent.run(GOAL, deps={"user": "ana"}).steps[0].result == "ana"


def test_one_agent_runs_goals_on_several_threads_at_once(tmp_path):
    import threading

    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")],
                          planner=planner(["collect alpha", "collect beta"]), synthesizer=synthesizer())
    results: list[PlanResult] = []
    lock = threading.Lock()

    def go():
        r = agent.run(GOAL)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4 and len({r.run_id for r in results}) == 4
    assert all(r.text == "Report: collect alpha; collect beta" for r in results)


def test_a_cancelled_run_stops_and_a_later_run_resumes_it(tmp_path):
    import threading

    from agentkit import CancelledError, CancelToken, ToolContext, tool

    entered = threading.Event()

    @tool
    def work(step: str, ctx: ToolContext) -> str:
        """Work."""
        if step == "collect beta" and not ctx.deps:
            entered.set()
            ctx.cancel.wait(30)
        return f"result of {step}"

    agent = PlanningAgent(executor(), tools=[work], planner=planner(["collect alpha", "collect beta"]),
                          synthesizer=synthesizer())
    token = CancelToken()
    threading.Thread(target=lambda: (entered.wait(10), token.cancel("stop")), daemon=True).start()
    with Session.open("c", store=FileEventStore(tmp_path)) as session:
        with pytest.raises(CancelledError):
            within(lambda: agent.run(GOAL, session=session, cancel=token))
        assert actions(session)[-1] == "plan-step-started"
        result = agent.run(GOAL, session=session, deps={"fast": True})
    assert result.resumed and [s.attempt for s in result.steps] == [1, 2]


def test_plans_are_cut_to_max_plan_steps_also_when_revised(tmp_path):
    many = [f"collect item {i}" for i in range(20)]
    rp = replanner({"decision": "revise", "steps": [{"description": f"retry {i}"} for i in range(20)]})
    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m", fail_on=("collect item 0",))],
                          planner=planner(many), replanner=rp, synthesizer=synthesizer(), max_plan_steps=3)
    result = agent.run(GOAL)
    assert [s.description for s in result.steps] == ["collect item 0", "retry 0", "retry 1"]
    assert len(result.plan.steps) == 3


def test_a_run_stopped_while_planning_does_not_repeat_the_goal(tmp_path):
    broken = FunctionModel(lambda r: (_ for _ in ()).throw(RuntimeError("planner down")))
    with Session() as session:
        with pytest.raises(RuntimeError):
            PlanningAgent(executor(), planner=broken).run(GOAL, session=session)
        agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")], planner=planner(["collect alpha"]),
                              synthesizer=synthesizer())
        result = agent.run(GOAL, session=session)
        assert [(m.role, m.text) for m in session.model_messages()] == [("user", GOAL), ("assistant", result.text)]


def test_limits_bound_the_planner_too_and_say_so():
    agent = PlanningAgent(executor(), planner=planner(["collect alpha"]), limits=Limits(model_calls=0))
    with pytest.raises(ConfigurationError, match="the planner gave no plan .*budget-exceeded"):
        agent.run(GOAL)


def test_a_replanner_stopped_by_the_limits_lets_the_plan_go_on(tmp_path):
    # the replanner is sent back once (an invalid decision); its retry is past the limit
    rp = FunctionModel(lambda r: answer({"decision": "sideways"}))
    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m", fail_on=("collect alpha",))],
                          planner=planner(["collect alpha", "collect beta"]), replanner=rp,
                          synthesizer=synthesizer(), limits=Limits(model_calls=4))
    with Session() as session:
        result = agent.run(GOAL, session=session)
        replanned = [e.data for e in session.events if isinstance(e, ControlEvent) and e.action == "plan-replanned"]
    assert rp.request_count == 1
    assert replanned[0]["decision"] == "continue" and "gave no decision" in replanned[0]["reason"]
    assert result.finish_reason == "budget-exceeded"


def test_a_stage_may_be_an_agent_without_tools():
    from agentkit import Agent, Hooks, tool

    seen: list[str] = []
    hooks = Hooks(before_model_request=lambda request: seen.append(request.system[-13:]) or request)
    synth = Agent(synthesizer(), system="Sign it, Ana.", max_steps=3, hooks=hooks)
    agent = PlanningAgent(executor(), tools=[work_tool(Path(os.devnull))], planner=planner(["collect alpha"]),
                          synthesizer=synth)
    stage = agent.stage("synthesizer")
    assert stage.system == "Sign it, Ana." and stage.options["max_steps"] == 3
    assert agent.run(GOAL).text == "Report: collect alpha"
    assert seen == ["Sign it, Ana."]  # its system prompt and its hooks came along

    @tool
    def extra() -> str:
        """Extra."""
        return "x"

    with pytest.raises(ConfigurationError, match="executor: an Agent given as a stage brings its model"):
        PlanningAgent("echo", executor=Agent("echo", tools=[extra]))
    with pytest.raises(ConfigurationError, match="may not set output_type"):
        PlanningAgent("echo", planner=Agent("echo", output_type=int))
