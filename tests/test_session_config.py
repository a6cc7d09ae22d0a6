"""A live Session's configuration: ``Session.configure(model=, system=, tools=)``
recorded as ``session-configured`` events and applied by every process that reads the
log (agentkit/session/_config.py). The model used answers with the system prompt and
tools it was called with (tests/_config_child.py), so each answer says which
configuration its turn used. The processes are real (``multiprocessing``, spawn) on one
FileEventStore directory, and on a throwaway PostgreSQL cluster."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest
from _config_child import alpha, beta, gamma, model, open_session, reply

from agentkit import (
    AgentkitError,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    ScriptedModel,
    Session,
    SessionPool,
    ToolCall,
    tool,
)
from agentkit.events import ControlEvent

SPAWN = multiprocessing.get_context("spawn")


def configured(session: Session) -> list[dict[str, Any]]:
    """The data of the session's configuration records, in log order."""
    return [e.data for e in session.events if isinstance(e, ControlEvent) and e.action == "session-configured"]


def run_child(target: Any, *args: Any) -> str:
    """Run ``target(*args, out)`` in a child process; its answer."""
    out = SPAWN.Queue()
    child = SPAWN.Process(target=target, args=(*args, out))
    child.start()
    try:
        answer = out.get(timeout=120)
    finally:
        child.join(120)
    assert child.exitcode == 0
    return str(answer)


# -- in one process ---------------------------------------------------------------------


def test_configure_changes_the_next_turns_system_prompt_tools_and_model_and_records_each_change() -> None:
    session = Session(model(), tools=[alpha], system="first")
    assert session.ask("one").text == "system=first tools=alpha"
    event = session.configure(system="second", tools=[alpha, beta])
    assert isinstance(event, ControlEvent) and event.seq > 0
    assert session.ask("two").text == "system=second tools=alpha,beta"
    session.configure(system=None)
    assert session.ask("three").text == "system=None tools=alpha,beta"
    session.configure(model=ScriptedModel(["from the new model"]))
    assert session.ask("four").text == "from the new model"
    assert configured(session) == [
        {"system": "second", "tools": ["alpha", "beta"]},
        {"system": None},
        {"model": {"object": "ScriptedModel:scripted"}},
    ]
    session.close()


def test_a_turn_running_while_the_configuration_changes_finishes_with_the_old_one() -> None:
    in_tool, go_on = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """A tool that waits for the test."""
        in_tool.set()
        assert go_on.wait(60)
        return "slow done"

    calls = iter([ToolCall(name="slow", input={})])

    def step(request: Any) -> Any:
        return next(calls, None) or reply(request)

    session = Session(FunctionModel(step), tools=[slow], system="old")
    answers: list[str] = []
    running = threading.Thread(target=lambda: answers.append(session.ask("go").text))
    running.start()
    assert in_tool.wait(60)
    session.configure(system="new", tools=[slow, alpha])  # while the turn's tool runs
    go_on.set()
    running.join(60)
    assert answers == ["system=old tools=slow"]  # its second model step still had the old configuration
    assert session.ask("next").text == "system=new tools=slow,alpha"
    session.close()


def test_a_generation_queued_behind_the_running_one_uses_the_configuration_of_when_it_starts() -> None:
    release = threading.Event()
    inside = threading.Event()
    first = [True]

    def step(request: Any) -> str:
        if first[0]:
            first[0] = False
            inside.set()
            assert release.wait(60)
        return reply(request)

    session = Session(FunctionModel(step), tools=[alpha], system="old")
    answers: dict[str, str] = {}
    one = threading.Thread(target=lambda: answers.setdefault("one", session.ask("one").text))
    one.start()
    assert inside.wait(60)
    two = threading.Thread(target=lambda: answers.setdefault("two", session.ask("two").text))
    two.start()
    while len(session._gate.queue) < 2:  # the second waits at the gate
        threading.Event().wait(0.01)
    session.configure(system="new")
    release.set()
    one.join(60)
    two.join(60)
    assert answers == {"one": "system=old tools=alpha", "two": "system=new tools=alpha"}
    session.close()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "at least one of"),
        ({"system": 5}, "system"),
        ({"tools": "alpha"}, "full list"),
        ({"tools": [alpha, alpha]}, "alpha"),
        ({"model": None}, "model=None"),
        ({"model": "no-such-provider:x"}, "no-such-provider"),
        ({"model": 42}, "ChatModel"),
    ],
)
def test_bad_configuration_is_refused_before_anything_is_committed(kwargs: dict[str, Any], words: str) -> None:
    session = Session(model(), tools=[alpha])
    with pytest.raises(AgentkitError, match=words) as caught:  # a ToolDefinitionError for the duplicate
        session.configure(**kwargs)
    assert isinstance(caught.value, ValueError)
    assert session.events == ()
    assert session.ask("still").text == "system=None tools=alpha"
    session.close()


def test_a_reopened_session_has_the_configuration_it_was_left_with(tmp_path: Any) -> None:
    spec = f"file:{tmp_path}"
    with open_session(spec, "s", system="constructor's") as session:
        session.configure(system="configured", tools=[beta, gamma])
    with open_session(spec, "s", system="constructor's") as reopened:
        assert reopened.ask("again").text == "system=configured tools=beta,gamma"
    with SessionPool(FileEventStore(tmp_path), model=model(), tools=[alpha, beta, gamma], idle_timeout=None) as pool:
        assert pool.get("s").ask("pooled").text == "system=configured tools=beta,gamma"


def test_reopening_without_a_recorded_tool_is_a_clear_error_naming_it(tmp_path: Any) -> None:
    spec = f"file:{tmp_path}"
    with open_session(spec, "s") as session:
        session.configure(tools=[alpha, gamma])
    with pytest.raises(ConfigurationError, match=r"not given \['gamma'\].*tools=\[\.\.\.\] including them"):
        open_session(spec, "s", tools="alpha,beta")


def test_a_model_given_as_a_spec_is_rebuilt_from_it_on_reopen(tmp_path: Any) -> None:
    spec = f"file:{tmp_path}"
    with open_session(spec, "s") as session:
        session.configure(model="echo:other")
        assert session.ask("hello").text == "echo: hello"
    with open_session(spec, "s") as reopened:
        assert reopened._model.model_name == "other"
        assert reopened.ask("again").text == "echo: again"
    assert configured(reopened) == [{"model": {"spec": "echo:other"}}]


def test_a_model_object_must_be_passed_again_on_reopen(tmp_path: Any) -> None:
    spec = f"file:{tmp_path}"
    with open_session(spec, "s") as session:
        session.configure(model=ScriptedModel(["scripted answer"]))
    with pytest.raises(ConfigurationError, match=r"model object 'ScriptedModel:scripted'.*pass that model as model="):
        open_session(spec, "s")  # given the FunctionModel only
    store = FileEventStore(tmp_path)
    with Session(ScriptedModel(["the same kind of model"]), store=store, session_id="s") as reopened:
        assert reopened.ask("again").text == "the same kind of model"


# -- across processes -------------------------------------------------------------------


def stores(request: Any, tmp_path: Any) -> str:
    if request.param == "file":
        return f"file:{tmp_path}"
    cluster = request.getfixturevalue("pg_cluster")
    from agentkit.stores.postgres import PostgresEventStore

    schema = cluster.fresh_schema()
    store = PostgresEventStore(cluster.conninfo, schema=schema, connect_timeout=5)
    store.migrate()
    store.close()
    return f"pg:{schema}:{cluster.conninfo}"


@pytest.fixture(params=["file", "postgres"])
def store_spec(request: Any, tmp_path: Any) -> str:
    return stores(request, tmp_path)


def test_another_process_configures_a_live_session_and_its_next_turn_here_uses_that(store_spec: str) -> None:
    from _config_child import configure_and_ask

    with open_session(store_spec, "live", system="parent's") as session:
        assert session.ask("before").text == "system=parent's tools=alpha,beta,gamma"
        answer = run_child(configure_and_ask, store_spec, "live", "the child's", "alpha,gamma")
        assert answer == "system=the child's tools=alpha,gamma"
        # this object was open all along: its next turn catches up and uses the child's configuration
        assert session.ask("after").text == "system=the child's tools=alpha,gamma"


def test_a_process_not_given_a_tool_another_process_configured_refuses_its_turn_and_commits_nothing(
    tmp_path: Any,
) -> None:
    from _config_child import configure_and_ask

    spec = f"file:{tmp_path}"
    with open_session(spec, "live", tools="alpha,beta") as session:
        run_child(configure_and_ask, spec, "live", "child", "alpha,gamma")
        before = len(session.events)
        with pytest.raises(ConfigurationError, match="gamma"):
            session.ask("refused")
        assert len(session.events) == before  # its prompt was not committed


def test_two_processes_configuring_at_once_agree_on_the_configuration(store_spec: str) -> None:
    from _config_child import configure_when_told

    go, child_configured, asked = SPAWN.Event(), SPAWN.Event(), SPAWN.Event()
    out = SPAWN.Queue()
    with open_session(store_spec, "race") as session:
        session.ask("start")
        child = SPAWN.Process(target=configure_when_told,
                              args=(store_spec, "race", "the child's", go, child_configured, asked, out))
        child.start()
        go.set()
        session.configure(system="the parent's")  # racing the child's configure
        assert child_configured.wait(120)
        here = session.ask("parent asks").text
        asked.set()
        there = out.get(timeout=120)
        child.join(120)
        assert child.exitcode == 0
        last = configured(session)[-1]["system"]
    assert here == there == f"system={last} tools=alpha,beta,gamma"


def test_a_tool_configured_in_learns_its_session_as_a_tool_given_at_construction_does() -> None:
    from dataclasses import replace

    told: list[tuple[str, Any]] = []
    watching = replace(gamma, on_session=lambda s: told.append(("gamma", s)))
    session = Session(model(), tools=[alpha])
    session.configure(tools=[alpha, watching])
    assert told == [("gamma", session)]
    session.configure(system="again")  # nothing new: told once
    assert told == [("gamma", session)]
    session.close()


def test_the_configuration_survives_retention_removing_its_records(tmp_path: Any) -> None:
    from agentkit import Retention

    def summary(messages: Any, *, reason: str, cancel: Any) -> str:
        return f"summary of {len(messages)} messages"

    spec = f"file:{tmp_path}"
    with open_session(spec, "r", compactor=summary, retention=Retention(max_events=8, keep_last=2)) as session:
        first = session.configure(system="kept", tools=[gamma])
        second = session.configure(system="the latest")  # the tools' latest value stays in the first record
        for turn in range(12):
            session.ask(f"turn {turn}")
        active = {e.id for e in session.events}
        assert first.id not in active and second.id not in active  # retention removed both records
        assert any(e.type == "compaction" for e in session.events)
    with open_session(spec, "r") as reopened:
        assert reopened.ask("again").text == "system=the latest tools=gamma"


def test_a_fork_is_configured_as_its_source_was_at_the_fork_point(tmp_path: Any) -> None:
    spec = f"file:{tmp_path}"
    with open_session(spec, "source") as session:
        session.configure(system="at the fork", tools=[alpha, beta])
        point = session.ask("one")
        session.configure(system="after the fork", tools=[gamma])
        assert session.ask("two").text == "system=after the fork tools=gamma"
        forked = session.fork(at=point.events[-1].id, session_id="forked")
        assert forked.ask("in the fork").text == "system=at the fork tools=alpha,beta"
        forked.close()
    with open_session(spec, "forked") as reopened:
        assert reopened.ask("reopened").text == "system=at the fork tools=alpha,beta"
