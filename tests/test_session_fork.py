"""Session.fork: a fork at every event of a session with tools, approvals (one decided, one
pending), a tool that asks a person, a transactional generation and execution intents, on
the file store and on PostgreSQL, shows what the original showed at that point plus only
an error result closing a call open there; nothing pending is carried over; the original
is untouched; a fork goes on with push_user_message and generate; bad input is refused
before anything is written; the store's copy_prefix and `agentkit fork` (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentkit import (
    ApprovalPolicy,
    ConfigurationError,
    FileEventStore,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    SessionClosedError,
    StoreConflictError,
    ToolCall,
    ToolContext,
    TransactionError,
    tool,
)
from agentkit.context._projection import INTERRUPTED_RESULT, Projector
from agentkit.events import ControlEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import Message, TextPart, ToolResultPart
from agentkit.transactions._ledger import TERMINAL, TransactionLedger


@tool
def write_note(text: str) -> str:
    """Write a note."""
    return f"wrote {text}"


@tool(read_only=True)
def read_notes() -> str:
    """Read the notes."""
    return "no notes"


@tool(read_only=True)
def ship(order: str, ctx: ToolContext) -> str:
    """Ship an order once a person says so."""
    go = ctx.ask_human(f"ship {order}?", schema={"type": "boolean"})
    return f"shipped {order}" if go else "kept"


TOOLS = [write_note, read_notes, ship]
SCRIPT = ["hi", ToolCall(name="write_note", input={"text": "a"}), "noted",
          ToolCall(name="ship", input={"order": "A"}), "on its way",
          ToolCall(name="read_notes", input={}), "found nothing",
          ToolCall(name="write_note", input={"text": "b"})]


def conversation(store, session_id="src"):
    """A session whose log has every kind of open work at one event or another: an approval
    asked, decided, run; a call paused for a person, answered, run again; a transactional
    generation begun, run (with a tool call), completed and accepted; a last approval
    left pending. With a store, every call has an execution intent."""
    model = ScriptedModel(list(SCRIPT))
    kwargs = dict(model=model, tools=TOOLS, approval=ApprovalPolicy(mode="ask-writes"))
    s = Session.open(session_id, store=store, **kwargs) if store is not None else Session(**kwargs)
    assert s.ask("hello").text == "hi"
    assert s.ask("note a").finish_reason == "approval-required"
    s.approve(s.pending_approvals()[0].id)
    assert s.generate().text == "noted"
    assert s.ask("ship A").finish_reason == "input-required"
    s.answer_input(s.pending_inputs()[0].id, True)
    assert s.generate().text == "on its way"
    txn = s.begin_generation("look it up")
    assert s.generate(transaction=txn).text == "found nothing"
    s.finalize_generation(txn, "accepted")
    assert s.ask("note b").finish_reason == "approval-required"
    assert len(s.pending_approvals()) == 1
    return s, txn


@pytest.fixture(params=["file", "postgres"])
def store(request, tmp_path):
    if request.param == "file":
        return FileEventStore(tmp_path / "store")
    return request.getfixturevalue("pg_store")


def shown_at(prefix, *, hide_unfinished=False):
    """What the original showed at the end of ``prefix``: its events projected with the
    transaction states of that moment (``hide_unfinished``: the transactions unfinished
    then hidden, as interrupted ones are); and the calls open in that view."""
    ledger = TransactionLedger(prefix)
    unfinished = set(ledger.open_generations()) if hide_unfinished else set()
    projector = Projector(hidden=lambda gid: ledger.hidden(gid) or gid in unfinished)
    projector.extend(prefix)
    return projector.model_view(job_status=False), set(projector.pending_tool_calls)


def without_results(messages: list[Message], call_ids: set[str]) -> list[Message]:
    """``messages`` without the tool results of ``call_ids`` (a tool message left empty goes)."""
    out = []
    for m in messages:
        if m.role == "tool":
            kept = tuple(p for p in m.content if not (isinstance(p, ToolResultPart) and p.tool_call_id in call_ids))
            if not kept:
                continue
            m = Message(role="tool", content=kept)
        out.append(m)
    return out


def results_of(messages: list[Message]) -> dict[str, str]:
    return {p.tool_call_id: p.output.as_text() for m in messages if m.role == "tool" for p in m.content}


def test_a_fork_at_every_event_shows_what_the_original_showed_there_and_closes_what_was_open(store):
    source, txn = conversation(store)
    events, revision = source.events, source.revision
    judged_now = 0
    stored_before = [e.to_dict() for e in store.load("src").events]
    kinds = set()
    running_points = 0
    for i, at in enumerate(events):
        prefix = list(events[: i + 1])
        with source.fork(at=at.id, session_id=f"fork-{i}") as fork:
            assert fork.session_id == f"fork-{i}" and fork.store is store
            got = fork.events
            # the log: the source's up to and including `at`, unchanged, then only closing records
            assert [e.to_dict() for e in got[: i + 1]] == [e.to_dict() for e in prefix]
            extra = got[i + 1:]
            assert all(isinstance(e, ToolResultEvent) or (isinstance(e, ControlEvent)
                       and e.action == "generation-interrupted") for e in extra)
            assert [e.seq for e in extra] == list(range(at.seq + 1, at.seq + 1 + len(extra)))
            # what the model sees: the original's view then, plus an error result for each open call
            then, open_calls = shown_at(prefix)
            hidden_then, open_after = shown_at(prefix, hide_unfinished=True)
            unfinished = TransactionLedger(prefix).open_generations()
            if hidden_then != then:  # only while a transactional generation was running: it is interrupted
                assert unfinished and TransactionLedger(prefix).states()[unfinished[0]] == "execution-started"
                running_points += 1
            # (the source's own projection_of(prefix) judges visibility by the transactions'
            # states now: it shows the accepted generation's events before it was accepted too)
            if source._log.projection_of(prefix) != then:
                assert unfinished == [txn.generation_id]
                judged_now += 1
            view = fork.model_messages()
            assert without_results(view, open_after) == without_results(hidden_then, open_after)
            closing = {cid: text for cid, text in results_of(view).items() if cid in open_after}
            assert set(closing) == open_after
            assert all("still open" in t and f"forked at event {at.id}" in t for t in closing.values())
            assert all(text == INTERRUPTED_RESULT for cid, text in results_of(hidden_then).items() if cid in open_after)
            kinds.update(t.split("(")[1].split(")")[0] for t in closing.values())
            # nothing pending is carried over
            assert fork.pending_approvals() == [] and fork.pending_inputs() == []
            assert fork.uncertain_tool_executions() == []
            assert all(state in TERMINAL for state in fork.transactions().values())
            assert set(fork.transactions()) == set(TransactionLedger(prefix).states())
            # durable as it is: reopened from the store, the same log
            assert [e.to_dict() for e in store.load(f"fork-{i}").events] == [e.to_dict() for e in got]
            assert fork.revision == store.head(f"fork-{i}") == len(got)
    # every kind of open work was met at some point; running transaction points were seen
    assert {"not yet run", "waiting for an approval decision", "decided, not yet run", "running",
            "paused for a person's answer", "answered, not yet resumed"} <= kinds
    assert running_points >= 3
    assert judged_now == 2  # its prompt while it was begun, and once completed: both hidden then
    # the original is untouched
    assert source.revision == revision and [e.to_dict() for e in source.events] == [e.to_dict() for e in events]
    assert [e.to_dict() for e in store.load("src").events] == stored_before
    assert len(source.pending_approvals()) == 1
    source.close()


def test_a_fork_goes_on_with_its_own_model_turns_and_the_source_keeps_its_pending_approval(store):
    source, txn = conversation(store)
    pending = source.pending_approvals()[0]
    at = source.events[-1]  # the approval request of the last call
    fork = source.fork(at=at.id)
    assert fork.session_id != "src" and len(fork.session_id) == 32
    assert fork._model is source._model
    candidate = ScriptedModel(["I did not write b: the fork closed that call"])
    fork.push_user_message("what happened to b?")
    result = fork.generate(model=candidate)
    assert result.text == "I did not write b: the fork closed that call"
    (request,) = candidate.requests
    assert "forked at event" in results_of(list(request.messages))[pending.tool_call_id]
    # the source still waits on its approval; deciding it runs the call there only
    assert [p.id for p in source.pending_approvals()] == [pending.id]
    fork_ids = {e.id for e in fork.events}
    before = len(source.events)
    source.approve(pending.id)
    assert source.generate(model=ScriptedModel(["noted b"])).text == "noted b"
    assert not fork_ids & {e.id for e in source.events[before:]}
    assert fork.events[-1].content[0].text.startswith("I did not write b")
    # a fork taken inside the transaction: its claim token runs nothing there
    begun = next(e for e in source.events if isinstance(e, ControlEvent) and e.action == "generation-begun")
    inside = source.fork(at=begun.id)
    assert inside.transactions() == {txn.generation_id: "interrupted"}
    with pytest.raises(TransactionError):
        inside.generate(transaction=txn)
    reopened = Session.open(inside.session_id, store=store)
    assert [e.id for e in reopened.events] == [e.id for e in inside.events]
    for s in (reopened, inside, fork, source):
        s.close()


def test_a_fork_has_the_sources_model_tools_and_options():
    model = ScriptedModel(["one", ToolCall(name="read_notes", input={}), "two"])
    with Session(model, tools=TOOLS, system="be brief", max_steps=5) as source:
        source.ask("first")
        with source.fork(at=source.events[-1].id, session_id="f") as fork:
            assert fork.store is None and fork.session_id == "f"
            assert fork._model is model and fork._options == source._options
            assert sorted(fork._registry) == sorted(source._registry)
            assert fork.ask("second").text == "two"  # read_notes ran in the fork
            assert model.requests[-1].system == "be brief"
        assert [e.type for e in source.events] == ["user-message", "assistant-message"]


def test_an_in_memory_session_forks_in_memory_at_every_event():
    source, _ = conversation(None)
    events = source.events
    for i, at in enumerate(events):
        with source.fork(at=at.id) as fork:
            assert fork.store is None and fork.revision == 0
            assert [e.to_dict() for e in fork.events[: i + 1]] == [e.to_dict() for e in events[: i + 1]]
            _then, open_calls = shown_at(list(events[: i + 1]), hide_unfinished=True)
            assert set(results_of(fork.model_messages())) >= open_calls
            assert fork.pending_approvals() == [] and fork.pending_inputs() == []
    assert source.events == events
    source.close()


def test_a_store_without_copy_prefix_gets_the_fork_in_one_append():
    store = InMemoryEventStore()
    source, _ = conversation(store)
    appends = []
    real = store.append
    store.append = lambda sid, evs, **kw: appends.append((sid, len(evs))) or real(sid, evs, **kw)  # type: ignore[method-assign]
    at = source.events[6]
    with source.fork(at=at.id, session_id="copy") as fork:
        assert appends == [("copy", len(fork.events))]
        assert store.load("copy").revision == len(fork.events) == fork.revision
    source.close()


def test_bad_input_is_refused_before_anything_is_written(store):
    source, _ = conversation(store)
    at = source.events[3].id
    listed = store.list_sessions()
    with pytest.raises(ConfigurationError, match="has no event 'nope'"):
        source.fork(at="nope")
    with pytest.raises(ConfigurationError, match="takes the id of one of the session's events"):
        source.fork(at=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="is the source session's own"):
        source.fork(at=at, session_id="src")
    other = Session.open("other", store=store)
    other.push_user_message("taken")
    with pytest.raises(ConfigurationError, match="'other' already exists in the store"):
        source.fork(at=at, session_id="other")
    with pytest.raises(ConfigurationError, match="invalid session id"):
        source.fork(at=at, session_id="../x")
    assert store.list_sessions() == sorted([*listed, "other"])
    assert [e.type for e in store.load("other").events] == ["user-message"]
    source.close()
    with pytest.raises(SessionClosedError):
        source.fork(at=at)
    assert store.list_sessions() == sorted([*listed, "other"])
    other.close()


def chat(n):
    """``n`` user messages numbered 1..n, as a store holds them."""
    return [UserMessageEvent(content=(TextPart(text=f"message {i}"),)).with_seq(i) for i in range(1, n + 1)]


def test_copy_prefix_copies_a_prefix_in_one_write_and_refuses_a_changed_source_or_a_used_id(store):
    events = chat(10)
    for lo, hi in ((0, 3), (3, 7), (7, 10)):  # three records (appends)
        store.append("src", events[lo:hi], expected_revision=lo)
    extra = [UserMessageEvent(content=(TextPart(text="after"),)).with_seq(6)]
    rev = store.copy_prefix("src", "c1", count=5, first_event_id=events[0].id, last_event_id=events[4].id,
                            events=extra)  # ends inside the second record
    assert rev == 6 and store.head("c1") == 6
    assert [e.to_dict() for e in store.load("c1").events] == [e.to_dict() for e in [*events[:5], *extra]]
    if not isinstance(store, FileEventStore):  # each row's revision as one append gives it
        assert [e.id for e in store.load_after("c1", 5)[1]] == [extra[0].id]
    assert store.copy_prefix("src", "c2", count=3, first_event_id=events[0].id, last_event_id=events[2].id) == 3
    assert [e.id for e in store.load("c2").events] == [e.id for e in events[:3]]
    store.append("c2", chat(4)[3:], expected_revision=3)  # a copy goes on like any session
    if isinstance(store, FileEventStore):  # whole records are copied as they are, byte for byte
        root = Path(store.root_dir)
        source_lines = (root / "src" / "events.jsonl").read_bytes().splitlines(True)
        copy_lines = (root / "c1" / "events.jsonl").read_bytes().splitlines(True)
        assert len(copy_lines) == 3 and copy_lines[1] == source_lines[1] and copy_lines[2] != source_lines[2]
    with pytest.raises(StoreConflictError, match="'c1' is at revision 6"):
        store.copy_prefix("src", "c1", count=5, first_event_id=events[0].id, last_event_id=events[4].id)
    with pytest.raises(StoreConflictError, match="no longer begins with the 4 events"):
        store.copy_prefix("src", "c3", count=4, first_event_id=events[1].id, last_event_id=events[4].id)
    with pytest.raises(StoreConflictError, match="no longer begins"):
        store.copy_prefix("src", "c3", count=1, first_event_id="gone", last_event_id="gone")
    with pytest.raises(StoreConflictError, match="no longer begins"):
        store.copy_prefix("nope", "c3", count=1, first_event_id="gone", last_event_id="gone")
    with pytest.raises(ConfigurationError, match="count must be an int >= 1"):
        store.copy_prefix("src", "c3", count=0, first_event_id="x", last_event_id="x")
    assert store.head("c3") is None and "c3" not in store.list_sessions()
    # a compacted source: the prefix starts with what the compaction left
    store.archive("src", "a1", events[:4])
    store.compact("src", "a1", expected_revision=10, remove=4)
    kept = store.load("src").events
    with pytest.raises(StoreConflictError, match="no longer begins"):  # decided on the log before it
        store.copy_prefix("src", "c3", count=5, first_event_id=events[0].id, last_event_id=events[4].id)
    assert store.copy_prefix("src", "c3", count=3, first_event_id=kept[0].id, last_event_id=kept[2].id) == 3
    assert [e.to_dict() for e in store.load("c3").events] == [e.to_dict() for e in kept[:3]]


def test_a_file_store_fork_leaves_out_a_torn_tail(tmp_path):
    store = FileEventStore(tmp_path)
    events = chat(4)
    store.append("src", events, expected_revision=0)
    with open(tmp_path / "src" / "events.jsonl", "ab") as fh:
        fh.write(b'{"crc":"00000000","events":[')  # an append cut short by a crash
    source = Session.open("src", store=store)
    with source.fork(at=events[-1].id, session_id="f") as fork:
        assert [e.id for e in fork.events] == [e.id for e in events]
    assert [e.id for e in store.load("f").events] == [e.id for e in events]
    source.close()


def cli(*args):
    return subprocess.run([sys.executable, "-m", "agentkit.cli", *args], capture_output=True, text=True, timeout=120)


def test_agentkit_fork_on_the_command_line(tmp_path):
    store = FileEventStore(tmp_path)
    source, _txn = conversation(store)
    events = source.events
    source.close()
    begun = next(e for e in events if isinstance(e, ControlEvent) and e.action == "generation-execution-started")
    out = cli("fork", "src", "--at", begun.id, "--as", "src-b", "--store", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "src-b\n"
    forked = store.load("src-b").events
    assert [e.id for e in forked[: events.index(begun) + 1]] == [e.id for e in events[: events.index(begun) + 1]]
    assert forked[-1].action == "generation-interrupted"  # type: ignore[attr-defined]
    assert [e.to_dict() for e in store.load("src").events] == [e.to_dict() for e in events]  # the source as it was
    fresh = cli("fork", "src", "--at", events[-1].id, "--store", str(tmp_path))
    assert fresh.returncode == 0, fresh.stderr
    (new_id,) = fresh.stdout.split()
    assert isinstance(store.load(new_id).events[-1], ToolResultEvent)
    missing = cli("fork", "src", "--at", "nope", "--store", str(tmp_path))
    assert missing.returncode == 2 and "has no event 'nope'" in missing.stderr
    taken = cli("fork", "src", "--at", events[0].id, "--as", "src-b", "--store", str(tmp_path))
    assert taken.returncode == 2 and "'src-b' already exists" in taken.stderr
    no_session = cli("fork", "nope", "--at", events[0].id, "--store", str(tmp_path))
    assert no_session.returncode == 2 and "no session 'nope'" in no_session.stderr
    assert sorted(store.list_sessions()) == sorted(["src", "src-b", new_id])


def test_a_session_with_retention_forks_its_active_log_and_names_an_archived_event(store):
    from agentkit import Retention

    def summary(messages, *, reason, cancel):
        return f"summary of {len(messages)} messages"

    model = ScriptedModel([f"answer {i}" for i in range(12)])
    with Session.open("kept", store=store, model=model, compactor=summary,
                      retention=Retention(max_events=6, keep_last=2)) as source:
        first = None
        for i in range(12):
            event = source.push_user_message(f"question {i}")
            first = first or event
            source.generate()
        assert first.id not in [e.id for e in source.events]  # retention archived it
        with pytest.raises(ConfigurationError, match="was archived by retention"):
            source.fork(at=first.id)
        at = source.events[-3]
        with source.fork(at=at.id, session_id="kept-b") as fork:
            assert [e.id for e in fork.events] == [e.id for e in source.events[: source.events.index(at) + 1]]
            assert fork.model_messages() == shown_at(list(source.events[: source.events.index(at) + 1]))[0]
            assert fork._retention is source._retention
