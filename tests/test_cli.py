"""The agentkit command, run as a real subprocess against a real file store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone

from agentkit import ApprovalPolicy, FileEventStore, ScriptedModel, Session, ToolCall, tool


def cli(*args, stdin="", env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "agentkit.cli", *args], input=stdin, capture_output=True, text=True, timeout=120, env=env
    )


def test_sessions_and_events_show_what_the_store_holds(tmp_path):
    store = FileEventStore(tmp_path)
    with Session.open("demo-1", store=store, model=ScriptedModel(["hi there"])) as s:
        s.push_user_message("hello")
        s.generate()
    out = cli("sessions", "--store", str(tmp_path))
    assert out.returncode == 0, out.stderr
    last = datetime.fromtimestamp(store.load("demo-1").events[-1].timestamp, timezone.utc)
    assert out.stdout.splitlines() == [f"demo-1  {last.isoformat(timespec='seconds')}  2 events  0 pending approvals"]
    out = cli("events", "demo-1", "--store", str(tmp_path))
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["type"] for d in lines] == ["user-message", "assistant-message"]
    assert lines[1]["content"][0]["text"] == "hi there"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def test_sessions_lists_last_activity_event_count_and_pending_approvals_one_line_each(tmp_path):
    store = FileEventStore(tmp_path)
    asking = ApprovalPolicy(mode="ask-all")
    both = [ToolCall("delete_file", {"path": "a"}), ToolCall("delete_file", {"path": "b"})]
    with Session.open("waiting-for-a-person", store=store, tools=[delete_file], approval=asking,
                      model=ScriptedModel([both])) as s:
        s.push_user_message("delete a and b")
        assert s.generate().finish_reason == "approval-required"
    with Session.open("b", store=store, model=ScriptedModel(["ok"])) as s:
        s.push_user_message("one")
    (tmp_path / "not-a-session").mkdir()
    out = cli("sessions", "--store", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    stamp = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+00:00"
    assert re.fullmatch(f"b                     {stamp}  1 event  0 pending approvals", lines[0]), lines
    assert re.fullmatch(f"waiting-for-a-person  {stamp}  [0-9]+ events  2 pending approvals", lines[1]), lines
    assert len(lines) == 2
    events = store.load("waiting-for-a-person").events
    assert lines[1].split()[2] == str(len(events))
    last = datetime.fromtimestamp(events[-1].timestamp, timezone.utc)
    assert lines[1].split()[1] == last.isoformat(timespec="seconds")


def test_a_store_directory_that_does_not_exist_is_an_error_naming_it_not_an_empty_list(tmp_path):
    missing = tmp_path / "nonexistent"
    for args in (("sessions",), ("events", "s1")):
        out = cli(*args, "--store", str(missing))
        assert out.returncode == 1 and out.stdout == ""
        assert f"agentkit: no store at {missing}: it does not exist" in out.stderr
        assert not missing.exists()  # reading created nothing
    (tmp_path / "file").write_text("x")
    out = cli("sessions", "--store", str(tmp_path / "file"))
    assert out.returncode == 1 and f"no store at {tmp_path / 'file'}: it is not a directory" in out.stderr


def test_errors_are_clear(tmp_path):
    out = cli("events", "missing", "--store", str(tmp_path))
    assert out.returncode == 1 and "no session 'missing'" in out.stderr
    out = cli("run", "hello")
    assert out.returncode != 0 and "no model" in out.stderr
    out = cli("run", "hello", "--model", "bogus")
    assert out.returncode == 2 and "invalid model spec" in out.stderr
    out = cli("events", "../../etc", "--store", str(tmp_path))
    assert out.returncode == 2 and "invalid session id" in out.stderr


def test_run_and_chat_against_an_openai_compatible_server(tmp_path):
    from fakes import openai_wire as w
    from fakes.server import FakeServer

    with FakeServer() as server:
        spec = f"openai-compatible:m@{server.url}/v1"
        server.add(w.text_stream("Hello ", "there."))
        out = cli("run", "hi", "--model", spec, "--system", "be nice")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Hello there."
        assert server.bodies[0]["messages"][0] == {"role": "system", "content": "be nice"}

        server.add(w.text_stream("one"), w.text_stream("two"))
        out = cli("chat", "c-1", "--store", str(tmp_path), "--model", spec, stdin="first\n\nsecond\n")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["one", "two"]
        assert [m["content"] for m in server.bodies[-1]["messages"]] == ["first", "one", "second"]
    events = cli("events", "c-1", "--store", str(tmp_path))
    assert len(events.stdout.splitlines()) == 4


def test_ctrl_c_in_a_piped_chat_exits_quietly_with_130(tmp_path):
    import signal

    # stdin says "ready" when the chat loop starts reading it, i.e. inside main()
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "class Stdin:\n"
        "    def isatty(self):\n"
        "        return False\n"
        "    def readline(self):\n"
        "        print('ready', flush=True)\n"
        "        return sys.__stdin__.readline()\n"
        "sys.stdin = Stdin()\n"
        "from agentkit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    spec = "openai-compatible:m@http://127.0.0.1:9/v1"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "chat", "c-1", "--store", str(tmp_path), "--model", spec],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err


def test_python_dash_m_agentkit_is_the_agentkit_command(tmp_path):
    """``python -m agentkit`` works where the console script is not on PATH."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_MODEL"}
    out = subprocess.run([sys.executable, "-m", "agentkit", "--help"], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: agentkit ")
    commands = out.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert {"run", "chat", "sessions", "events", "serve-mcp", "inputs", "answer", "replay", "eval",
            "fork"} <= set(commands)
    out = subprocess.run([sys.executable, "-m", "agentkit", "run", "hello", "--model", "echo"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert (out.returncode, out.stdout.strip()) == (0, "echo: hello"), out.stderr


def test_inputs_and_answer_list_and_answer_a_tools_question_from_the_command_line(tmp_path):
    from agentkit import ToolContext

    @tool
    def confirm(order: str, ctx: ToolContext) -> str:
        """Confirm an order with a person."""
        count = ctx.ask_human(f"how many of {order}?", schema={"type": "integer", "minimum": 1})
        return f"{count} x {order}"

    store = FileEventStore(tmp_path)
    model = ScriptedModel([ToolCall(name="confirm", input={"order": "tea"}), "Ordered."])
    with Session.open("shop", store=store, model=model, tools=[confirm]) as s:
        assert s.ask("order tea").finish_reason == "input-required"
    out = cli("inputs", "shop", "--store", str(tmp_path))
    assert out.returncode == 0, out.stderr
    (line,) = [json.loads(x) for x in out.stdout.splitlines()]
    assert line["question"] == "how many of tea?" and line["tool_name"] == "confirm"
    bad = cli("answer", "shop", line["id"], "0", "--store", str(tmp_path))
    assert bad.returncode == 2 and "minimum" in bad.stderr  # the request stays pending
    not_json = cli("answer", "shop", line["id"], "three", "--store", str(tmp_path))
    assert not_json.returncode == 2 and "VALUE must be JSON" in not_json.stderr
    ok = cli("answer", "shop", line["id"], "3", "--store", str(tmp_path))
    assert ok.returncode == 0, ok.stderr
    again = cli("answer", "shop", line["id"], "4", "--store", str(tmp_path))
    assert again.returncode == 2 and "already answered" in again.stderr
    assert cli("inputs", "shop", "--store", str(tmp_path)).stdout == ""
    with Session.open("shop", store=store, model=model, tools=[confirm]) as s:
        assert s.generate().text == "Ordered."
        assert s.events[-2].output.value == "3 x tea"
    missing = cli("inputs", "nope", "--store", str(tmp_path))
    assert missing.returncode == 2 and "no session 'nope'" in missing.stderr
