"""Tool search: a large catalogue shown as a few tools plus find_tools, the pure ranking,
discovery through real generations, and nothing changed below the threshold."""

from __future__ import annotations

import random

import pytest

from agentkit import (
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    ScriptedModel,
    Session,
    Tool,
    ToolCall,
    ToolSearch,
    run_agent,
)
from agentkit.events import ControlEvent
from agentkit.tools import search_tools

_SERVERS = {
    "github": ["issue", "pull_request", "repository", "branch", "commit", "release"],
    "slack": ["channel", "message", "user", "reaction", "file", "reminder"],
    "jira": ["ticket", "sprint", "board", "epic", "comment", "worklog"],
}
_VERBS = ["create", "list", "get", "update", "delete", "search", "archive", "export", "import",
          "assign", "watch", "count", "lock", "tag", "move", "copy", "rename"]


def _catalogue(calls: list[str] | None = None) -> list[Tool]:
    """300 MCP-style tools, ``<server>__<verb>_<object>`` with distinct descriptions
    (3 servers x 6 objects x 17 verbs = 306, cut to 300)."""
    tools = []
    for server, objects in _SERVERS.items():
        for obj in objects:
            for verb in _VERBS:
                name = f"{server}__{verb}_{obj}"

                def fn(name: str = name, **kwargs: object) -> str:
                    if calls is not None:
                        calls.append(name)
                    return f"{name} ran with {kwargs}"

                tools.append(Tool(
                    name=name,
                    description=f"{verb.capitalize()} a {server.capitalize()} {obj.replace('_', ' ')}.",
                    input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
                    fn=fn,
                ))
    return tools[:300]


def _names(request: object) -> list[str]:
    return [t.name for t in request.tools]  # type: ignore[attr-defined]


def _control(events: tuple[object, ...], action: str) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == action]


# -- the ranking -------------------------------------------------------------------------


def test_the_ranking_finds_the_right_tool_first():
    tools = _catalogue()
    assert search_tools(tools, "create a github issue", limit=3)[0].name == "github__create_issue"
    assert search_tools(tools, "send slack message")[0].name.startswith("slack__")
    assert search_tools(tools, "archive jira epics")[0].name == "jira__archive_epic"  # plural and server
    assert search_tools(tools, "jira__assign_ticket")[0].name == "jira__assign_ticket"  # an exact name
    assert search_tools(tools, "assign_ticket")[0].name == "jira__assign_ticket"  # without the prefix
    assert [t.name for t in search_tools(tools, "pull request", limit=2)] == [
        "github__create_pull_request", "github__list_pull_request"]  # ties keep catalogue order
    assert search_tools(tools, "kubernetes pods") == []
    assert search_tools(tools, "") == []
    assert search_tools(tools, "the of to") == []  # only common words, matching nothing


def test_name_beats_server_beats_description():
    def t(name: str, description: str) -> Tool:
        return Tool(name=name, description=description, input_schema={"type": "object"}, fn=lambda: "")

    tools = [t("notes__add", "Add a note about weather."), t("weather__now", "Current conditions."),
             t("get_weather", "Forecast.")]
    assert [x.name for x in search_tools(tools, "weather")] == ["get_weather", "weather__now", "notes__add"]
    camel = [t("fs__readFile", "Read."), t("fs__writeFile", "Write.")]
    assert [x.name for x in search_tools(camel, "read file")] == ["fs__readFile", "fs__writeFile"]


def test_the_ranking_is_deterministic_and_pure():
    tools = _catalogue()
    queries = ["list channels", "delete github branch", "worklog", "export release notes", "lock"]
    first = [[t.name for t in search_tools(tools, q, limit=10)] for q in queries]
    for _ in range(3):
        assert [[t.name for t in search_tools(tools, q, limit=10)] for q in queries] == first
    shuffled = tools[:]
    random.Random(7).shuffle(shuffled)
    # the best match does not depend on catalogue order (only ties do)
    assert search_tools(shuffled, "delete github branch")[0].name == "github__delete_branch"
    assert len(tools) == 300  # the catalogue was not touched


def test_bad_arguments_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="limit"):
        search_tools(_catalogue(), "x", limit=0)
    with pytest.raises(ConfigurationError, match="query must be a str"):
        search_tools(_catalogue(), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="threshold"):
        ToolSearch(threshold=-1)
    with pytest.raises(ConfigurationError, match="always must be a list"):
        ToolSearch(always="read_file")
    with pytest.raises(ConfigurationError, match="at most 50"):
        ToolSearch(limit=51)
    with pytest.raises(ConfigurationError, match=r"tool_search must be a ToolSearch"):
        Session(ScriptedModel(["x"]), tool_search=40)


# -- through a generation ----------------------------------------------------------------


def test_find_tools_activates_the_right_tool_for_the_next_request():
    calls: list[str] = []
    tools = _catalogue(calls)
    model = ScriptedModel([
        ToolCall(name="find_tools", input={"query": "create github issue", "limit": 3}),
        ToolCall(name="github__create_issue", input={"id": "1"}),
        "created",
    ])
    with Session(model, tools=tools, tool_search=ToolSearch(threshold=40)) as session:
        session.push_user_message("open an issue")
        result = session.generate()
    assert result.text == "created"
    assert _names(model.requests[0]) == ["find_tools"]
    assert "300 available tools" in model.requests[0].tools[0].description
    assert "github 102, slack 102, jira 96" in model.requests[0].tools[0].description
    second = _names(model.requests[1])
    assert second[0] == "github__create_issue" and len(second) == 4 and second[-1] == "find_tools"
    assert calls == ["github__create_issue"]
    found = result.tool_calls[0].output.as_text()
    assert found.startswith("3 tool(s) activated") and "- github__create_issue: Create a Github issue." in found
    [event] = _control(result.events, "tools-discovered")
    assert event.data["query"] == "create github issue"
    assert event.data["names"][0] == "github__create_issue" and len(event.data["names"]) == 3
    assert event.data["tool_call_id"] == result.tool_calls[0].tool_call_id
    # the full schema reaches the model only once the tool is active
    spec = model.requests[1].tools[0]
    assert spec.input_schema["properties"] == {"id": {"type": "string"}}


def test_pinned_tools_and_a_function_model_choosing_from_what_it_sees():
    tools = _catalogue()
    seen: list[list[str]] = []

    def reply(request):
        names = [t.name for t in request.tools]
        seen.append(names)
        if "slack__archive_channel" in names:
            return ToolCall(name="slack__archive_channel", input={}) if len(seen) == 2 else "archived"
        return ToolCall(name="find_tools", input={"query": "archive a slack channel"})

    model = FunctionModel(reply)
    result = run_agent(model, "archive #random", tools=tools,
                       tool_search=ToolSearch(always=["github__get_issue"], limit=2))
    assert result.text == "archived"
    assert seen[0] == ["github__get_issue", "find_tools"]
    assert seen[1][:1] == ["github__get_issue"] and "slack__archive_channel" in seen[1] and len(seen[1]) == 4
    assert seen[2] == seen[1]  # nothing new discovered: the same tool list (a cacheable prefix)


def test_below_the_threshold_nothing_changes():
    tools = _catalogue()[:40]
    model = ScriptedModel(["ok"])
    run_agent(model, "hi", tools=tools, tool_search=ToolSearch(threshold=40))
    assert _names(model.requests[0]) == [t.name for t in tools]  # every tool, no find_tools
    plain = ScriptedModel(["ok"])
    run_agent(plain, "hi", tools=tools)
    assert model.requests[0].tools == plain.requests[0].tools
    assert model.requests[0].system == plain.requests[0].system


def test_a_hidden_tool_called_by_name_still_runs():
    calls: list[str] = []
    model = ScriptedModel([ToolCall(name="jira__lock_board", input={}), "ok"])
    result = run_agent(model, "lock it", tools=_catalogue(calls), tool_search=ToolSearch())
    assert calls == ["jira__lock_board"] and not result.tool_calls[0].output.is_error


def test_an_unknown_tool_error_lists_what_the_model_sees_not_the_catalogue():
    model = ScriptedModel([ToolCall(name="nope", input={}), "ok"])
    result = run_agent(model, "x", tools=_catalogue(), tool_search=ToolSearch(always=["slack__get_user"]))
    text = result.tool_calls[0].output.as_text()
    assert text == "unknown tool 'nope'; available tools: slack__get_user, find_tools"


def test_discovered_tools_carry_over_to_the_sessions_next_generations(tmp_path):
    store = FileEventStore(tmp_path)
    search = ToolSearch(max_discovered=3)
    model = ScriptedModel([
        ToolCall(name="find_tools", input={"query": "github releases", "limit": 2}),
        "found",
        ToolCall(name="find_tools", input={"query": "slack reminders", "limit": 2}),
        "found more",
        "third",
    ])
    with Session(model, tools=_catalogue(), store=store, session_id="s", tool_search=search) as session:
        session.ask("one")
        session.ask("two")
    with Session(model, tools=_catalogue(), store=store, session_id="s", tool_search=search) as session:
        session.ask("three")
    assert _names(model.requests[1]) == ["github__create_release", "github__list_release", "find_tools"]
    assert _names(model.requests[2]) == _names(model.requests[1])  # kept into the next generation
    # after the second search only the 3 most recent stay: one github release tool drops out
    assert _names(model.requests[3]) == ["github__list_release", "slack__create_reminder",
                                         "slack__list_reminder", "find_tools"]
    assert _names(model.requests[4]) == _names(model.requests[3])  # restored from the store


def test_a_search_that_matches_nothing_says_so_and_records_nothing():
    model = ScriptedModel([ToolCall(name="find_tools", input={"query": "kubernetes"}), "none"])
    with Session(model, tools=_catalogue(), tool_search=ToolSearch()) as session:
        result = session.ask("x")
    assert result.tool_calls[0].output.as_text().startswith("No tool matches 'kubernetes'")
    assert _names(model.requests[1]) == ["find_tools"]
    assert _control(result.events, "tools-discovered") == []


def test_parallel_searches_in_one_step_all_activate():
    model = ScriptedModel([
        [ToolCall(name="find_tools", input={"query": "jira sprint", "limit": 1}),
         ToolCall(name="find_tools", input={"query": "slack reaction", "limit": 1})],
        "ok",
    ])
    with Session(model, tools=_catalogue(), tool_search=ToolSearch()) as session:
        session.push_user_message("x")
        result = session.generate()
    assert set(_names(model.requests[1])) == {"slack__create_reaction", "jira__create_sprint", "find_tools"}
    assert len(_control(result.events, "tools-discovered")) == 2


def test_redaction_covers_the_recorded_query():
    model = ScriptedModel([ToolCall(name="find_tools", input={"query": "github issue sk-SECRET123"}), "ok"])
    with Session(model, tools=_catalogue(), tool_search=ToolSearch(), redact=[r"sk-[A-Z0-9]+"]) as session:
        session.push_user_message("x")
        result = session.generate()
    [event] = _control(result.events, "tools-discovered")
    assert "SECRET" not in event.data["query"] and "[redacted]" in event.data["query"]


def test_configuration_errors():
    def find_tools(query: str) -> str:
        """Mine."""
        return query

    with pytest.raises(ConfigurationError, match="'find_tools', the name of a built-in tool tool_search= adds"):
        Session(ScriptedModel(["x"]), tools=[find_tools], tool_search=ToolSearch())
    with pytest.raises(ConfigurationError, match="names tools the session does not have: nope"):
        Session(ScriptedModel(["x"]), tools=_catalogue(), tool_search=ToolSearch(always=["nope"]))


def test_tool_choice_names_a_tool_that_stays_visible():
    model = ScriptedModel([ToolCall(name="jira__get_epic", input={}), "ok"])
    run_agent(model, "x", tools=_catalogue(), tool_search=ToolSearch(), tool_choice="jira__get_epic", max_steps=2)
    assert _names(model.requests[0]) == ["jira__get_epic", "find_tools"]


# -- real MCP servers --------------------------------------------------------------------


def _mcp_server(server: str, objects: list[str]):
    """A low-level MCP server listing one tool per verb and object, 50 per page."""
    import mcp_types as types
    from mcp.server import Server

    tools = [types.Tool(name=f"{verb}_{obj}", description=f"{verb.capitalize()} a {server} {obj}.",
                        input_schema={"type": "object", "properties": {"id": {"type": "string"}}})
             for obj in objects for verb in _VERBS]

    async def list_tools(ctx, params):
        start = int(params.cursor) if params is not None and params.cursor else 0
        nxt = str(start + 50) if start + 50 < len(tools) else None
        return types.ListToolsResult(tools=tools[start:start + 50], next_cursor=nxt)

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{server}:{params.name} done")])

    return Server(server, on_list_tools=list_tools, on_call_tool=call_tool)


def test_hundreds_of_real_mcp_tools():
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp_servers.helpers import no_leaks

    from agentkit.mcp import connect_mcp

    clients = {s: Client(_mcp_server(s, objs), mode="legacy") for s, objs in _SERVERS.items()}
    model = ScriptedModel([
        ToolCall(name="find_tools", input={"query": "rename jira worklog", "limit": 2}),
        ToolCall(name="jira__rename_worklog", input={"id": "7"}),
        "renamed",
    ])
    with no_leaks(), connect_mcp(clients) as toolset:
        assert len(toolset.tools) == 306
        with Session(model, tools=toolset.tools, tool_search=ToolSearch()) as session:
            result = session.ask("rename worklog 7")
    assert result.text == "renamed"
    assert _names(model.requests[0]) == ["find_tools"]
    assert "306 available tools" in model.requests[0].tools[0].description
    assert _names(model.requests[1]) == ["jira__rename_ticket", "jira__rename_worklog", "find_tools"]
    assert result.tool_calls[1].output.as_text() == "jira:rename_worklog done"
    [event] = _control(result.events, "tools-discovered")
    assert event.data["names"][0] == "jira__rename_worklog"


def test_the_built_in_tools_refuse_to_run_outside_a_generation():
    from agentkit import CancelToken, ToolContext
    from agentkit.loop._generation_tools import _find_tools_tool

    ctx = ToolContext(tool_call_id="c", tool_name="find_tools", cancel=CancelToken())
    with pytest.raises(RuntimeError, match="runs only inside a generation"):
        _find_tools_tool("3 available tools", 10).fn(query="x", ctx=ctx)


def test_tool_choice_may_name_find_tools_when_it_is_offered():
    model = ScriptedModel([ToolCall(name="find_tools", input={"query": "jira epic"}), "ok"])
    run_agent(model, "x", tools=_catalogue(), tool_search=ToolSearch(), tool_choice="find_tools", max_steps=2)
    assert model.requests[0].tool_choice == "find_tools" and _names(model.requests[0]) == ["find_tools"]
    with pytest.raises(ConfigurationError, match="tool_choice 'find_tools' is neither"):
        run_agent(ScriptedModel(["x"]), "x", tools=_catalogue()[:3], tool_search=ToolSearch(), tool_choice="find_tools")
