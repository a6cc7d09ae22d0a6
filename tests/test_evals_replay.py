"""agentkit.replay: a stored conversation's user turns run again against a model, tool
results served from the record, compared per turn; and the ``agentkit replay`` command,
run as a subprocess against a real file store and a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agentkit import (
    ConfigurationError,
    FileEventStore,
    ScriptedModel,
    Session,
    ToolCall,
    replay,
    tool,
)
from agentkit.evals import ReplayResult
from agentkit.messages import ToolResultPart


def notes_tool(path):
    """``append_note(text)``: appends a line to ``path`` (what running it leaves behind)."""

    @tool
    def append_note(text: str) -> str:
        """Append a note."""
        with open(path, "a") as f:
            f.write(text + "\n")
        return f"noted {text}"

    return append_note


def lines(path):
    """The notes in ``path``, sorted (the original runs its two calls in parallel)."""
    return sorted(path.read_text().splitlines()) if path.exists() else []


# the original: three turns, the second with two calls
SCRIPT = [
    "Hello! How can I help?",
    [ToolCall("append_note", {"text": "a"}), ToolCall("append_note", {"text": "b"})],
    "I noted a and b.",
    "Bye.",
]
PROMPTS = ["hi", "note a and b", "thanks"]


def record(tmp_path, store=None, session_id=None):
    """The original conversation's events (its tool ran: notes.txt holds a, b)."""
    notes = tmp_path / "notes.txt"
    with Session(ScriptedModel(SCRIPT), tools=[notes_tool(notes)], store=store, session_id=session_id) as s:
        for prompt in PROMPTS:
            s.ask(prompt)
        events = s.events
    assert lines(notes) == ["a", "b"]
    return events, notes


def test_the_same_script_reproduces_every_turn_exactly_and_runs_no_tool(tmp_path):
    events, notes = record(tmp_path)
    result = replay(events, model=ScriptedModel(SCRIPT))
    assert isinstance(result, ReplayResult)
    assert [t.prompt for t in result.turns] == PROMPTS
    assert [t.same for t in result.turns] == [True, True, True] and result.same and result.differing == ()
    turn = result.turns[1]
    assert turn.original.text == turn.replayed.text == "I noted a and b."
    assert [(c.tool_name, c.input) for c in turn.replayed.tool_calls] == [
        ("append_note", {"text": "a"}), ("append_note", {"text": "b"})]
    assert [c.output.as_text() for c in turn.replayed.tool_calls] == ["noted a", "noted b"]  # from the record
    assert turn.unmatched == ()
    for t in result.turns:  # tokens and finish reason per turn, both sides
        assert t.replayed.usage == t.original.usage and t.replayed.usage.total_tokens > 0
        assert t.replayed.finish_reason == t.original.finish_reason == "stop"
    assert lines(notes) == ["a", "b"]  # the replay ran no tool: both results came from the record
    assert result.session_id is None and result.tools == "recorded"


CANDIDATE = [
    "Hello! How can I help?",
    # one call the original made (served from the record), one it did not
    [ToolCall("append_note", {"text": "a"}), ToolCall("append_note", {"text": "z"})],
    "I noted a and z.",
    "Bye.",
]


def _tool_results_read(model):
    """The tool results the model was sent, by text."""
    return [p.output.as_text() for r in model.requests for m in r.messages for p in m.content
            if isinstance(p, ToolResultPart)]


@pytest.mark.parametrize("mode", ["recorded", "live", "error"])
def test_a_candidate_calling_another_tool_is_reported_on_that_turn(tmp_path, mode):
    events, notes = record(tmp_path)
    model = ScriptedModel(CANDIDATE)
    result = replay(events, model=model, tools=mode, live_tools=[notes_tool(notes)])
    assert [t.same for t in result.turns] == [True, False, True]
    assert [t.index for t in result.differing] == [1]
    turn = result.turns[1]
    assert turn.original.text == "I noted a and b." and turn.replayed.text == "I noted a and z."
    matched, other = turn.replayed.tool_calls
    assert matched.output.as_text() == "noted a"  # the record's answer, in every mode
    assert [c.input for c in turn.unmatched] == [{"text": "z"}]
    if mode == "live":
        assert other.output.as_text() == "noted z" and not other.output.is_error
        assert lines(notes) == ["a", "b", "z"]  # the real tool ran for the unmatched call only
    else:
        assert other.output.is_error
        expected = "no recorded result matches" if mode == "recorded" else "tools='error'"
        assert expected in other.output.as_text()
        assert lines(notes) == ["a", "b"]  # no tool ran
    assert other.output.as_text() in _tool_results_read(model)  # the model read it


@tool
def counter() -> int:
    """The next number."""
    counter.fn.n += 1  # type: ignore[attr-defined]
    return counter.fn.n  # type: ignore[attr-defined]


counter.fn.n = 0  # type: ignore[attr-defined]


def test_repeated_identical_calls_take_the_recorded_results_in_order():
    counter.fn.n = 0
    script = [ToolCall("counter"), ToolCall("counter"), "two numbers"]
    with Session(ScriptedModel(script), tools=[counter]) as s:
        s.ask("count twice")
        events = s.events
    assert counter.fn.n == 2
    # the candidate calls it three times: 1 and 2 come from the record, the third matches none
    candidate = [ToolCall("counter"), ToolCall("counter"), ToolCall("counter"), "three numbers"]
    result = replay(events, model=ScriptedModel(candidate), live_tools=[counter])
    outputs = [c.output for c in result.turns[0].replayed.tool_calls]
    assert [o.value for o in outputs[:2]] == [1, 2] and outputs[2].is_error
    assert counter.fn.n == 2  # the tool never ran again
    assert [c.tool_call_id for c in result.turns[0].unmatched] == [result.turns[0].replayed.tool_calls[2].tool_call_id]


def test_a_session_is_replayed_with_its_tools_and_system_prompt(tmp_path):
    notes = tmp_path / "notes.txt"
    with Session(ScriptedModel(SCRIPT), tools=[notes_tool(notes)], system="be brief") as s:
        for prompt in PROMPTS:
            s.ask(prompt)
        model = ScriptedModel(CANDIDATE)
        result = replay(s, model=model, tools="live")  # the session's own tool runs live
    assert lines(notes) == ["a", "b", "z"]
    assert model.requests[0].system == "be brief"
    assert [spec.name for spec in model.requests[0].tools] == ["append_note"]
    assert [t.same for t in result.turns] == [True, False, True]


def test_a_recorded_tool_the_replay_has_no_definition_of_is_shown_and_answered_from_the_record(tmp_path):
    events, notes = record(tmp_path)
    model = ScriptedModel(CANDIDATE)
    result = replay(events, model=model, tools="live")  # no live_tools: nothing can run
    assert [spec.name for spec in model.requests[0].tools] == ["append_note"]
    matched, other = result.turns[1].replayed.tool_calls
    assert matched.output.as_text() == "noted a"
    assert other.output.is_error and "no live tool 'append_note'" in other.output.as_text()
    assert lines(notes) == ["a", "b"]


def test_the_replay_is_written_as_a_new_session_in_a_file_store(tmp_path):
    store = FileEventStore(tmp_path / "store")
    record(tmp_path, store=store, session_id="support-1")
    before = store.load("support-1").events
    result = replay(store.load("support-1"), model=ScriptedModel(SCRIPT), store=store, session_id="support-1-replay")
    assert result.same and result.session_id == "support-1-replay"
    written = store.load("support-1-replay").events
    assert [e.to_dict() for e in written] == [e.to_dict() for e in result.events]
    assert [e.type for e in written] == [e.type for e in before]
    assert store.load("support-1").events == before  # the original is untouched
    with Session.open("support-1-replay", store=store) as again:  # an ordinary session: replayable itself
        assert [m.text for m in again.model_messages() if m.role == "assistant" and m.text] == [
            "Hello! How can I help?", "I noted a and b.", "Bye."]
    # no id: a new one
    other = replay(before, model=ScriptedModel(SCRIPT), store=store)
    assert other.session_id not in ("support-1", "support-1-replay")
    assert store.load(other.session_id) is not None


def test_an_existing_session_id_is_refused_before_anything_runs(tmp_path):
    store = FileEventStore(tmp_path / "store")
    events, _ = record(tmp_path, store=store, session_id="support-1")
    model = ScriptedModel(SCRIPT)
    with pytest.raises(ConfigurationError, match="already holds a session 'support-1'"):
        replay(events, model=model, store=store, session_id="support-1")
    assert model.request_count == 0 and store.load("support-1").events == events


@pytest.mark.parametrize(("source", "kwargs", "message"), [
    ([], {"tools": "bogus"}, "tools must be 'recorded', 'live' or 'error'"),
    (None, {}, "store.load"),
    ("hello", {}, "takes a Session, a StoredSession"),
    (["not an event"], {}, "holds str objects"),
    ([], {"session_id": "x"}, "needs store="),
])
def test_bad_input_is_refused_with_what_to_do(source, kwargs, message):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        replay(source, model=ScriptedModel([]), **kwargs)


def test_a_message_the_original_did_not_answer_alone_is_pushed_without_a_generation():
    with Session(ScriptedModel(["both seen"])) as s:
        s.push_user_message("first")
        s.push_user_message("second")
        s.generate()
        events = s.events
    result = replay(events, model=ScriptedModel(["both seen"]))  # one model turn: one generation
    assert [(t.prompt, t.replayed.text, t.same) for t in result.turns] == [
        ("first", "", True), ("second", "both seen", True)]


def test_progress_is_reported_after_each_turn(tmp_path):
    events, _ = record(tmp_path)
    seen = []
    replay(events, model=ScriptedModel(SCRIPT), on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


# -- the command ---------------------------------------------------------------------------

TOOLS_MODULE = textwrap.dedent('''
    from agentkit import tool

    @tool
    def append_note(text: str) -> str:
        """Append a note."""
        with open("notes.txt", "a") as f:
            f.write(text + "\\n")
        return f"noted {text}"
''')


def run_cli(cwd, *args, stderr=subprocess.PIPE):
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKIT_MODEL", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "agentkit", "replay", *args], cwd=cwd, capture_output=False,
                          stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120, env=env)


def echo_session(tmp_path):
    """A stored session recorded with the echo model: a tool call, then a plain turn. The
    command's ``--live-tools notes_tools:append_note`` (run in ``tmp_path``) appends to
    the same notes.txt as the tool recorded here."""
    from agentkit.models.echo import EchoModel

    (tmp_path / "notes_tools.py").write_text(TOOLS_MODULE)
    store = FileEventStore(tmp_path / "store")
    with Session.open("support-1", store=store, model=EchoModel(), tools=[notes_tool(tmp_path / "notes.txt")]) as s:
        s.ask('call append_note {"text": "a"}')
        s.ask("hello")
    assert lines(tmp_path / "notes.txt") == ["a"]
    return store


def test_the_command_reports_every_turn_the_same_and_exits_0(tmp_path):
    echo_session(tmp_path)
    out = run_cli(tmp_path, "support-1", "--store", "store", "--model", "echo")
    assert out.returncode == 0, out.stderr
    table = out.stdout.splitlines()
    assert table[0].split() == ["turn", "same", "original", "replayed", "tool", "calls"]
    assert table[1].split()[:2] == ["1", "yes"] and 'append_note({"text": "a"})' in table[1]
    assert table[2].split()[:2] == ["2", "yes"] and "echo: hello" in table[2]
    assert table[3] == "2 of 2 turns the same"
    assert out.stderr.splitlines() == ["replayed turn 1/2", "replayed turn 2/2"]  # not a terminal: a line each
    assert lines(tmp_path / "notes.txt") == ["a"]


def candidate_replies(server):
    from fakes import openai_wire as w

    server.add(w.tool_stream([("c1", "append_note", ['{"text": "other"}'])]),
               w.text_stream("append_note returned: noted other"),
               w.text_stream("echo: hello"))


def test_the_command_reports_a_candidate_per_turn_as_json_and_exits_1(tmp_path):
    from fakes.server import FakeServer

    echo_session(tmp_path)
    with FakeServer() as server:
        candidate_replies(server)
        spec = f"openai-compatible:m@{server.url}/v1"
        out = run_cli(tmp_path, "support-1", "--store", "store", "--model", spec, "--json")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["same"] is False and report["tools"] == "recorded"
    assert [t["same"] for t in report["turns"]] == [False, True]
    first = report["turns"][0]
    assert first["original"]["tool_calls"][0]["input"] == {"text": "a"}
    assert first["replayed"]["tool_calls"][0]["input"] == {"text": "other"}
    assert first["unmatched"][0]["is_error"] and "no recorded result matches" in first["unmatched"][0]["output"]
    assert first["replayed"]["usage"]["total_tokens"] == 2 * 18  # the server's usage, summed over the turn
    assert lines(tmp_path / "notes.txt") == ["a"]  # recorded: no tool ran


def test_the_command_runs_live_tools_and_writes_the_replay(tmp_path):
    from fakes.server import FakeServer

    store = echo_session(tmp_path)
    with FakeServer() as server:
        candidate_replies(server)
        spec = f"openai-compatible:m@{server.url}/v1"
        out = run_cli(tmp_path, "support-1", "--store", "store", "--model", spec, "--tools", "live",
                      "--live-tools", "notes_tools:append_note", "--write-as", "support-1-candidate")
    assert out.returncode == 1, out.stderr
    table = out.stdout.splitlines()
    assert table[1].split()[:2] == ["1", "NO"]
    assert 'append_note({"text": "a"}) -> append_note({"text": "other"})*' in table[1]
    assert table[-1] == "1 of 2 turns the same; differ: turn 1; replay written as session 'support-1-candidate'"
    assert lines(tmp_path / "notes.txt") == ["a", "other"]  # live: the unmatched call ran
    written = [e.type for e in store.load("support-1-candidate").events if e.type != "control"]
    assert written == ["user-message", "assistant-message", "tool-result", "assistant-message", "user-message",
                       "assistant-message"]
    again = run_cli(tmp_path, "support-1", "--store", "store", "--model", "echo", "--write-as", "support-1-candidate")
    assert again.returncode == 2 and "already holds a session 'support-1-candidate'" in again.stderr
    missing = run_cli(tmp_path, "nobody", "--store", "store", "--model", "echo")
    assert missing.returncode == 2 and "no session 'nobody'" in missing.stderr


def test_the_progress_line_is_rewritten_on_a_terminal(tmp_path):
    echo_session(tmp_path)
    main, sub = os.openpty()
    try:
        out = run_cli(tmp_path, "support-1", "--store", "store", "--model", "echo", stderr=sub)
        os.close(sub)
        seen = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the writer is gone and all is read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main)
    assert out.returncode == 0
    assert seen.decode().replace("\r\n", "\n") == "\rreplayed turn 1/2\rreplayed turn 2/2\n"


def test_a_rejected_transactional_turn_is_not_replayed():
    with Session(ScriptedModel(["one", "not this", "two"])) as s:
        s.ask("first")
        txn = s.begin_generation("rejected question")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "rejected")  # the model never sees it again
        s.ask("second")
        events = s.events
    result = replay(events, model=ScriptedModel(["one", "two"]))
    assert [(t.prompt, t.replayed.text, t.same) for t in result.turns] == [("first", "one", True),
                                                                           ("second", "two", True)]


def test_live_tools_are_taken_as_session_takes_them_langchain_tools_too(tmp_path):
    from langchain_core.tools import tool as langchain_tool

    events, notes = record(tmp_path)

    @langchain_tool
    def append_note(text: str) -> str:
        """Append a note."""
        with open(notes, "a") as f:
            f.write(text + "\n")
        return f"noted {text}"

    result = replay(events, model=ScriptedModel(CANDIDATE), tools="live", live_tools=[append_note])
    assert result.turns[1].replayed.tool_calls[1].output.as_text() == "noted z"
    assert lines(notes) == ["a", "b", "z"]
