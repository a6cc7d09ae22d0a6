"""``agentkit eval`` run as a subprocess (agentkit/cli/_eval.py): the report table or JSON,
the progress on stderr, the exit status."""

from __future__ import annotations

import json
import os

from _evals import require_evals
from test_cli import cli

from agentkit import Agent, FileEventStore, ScriptedModel, ToolCall

require_evals()

TOOLS = '''\
from agentkit import tool

@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"

TOOLS = [lookup]
'''


def _sessions(tmp_path) -> str:
    """Three recorded sessions: one called lookup(A1), two answered plainly."""
    (tmp_path / "shoptools.py").write_text(TOOLS)
    import importlib.util

    spec = importlib.util.spec_from_file_location("shoptools", tmp_path / "shoptools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    store = FileEventStore(tmp_path / "store")
    Agent(ScriptedModel([ToolCall("lookup", {"order": "A1"}), "A1 has shipped."]), tools=module.TOOLS) \
        .session("order", store).ask("Where is order A1?")
    Agent(ScriptedModel(["Paris"])).session("paris", store).ask("Capital of France?")
    Agent(ScriptedModel(["Rome"])).session("rome", store).ask("Capital of Italy?")
    return str(tmp_path / "store")


def _responder(request):
    """A candidate model on the OpenAI wire: looks A1 up, then answers; says Paris, and
    Berlin where Rome was recorded."""
    from fakes import openai_wire as w

    messages = request.body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return w.text_stream("A1 has shipped.")
    if "order A1" in last["content"]:
        return w.tool_stream([("call_1", "lookup", ['{"order": ', '"A1"}'])])
    return w.text_stream("Paris" if "France" in last["content"] else "Berlin")


def _env(tmp_path):
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def test_eval_against_an_openai_compatible_server_reports_each_case_and_exits_1_on_a_failure(tmp_path):
    from fakes.server import FakeServer

    store = _sessions(tmp_path)
    with FakeServer(responder=_responder) as server:
        spec = f"openai-compatible:m@{server.url}/v1"
        out = cli("eval", "--store", store, "--model", spec, "--tools", "shoptools:TOOLS", "--concurrency", "3",
                  env_extra=_env(tmp_path))
    assert out.returncode == 1, out.stderr
    table = out.stdout
    assert "Evaluation Summary:" in table and spec in table  # pydantic-evals' table, titled with the model
    for name in ("order", "paris", "rome"):
        assert name in table
    assert "rome: AnswerMatches: expected 'Rome'; got 'Berlin'" in table
    assert "2 of 3 cases passed" in table
    assert "3/3 cases" in out.stderr  # the progress, on stderr only
    assert "cases]" not in table

    with FakeServer(responder=_responder) as server:
        out = cli("eval", "--store", store, "--model", f"openai-compatible:m@{server.url}/v1", "--tools",
                  "shoptools:TOOLS", "--json", env_extra=_env(tmp_path))
    assert out.returncode == 1, out.stderr
    body = json.loads(out.stdout)  # stdout is the JSON alone
    assert body["passed"] is False and body["cases"] == 3 and body["failed"] == ["rome"]
    cases = {c["name"]: c for c in body["report"]["cases"]}
    assert {n: {k: a["value"] for k, a in c["assertions"].items()} for n, c in cases.items()} == {
        "order": {"ToolCallsMatch": True, "AnswerMatches": True},
        "paris": {"ToolCallsMatch": True, "AnswerMatches": True},
        "rome": {"ToolCallsMatch": True, "AnswerMatches": False},
    }
    assert cases["order"]["output"]["tool_calls"][0]["input"] == {"order": "A1"}
    assert cases["order"]["metrics"]["tool_calls"] == 1


def test_eval_of_chosen_sessions_with_the_echo_model_passes_with_exit_0(tmp_path):
    from agentkit.tools.json_tools import json_tools

    store = FileEventStore(tmp_path / "store")
    agent = Agent("echo", tools=json_tools())
    agent.session("one", store).ask("hello")
    agent.session("two", store).ask('call json_validate {"data": "[1]", "schema": {}}')
    agent.session("three", store).ask("not chosen")
    out = cli("eval", "--store", str(tmp_path / "store"), "--model", "echo", "--tools", "json",
              "--session", "two", "--session", "one", "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body == {**body, "passed": True, "cases": 2, "failed": []}
    assert [c["name"] for c in body["report"]["cases"]] == ["two", "one"]
    assert body["report"]["cases"][0]["output"]["tool_calls"][0]["tool_name"] == "json_validate"


def test_eval_refuses_bad_input_before_running(tmp_path):
    out = cli("eval", "--store", str(tmp_path / "nowhere"), "--model", "echo")
    assert out.returncode != 0 and "no store at" in out.stderr
    store = FileEventStore(tmp_path / "store")
    Agent("echo").session("one", store).ask("hi")
    out = cli("eval", "--store", str(tmp_path / "store"), "--model", "echo", "--session", "nope")
    assert out.returncode == 2 and "'nope'" in out.stderr and "its sessions are: one" in out.stderr
    out = cli("eval", "--store", str(tmp_path / "store"), "--model", "echo", "--concurrency", "0")
    assert out.returncode == 2 and "--concurrency must be 1 or more" in out.stderr
    out = cli("eval", "--store", str(tmp_path / "store"))
    assert out.returncode != 0 and "no model" in out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cli("eval", "--store", str(empty), "--model", "echo")
    assert out.returncode == 2 and "has no session with a prompt to evaluate" in out.stderr


def test_without_the_extra_eval_names_the_install_command(tmp_path):
    store = FileEventStore(tmp_path / "store")
    Agent("echo").session("one", store).ask("hi")
    import subprocess
    import sys

    code = ("import sys; sys.modules['pydantic_evals'] = None\n"
            "from agentkit.cli import main\n"
            f"sys.exit(main(['eval', '--store', {str(tmp_path / 'store')!r}, '--model', 'echo']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "agentkit.evals (evaluations on pydantic-evals) needs the 'pydantic-evals' package" in out.stderr
    assert "pip install 'sync-agentkit[evals]'" in out.stderr


def test_on_a_terminal_the_progress_is_one_bar_drawn_again_as_each_case_ends(tmp_path):
    import pty
    import subprocess
    import sys

    store = FileEventStore(tmp_path / "store")
    for n in range(3):
        Agent("echo").session(f"s{n}", store).ask(f"hello {n}")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_MODEL"}
    proc = subprocess.Popen([sys.executable, "-m", "agentkit.cli", "eval", "--store", str(tmp_path / "store"),
                             "--model", "echo", "--concurrency", "1"],
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, seen
    terminal = seen.decode()
    assert terminal.count("\ragentkit eval: [") == 3
    assert "\ragentkit eval: [######--------------] 1/3 cases\ragentkit eval: [#############-------] 2/3 cases" \
        in terminal
    assert terminal.endswith("[####################] 3/3 cases\r\n")  # one line break, at the end
    assert "3 of 3 cases passed" in stdout.decode()
