"""Background jobs inside a Session: a model starts four jobs, the session goes on, the
first completion arrives as a runtime event and a scheduled generation sees it."""

from __future__ import annotations

import json
import threading

import pytest
from _procs import wait_for

from agentkit import ConfigurationError, ScriptedModel, Session, ToolCall, shell_tools
from agentkit.events import RuntimeEvent
from agentkit.execution import LocalExecutionContext

WAIT = 'while [ ! -f release ]; do sleep 0.05; done; echo "{name} passed"'
FIRST = "while [ ! -f go-a ]; do sleep 0.05; done; echo building A; exit 3"


def runtime(session, kind):
    return [e for e in session.events if isinstance(e, RuntimeEvent) and e.runtime_type == kind]


def assert_tool_calls_followed_by_results(messages):
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            assert messages[i + 1].role == "tool"
            assert {p.tool_call_id for p in messages[i + 1].content} == {c.tool_call_id for c in m.tool_calls}


def test_four_jobs_first_completion_and_a_scheduled_generation(tmp_path):
    seen_at_inference = {}

    def react(request):
        seen_at_inference.update({s.execution_id: s.state for s in ctx.jobs.list()})
        return "A failed; B, C and D are still running."

    model = ScriptedModel([
        [
            ToolCall("start_shell", {"command": "bash", "args": ["-c", FIRST]}),
            ToolCall("start_shell", {"command": "bash", "args": ["-c", WAIT.format(name="B")]}),
            ToolCall("start_shell", {"command": "bash", "args": ["-c", WAIT.format(name="C")]}),
            ToolCall("start_shell", {"command": "bash", "args": ["-c", WAIT.format(name="D")]}),
        ],
        "Started the four suites.",
        "Noted.",
        react,
        "All done.",
    ])
    ctx = LocalExecutionContext(tmp_path, kill_grace=0.3)
    with ctx, Session(model, tools=shell_tools(ctx), execution_context=ctx) as session:
        session.push_user_message("Run the test suites A, B, C and D in parallel.")
        first = session.generate()
        assert first.text == "Started the four suites."
        outputs = [r.output.value for r in first.tool_calls]
        assert [o["state"] for o in outputs] == ["running"] * 4
        ids = [o["execution_id"] for o in outputs]

        # the session goes on while the jobs run
        session.push_user_message("While they run: note that C is flaky.")
        assert session.generate().text == "Noted."
        assert not runtime(session, "job-finished")

        (tmp_path / "go-a").touch()  # A finishes first

        finished = wait_for(lambda: runtime(session, "job-finished"), what="first job-finished")
        assert finished[0].data["execution_id"] == ids[0]
        assert finished[0].data["exit_code"] == 3
        assert sorted(finished[0].data["still_running"]) == sorted(ids[1:])

        future = session.schedule_generate("jobs", debounce=0.05)
        assert future.result(timeout=30).text == "A failed; B, C and D are still running."
        assert seen_at_inference == {ids[0]: "finished", ids[1]: "running", ids[2]: "running",
                                     ids[3]: "running"}
        request = model.requests[3]
        texts = [m.text for m in request.messages if m.role == "user"]
        job_texts = [t for t in texts if "runtime-event" in t]
        assert len(job_texts) == 1  # one summary, no per-chunk noise, no start notices
        assert 'type="job-finished"' in job_texts[0]
        payload = json.loads(job_texts[0].split(">", 1)[1].rsplit("<", 1)[0])
        assert payload["exit_code"] == 3 and payload["output_tail"] == "building A\n"
        assert runtime(session, "job-output")  # kept in the log, hidden from the model
        for r in model.requests:
            assert_tool_calls_followed_by_results(list(r.messages))

        (tmp_path / "release").touch()
        wait_for(lambda: len(runtime(session, "job-finished")) == 4, what="all jobs finished")
        assert session.schedule_generate("jobs").result(timeout=30).text == "All done."
        last = [m.text for m in model.requests[4].messages if "runtime-event" in m.text]
        assert len(last) == 4 and any("D passed" in t for t in last)
        states = {s.execution_id: (s.state, s.exit_code) for s in ctx.jobs.list()}
        assert states == {ids[0]: ("finished", 3), ids[1]: ("finished", 0), ids[2]: ("finished", 0),
                          ids[3]: ("finished", 0)}


def test_abort_scopes(tmp_path):
    ctx = LocalExecutionContext(tmp_path, kill_grace=0.3)
    with ctx:
        session = Session(ScriptedModel([]), execution_context=ctx)
        one = ctx.jobs.start("sleep", ["60"])
        two = ctx.jobs.start("sleep", ["60"])
        # a job started by the host (not a tool call) is announced once
        wait_for(lambda: len(runtime(session, "job-started")) == 2)
        assert sum("job-started" in m.text for m in session.model_messages()) == 2

        assert session.abort_job(one.execution_id, "not needed").state == "aborted"
        aborted = wait_for(lambda: runtime(session, "job-aborted"))
        assert aborted[0].data["reason"] == "not needed"

        ctx.jobs.start("sleep", ["60"], timeout=0.3)
        failed = wait_for(lambda: runtime(session, "job-failed"))
        assert "timed out" in failed[0].data["error"] and failed[0].data["exit_code"] < 0
        assert any('type="job-failed"' in m.text for m in session.model_messages())

        session.abort_session("user left")  # jobs survive by default
        assert ctx.jobs.get(two.execution_id).state == "running"
        session.abort_session("user left", abort_jobs=True)
        assert ctx.jobs.get(two.execution_id).state == "aborted"
        session.close()


def test_close_does_not_kill_jobs_and_stops_listening(tmp_path):
    ctx = LocalExecutionContext(tmp_path, kill_grace=0.3)
    with ctx:
        session = Session(ScriptedModel([]), execution_context=ctx)
        job = ctx.jobs.start("bash", ["-c", "sleep 0.5; echo late"])
        wait_for(lambda: runtime(session, "job-started"))
        session.close()
        assert ctx.jobs.get(job.execution_id).state == "running"
        wait_for(lambda: not ctx.jobs.get(job.execution_id).running)
        assert ctx.jobs.get(job.execution_id).state == "finished"  # not terminated by the close
        assert not runtime(session, "job-finished")


def test_job_operations_without_a_job_context_are_clear_errors():
    with Session(ScriptedModel([])) as session:
        with pytest.raises(ConfigurationError, match="execution context with jobs"):
            session.abort_job("job_x")
        with pytest.raises(ConfigurationError, match="execution context with jobs"):
            session.abort_session("x", abort_jobs=True)
        session.push_user_message("still usable: the refused call changed nothing")
        assert session.schedule_generate("k", debounce=5) is not None


def test_many_outputs_cost_one_summary(tmp_path):
    ctx = LocalExecutionContext(tmp_path)
    with ctx, Session(ScriptedModel([]), execution_context=ctx) as session:
        job = ctx.jobs.start("bash", ["-c", "for i in $(seq 1 50); do echo line$i; sleep 0.005; done"],
                             tool_call_id="from-a-tool")
        wait_for(lambda: runtime(session, "job-finished"))
        assert len(runtime(session, "job-output")) >= 2
        visible = [m.text for m in session.model_messages()]
        assert len(visible) == 1 and job.execution_id in visible[0] and "line50" in visible[0]
        assert threading.active_count() < 50


def test_a_job_finishing_during_a_tool_call_is_shown_after_the_results(tmp_path):
    """The summary of a job that ends while a tool call is still open is committed
    between the call and its result; the model sees it only after the results."""
    model = ScriptedModel([
        [ToolCall("start_shell", {"command": "bash", "args": ["-c", "echo quick"]}),
         # the second call returns only once the job's completion is committed
         ToolCall("run_command", {"command": "while [ ! -f committed ]; do sleep 0.02; done"})],
        "done",
    ])
    ctx = LocalExecutionContext(tmp_path)
    with ctx, Session(model, tools=shell_tools(ctx), execution_context=ctx) as session:
        def on_event(event):
            if isinstance(event, RuntimeEvent) and event.runtime_type == "job-finished":
                (tmp_path / "committed").touch()

        session.subscribe(on_event)
        session.push_user_message("go")
        assert session.generate().text == "done"
        kinds = [getattr(e, "runtime_type", e.type) for e in session.events]
        assert kinds.index("job-finished") < len(kinds) - 1 - kinds[::-1].index("tool-result")
        messages = list(model.requests[1].messages)
        roles = [m.role for m in messages]
        assert roles == ["user", "assistant", "tool", "user"]
        assert 'type="job-finished"' in messages[3].text and "quick" in messages[3].text
        assert_tool_calls_followed_by_results(messages)
