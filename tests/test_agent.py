"""``Agent``: an immutable bundle of model, tools and options; deps reach tools and hooks."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from agentkit import (
    Agent,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    Hooks,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    run_agent,
    tool,
)
from agentkit.streaming import GenerationEndEvent


@dataclass
class Db:
    rows: dict[str, int]


@tool
def count(name: str, ctx: ToolContext) -> int:
    """Count rows."""
    return ctx.deps.rows[name]


class Answer(BaseModel):
    value: int


def _count_then_answer(request):
    results = [p for m in request.messages if m.role == "tool" for p in m.content]
    if not results:
        return ToolCall(name="count", input={"name": request.messages[0].text})
    if request.output is not None:
        return ToolCall(name="final_answer", input={"value": results[-1].output.value})
    return f"{results[-1].output.value}"


def test_deps_reach_a_tool_and_the_hooks_through_tool_context():
    seen = []
    hooks = Hooks(before_tool_call=lambda call, ctx: seen.append(("before", ctx.deps)),
                  after_tool_call=lambda call, output, ctx: seen.append(("after", ctx.deps)))
    db = Db(rows={"apples": 3})
    agent = Agent(FunctionModel(_count_then_answer), tools=[count], hooks=hooks, deps_type=Db)
    result = agent.run("apples", deps=db)
    assert result.text == "3"
    assert seen == [("before", db), ("after", db)]
    assert seen[0][1] is db


def test_a_tool_taking_a_typed_tool_context_gets_the_context_and_the_deps():
    """``ctx: ToolContext[Db]`` (so a type checker knows ``ctx.deps`` is a Db) is the
    context parameter as a bare ``ToolContext`` is: not part of the schema, given the call's
    context and deps."""

    @tool
    def count(name: str, ctx: ToolContext[Db]) -> int:
        """Count rows."""
        return ctx.deps.rows[name]

    assert set(count.input_schema["properties"]) == {"name"}
    agent = Agent(FunctionModel(_count_then_answer), tools=[count], deps_type=Db)
    result = agent.run("apples", deps=Db(rows={"apples": 3}))
    assert result.text == "3"
    assert not result.tool_calls[0].is_error


def test_results_and_contexts_are_generic_at_run_time_too():
    """``RunResult[Answer]``, ``ToolContext[Db]``, ``Agent[Db, Answer]``... are valid
    subscripts where code names them outside annotations (casts, isinstance on the origin)."""
    from agentkit import AgentStream, GenerateResult, RunResult, Session

    for generic in (RunResult, GenerateResult, AgentStream, ToolContext):
        assert generic[Answer].__origin__ is generic
    assert Agent[Db, Answer].__origin__ is Agent
    assert Session[Db, Answer].__origin__ is Session


def test_deps_type_mismatch_and_missing_deps_fail_before_the_model_is_called():
    model = FunctionModel(_count_then_answer)
    agent = Agent(model, tools=[count], deps_type=Db)
    with pytest.raises(ConfigurationError, match="deps must be a Db"):
        agent.run("apples", deps={"apples": 3})
    with pytest.raises(ConfigurationError, match="no deps were given"):
        agent.run("apples")
    with pytest.raises(ConfigurationError, match="deps must be a Db"):
        agent.stream("apples", deps=42)
    with agent.session() as session, pytest.raises(ConfigurationError, match="deps must be a Db"):
        session.ask("apples", deps="nope")
    assert model.request_count == 0


def test_deps_are_never_written_to_the_log(tmp_path):
    store = FileEventStore(tmp_path)
    agent = Agent(FunctionModel(_count_then_answer), tools=[count])
    with agent.session("s1", store=store, deps=Db(rows={"secretrows": 1})) as session:
        session.ask("secretrows")
    log = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert "secretrows" in log  # the prompt is there...
    assert "Db(" not in log and "rows" not in log.replace("secretrows", "")  # ...the deps are not


def test_output_type_and_deps_together_through_run_and_run_agent():
    agent = Agent(FunctionModel(_count_then_answer), tools=[count], output_type=Answer, deps_type=Db)
    assert agent.run("pears", deps=Db(rows={"pears": 5})).output == Answer(value=5)
    result = run_agent(FunctionModel(_count_then_answer), "pears", tools=[count], output_type=Answer,
                       deps=Db(rows={"pears": 6}))
    assert result.output == Answer(value=6)


def test_an_agent_is_immutable():
    agent = Agent(ScriptedModel(["x"]), system="s")
    with pytest.raises(AttributeError, match="immutable"):
        agent.system = "other"  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="immutable"):
        agent._options = None  # type: ignore[misc]
    with pytest.raises(Exception):  # noqa: B017 - the options object is frozen too
        agent.options.system = "other"  # type: ignore[misc]
    assert agent.options.system == "s"


def test_with_options_is_a_changed_copy():
    agent = Agent(ScriptedModel(["x"]), system="s", max_steps=3)
    other = agent.with_options(system="t", output_type=int)
    assert (agent.options.system, agent.output_type) == ("s", None)
    assert (other.options.system, other.options.max_steps, other.output_type) == ("t", 3, int)
    assert other.model is agent.model
    with pytest.raises(ConfigurationError, match="unknown option"):
        agent.with_options(sytem="x")


def test_bad_options_fail_when_the_agent_is_built():
    with pytest.raises(ConfigurationError, match="max_steps"):
        Agent(ScriptedModel(["x"]), max_steps=0)
    with pytest.raises(ConfigurationError, match="unknown option"):
        Agent(ScriptedModel(["x"]), sytem="x")
    with pytest.raises(ConfigurationError, match="deps_type must be a type"):
        Agent(ScriptedModel(["x"]), deps_type="Db")


def test_one_agent_serves_many_threads_at_once_each_with_its_own_conversation():
    def reply(request):
        results = [p for m in request.messages if m.role == "tool" for p in m.content]
        if not results:
            return ToolCall(name="count", input={"name": request.messages[0].text})
        return ToolCall(name="final_answer", input={"value": results[-1].output.value})

    agent = Agent(FunctionModel(reply, keep_requests=0), tools=[count], output_type=Answer, deps_type=Db)
    outputs: dict[int, object] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(i: int) -> None:
        try:
            start.wait()
            for j in range(5):
                n = i * 100 + j
                result = agent.run(f"k{n}", deps=Db(rows={f"k{n}": n}))
                assert len(result.messages) == 5  # user, call, result, answer call, answer result
                outputs[n] = result.output
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert outputs == {i * 100 + j: Answer(value=i * 100 + j) for i in range(8) for j in range(5)}


def test_agent_session_is_durable_and_restored_from_the_store(tmp_path):
    store = FileEventStore(tmp_path)
    model = FunctionModel(lambda r: f"seen {len(r.messages)} messages")
    agent = Agent(model, system="be brief", output_type=None)
    with agent.session("chat", store=store) as session:
        assert isinstance(session, Session)
        assert session.ask("one").text == "seen 1 messages"
    with agent.session("chat", store=store) as session:
        assert session.ask("two").text == "seen 3 messages"
    assert model.requests[-1].system == "be brief"
    with Session.open("chat", store=store) as plain:
        assert len(plain.model_messages()) == 4


def test_agent_session_takes_options_and_session_arguments():
    agent = Agent(ScriptedModel([ToolCall(name="final_answer", input={"response": 2})]))
    with agent.session(output_type=int, listener_queue_size=10) as session:
        assert session.ask("go").output == 2


def test_agent_stream_result_carries_the_output():
    agent = Agent(FunctionModel(_count_then_answer), tools=[count], output_type=Answer)
    stream = agent.stream("figs", deps=Db(rows={"figs": 9}))
    events = list(stream)
    assert isinstance(events[-1], GenerationEndEvent)
    assert stream.result.output == Answer(value=9)


def test_run_overrides_apply_to_one_run_only():
    model = FunctionModel(lambda r: r.system or "none")
    agent = Agent(model, system="agent")
    assert agent.run("x", system="override").text == "override"
    assert agent.run("x").text == "agent"


def test_messages_continue_an_earlier_conversation():
    model = FunctionModel(lambda r: f"{len(r.messages)}")
    agent = Agent(model)
    first = agent.run("a")
    assert agent.run("b", messages=first.messages).text == "3"


def test_with_options_replaces_model_and_tools_and_composes_hooks():
    calls = []
    first = Hooks(before_tool_call=lambda call, ctx: calls.append("first"))
    second = Hooks(before_tool_call=lambda call, ctx: calls.append("second"))
    agent = Agent(ScriptedModel(["unused"]), hooks=first)
    other = agent.with_options(model=ScriptedModel([ToolCall(name="count", input={"name": "a"}), "ok"]),
                               tools=[count], hooks=second)
    assert other.run("a", deps=Db(rows={"a": 1})).text == "ok"
    assert calls == ["first", "second"]
    assert agent.tools == () and [t.name for t in other.tools] == ["count"]


def test_agent_takes_a_model_spec_string_and_keeps_its_tools_as_a_tuple():
    agent = Agent("echo", tools=[count])
    assert agent.model.model_name == "echo"
    assert isinstance(agent.tools, tuple)


def test_copying_an_agent_gives_the_same_immutable_agent():
    import copy

    agent = Agent(ScriptedModel(["x"]))
    assert copy.copy(agent) is agent and copy.deepcopy(agent) is agent


def test_run_takes_only_generation_options():
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="unknown option 'store'"):
        agent.run("x", store=None)
    with pytest.raises(ConfigurationError, match="Did you mean 'max_steps'"):
        agent.run("x", max_step=2)
    with pytest.raises(ConfigurationError, match="unknown option"):
        agent.session(not_a_thing=1)


def test_run_agent_checks_deps_type_and_passes_session_arguments_on(tmp_path):
    with pytest.raises(ConfigurationError, match="deps_type must be a type"):
        run_agent(ScriptedModel(["x"]), "x", deps_type="Db", deps=1)
    with pytest.raises(ConfigurationError, match="deps must be a Db"):
        run_agent(ScriptedModel(["x"]), "x", deps_type=Db, deps=1)
    store = FileEventStore(tmp_path)
    run_agent(ScriptedModel(["stored"]), "x", store=store, session_id="kept")
    with Session.open("kept", store=store) as session:
        assert session.model_messages()[-1].text == "stored"
