"""Background jobs: a model starts three commands at once, the conversation goes on,
and a completion comes back as a runtime event that schedules the next inference.

Runs offline with a ScriptedModel, or on a real model when one is configured the way
the quickstart's is (AGENTKIT_MODEL=openai:gpt-4.1-mini, or OPENAI_API_KEY /
ANTHROPIC_API_KEY with the provider's extra installed):

    python examples/background_jobs.py
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import Future

from _pick_model import pick_model

from agentkit import GenerateResult, ScriptedModel, Session, ToolCall, filesystem_tools, shell_tools
from agentkit.events import RuntimeEvent
from agentkit.execution import LocalExecutionContext
from agentkit.models import ModelRequest

_print_lock = threading.Lock()


def say(*parts: object) -> None:
    """print() from several threads without interleaving lines."""
    with _print_lock:
        print(*parts, flush=True)


SUITES = {"unit": (0.2, 0), "lint": (1.5, 1), "e2e": (30, 0)}


def suite_script(name: str) -> str:
    seconds, exit_code = SUITES[name]
    return f"echo {name}: running; sleep {seconds}; echo {name}: done; exit {exit_code}"


def suite(name: str) -> ToolCall:
    return ToolCall("start_shell", {"command": "bash", "args": ["-c", suite_script(name)]})


SYSTEM = (
    "You run test suites as background jobs with start_shell (command 'bash', args ['-c', script]). "
    + " ".join(f"The {name} suite's script is: {suite_script(name)}" for name in SUITES)
    + " Start every suite at once, then report each job that finishes: its exit code and what still runs."
)


def summarise(request: ModelRequest) -> str:
    """The scripted model's reply: read the job summaries it was shown."""
    lines = []
    for message in request.messages:
        text = message.text if message.role == "user" else ""
        if text.startswith('<runtime-event type="job-'):
            data = json.loads(text.split(">", 1)[1].rsplit("<", 1)[0])
            still = ", ".join(data["still_running"]) or "nothing"
            lines.append(f"{data['execution_id']} exited {data.get('exit_code')}; still running: {still}")
    return "Job report: " + " | ".join(lines)


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="agentkit-jobs-")
    model, label = pick_model(ScriptedModel([
        [suite("unit"), suite("lint"), suite("e2e")],
        "Started unit, lint and e2e tests in the background.",
        summarise,
        summarise,  # lint may finish before the example ends, on a slow machine
    ]))
    say(f"using {label}")
    with LocalExecutionContext(workdir) as context:
        tools = shell_tools(context, allowed_commands=["bash"]) + filesystem_tools(context)
        wakeups: list[Future[GenerateResult]] = []

        def on_job_event(event) -> None:  # raw job events: live output for the operator
            if event.type == "output":
                say(f"  [{event.execution_id} {event.stream}] {event.chunk.rstrip()}")
            elif event.type == "finished":
                say(f"  [{event.execution_id}] {event.state.state}, exit code {event.state.exit_code}")

        unsubscribe = context.jobs.subscribe(on_job_event)
        with Session(model, tools=tools, execution_context=context, system=SYSTEM) as session:

            def on_session_event(event) -> None:  # a completion is committed: wake the model
                if isinstance(event, RuntimeEvent) and event.runtime_type in ("job-finished", "job-failed"):
                    # completions within 0.1 s of each other share one inference
                    wakeups.append(session.schedule_generate("jobs", debounce=0.1))

            session.subscribe(on_session_event)
            session.push_user_message("Run the unit, lint and e2e suites in parallel.")
            result = session.generate()
            say("model:", result.text)
            for call in result.tool_calls:
                say("  tool result:", call.output.value)

            deadline = time.monotonic() + 30
            while not wakeups and time.monotonic() < deadline:
                time.sleep(0.02)
            if wakeups:
                answer = wakeups[0].result(timeout=60)  # the inference the first completion started
                say("model:", answer.text)
            else:  # a real model may not have started any job
                say("no job finished within 30 s")

            kinds = [e.runtime_type for e in session.events if isinstance(e, RuntimeEvent)]
            say("runtime events in the log:", ", ".join(sorted(set(kinds))))
            running = [s.execution_id for s in context.jobs.list() if s.running]
            say("still running at the end:", ", ".join(running) or "nothing")
            session.abort_session("example complete", abort_jobs=True)
            say("after abort_session(abort_jobs=True):",
                ", ".join(f"{s.execution_id}={s.state}" for s in context.jobs.list()))
        unsubscribe()


if __name__ == "__main__":
    main()
