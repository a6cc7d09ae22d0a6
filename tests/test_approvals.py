"""Approvals: the policy's modes and rule precedence, the in-process approver (model
order, timeout), durable pending approvals resumed by the next generate(), remember, and
every tool kind (@tool, built-in, MCP with readOnlyHint, LangChain) behind one gate."""

from __future__ import annotations

import threading

import pytest
from langchain_core.tools import tool as lc_tool
from mcp_servers.helpers import DEMO, stdio

from agentkit import (
    ApprovalDecision,
    ApprovalError,
    ApprovalPolicy,
    ApprovalRequest,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    HookError,
    ScriptedModel,
    Session,
    ToolCall,
    filesystem_tools,
    run_agent,
    tool,
)
from agentkit.events import ControlEvent
from agentkit.execution import LocalExecutionContext
from agentkit.mcp import connect_mcp

# -- the policy: pure logic ----------------------------------------------------------------


def act(policy: ApprovalPolicy, name: str, read_only: bool = False, remembered=None) -> str:
    return policy.verdict(name, read_only=read_only, remembered=remembered).action


@pytest.mark.parametrize(
    ("mode", "for_read_only", "for_write"),
    [("autopilot", "allow", "allow"), ("ask-writes", "allow", "ask"), ("ask-all", "ask", "ask"),
     ("read-only", "allow", "deny")],
)
def test_every_mode(mode, for_read_only, for_write):
    policy = ApprovalPolicy(mode=mode)
    assert act(policy, "read_file", read_only=True) == for_read_only
    assert act(policy, "write_file", read_only=False) == for_write


def test_a_rule_beats_the_mode():
    assert act(ApprovalPolicy(mode="read-only", rules={"write_file": "allow"}), "write_file") == "allow"
    assert act(ApprovalPolicy(mode="autopilot", rules={"rm": "deny"}), "rm") == "deny"
    assert act(ApprovalPolicy(mode="ask-writes", rules={"read_file": "ask"}), "read_file", True) == "ask"
    assert act(ApprovalPolicy(mode="ask-all", rules={"*": "allow"}), "anything") == "allow"


def test_an_exact_name_beats_a_glob_and_a_longer_glob_beats_a_shorter_one():
    policy = ApprovalPolicy(mode="ask-all", rules={
        "*": "deny", "git__*": "ask", "git__log*": "allow", "git__push": "deny", "git__pus?": "allow",
    })
    assert act(policy, "git__push") == "deny"  # exact, though a longer glob also matches
    assert act(policy, "git__log_all") == "allow"  # "git__log*" is longer than "git__*"
    assert act(policy, "git__status") == "ask"  # "git__*" is longer than "*"
    assert act(policy, "ls") == "deny"  # only "*"
    assert act(policy, "git__puss") == "allow"  # "git__pus?" (9) beats "git__*" (6)


def test_equally_long_globs_the_stricter_wins():
    policy = ApprovalPolicy(mode="autopilot", rules={"git_*": "allow", "*_log": "deny"})
    assert act(policy, "git_log") == "deny"
    assert policy.rule_for("git_log") == ("*_log", "deny")


def test_a_remembered_answer_replaces_ask_but_never_loosens_a_deny():
    remembered = {"write_file": "allow", "rm": "allow", "mail": "deny"}
    assert act(ApprovalPolicy(mode="ask-writes"), "write_file", remembered=remembered) == "allow"
    assert act(ApprovalPolicy(mode="ask-writes"), "mail", remembered=remembered) == "deny"
    assert act(ApprovalPolicy(mode="read-only"), "rm", remembered=remembered) == "deny"
    assert act(ApprovalPolicy(mode="ask-all", rules={"rm": "deny"}), "rm", remembered=remembered) == "deny"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"mode": "careful"}, "mode must be one of"), ({"rules": {"rm": "never"}}, "rule 'rm' must map"),
     ({"rules": {"": "allow"}}, "non-empty tool-name globs"), ({"timeout": 0}, "timeout must be"),
     ({"rules": ["rm"]}, "rules must be a dict")],
)
def test_a_bad_policy_is_a_configuration_error(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        ApprovalPolicy(**kwargs)


def test_approval_must_be_a_policy():
    with pytest.raises(ConfigurationError, match="approval must be an ApprovalPolicy"):
        Session(ScriptedModel(["x"]), approval="ask-writes")


# -- tools ------------------------------------------------------------------------------------

RAN: list[str] = []


@tool
def write_note(text: str) -> str:
    """Write a note."""
    RAN.append(f"write {text}")
    return f"wrote {text}"


@tool(read_only=True)
def read_notes() -> str:
    """Read the notes."""
    RAN.append("read")
    return "no notes"


@pytest.fixture(autouse=True)
def _clear():
    RAN.clear()


def approval_events(session, action):
    return [e for e in session.events if isinstance(e, ControlEvent) and e.action == action]


def tool_texts(messages) -> list[tuple[str, str]]:
    return [(p.tool_call_id, p.output.as_text()) for m in messages if m.role == "tool" for p in m.content]


# -- policy decisions in a generation ---------------------------------------------------------


def test_a_denied_call_never_runs_and_the_model_reads_why():
    model = ScriptedModel([[ToolCall("write_note", {"text": "a"}), ToolCall("read_notes", {})], "ok"])
    result = run_agent(model, "go", tools=[write_note, read_notes], approval=ApprovalPolicy(mode="read-only"))
    assert RAN == ["read"]
    denied = result.tool_calls[0]
    assert denied.error.startswith("denied: the approval policy is read-only and 'write_note'")
    assert tool_texts(model.requests[1].messages)[0][1].startswith("denied: ")


def test_the_approver_is_asked_in_model_order_and_decisions_are_events():
    asked: list[str] = []

    def approver(request: ApprovalRequest):
        asked.append(request.input["text"])
        if request.input["text"] == "b":
            return ApprovalDecision.deny("not b", note="alice")
        return True

    calls = [ToolCall("write_note", {"text": t}, id=f"c{t}") for t in "abc"]
    model = ScriptedModel([[*calls, ToolCall("read_notes", {})], "done"])
    with Session(model, tools=[write_note, read_notes], approval=ApprovalPolicy(mode="ask-writes"),
                 approver=approver) as s:
        s.push_user_message("go")
        result = s.generate()
        assert asked == ["a", "b", "c"]
        assert sorted(RAN) == ["read", "write a", "write c"]
        assert [c.error for c in result.tool_calls] == [None, "denied: not b", None, None]
        requested = approval_events(s, "approval-requested")
        assert len(requested) == 1 and [r["tool_call_id"] for r in requested[0].data["requests"]] == ["ca", "cb", "cc"]
        decided = [e.data for e in approval_events(s, "approval-decided")]
        assert [(d["decision"], d["note"], d["source"]) for d in decided] == [
            ("approved", None, "approver"), ("denied", "alice", "approver"), ("approved", None, "approver")]
        assert s.pending_approvals() == []
    # approval events are not shown to the model: it saw the results only
    seen = model.requests[1].messages
    assert [m.role for m in seen] == ["user", "assistant", "tool"]
    assert [cid for cid, _ in tool_texts(seen)] == ["ca", "cb", "cc", tool_texts(seen)[3][0]]


def test_no_answer_within_the_timeout_is_a_deny():
    release = threading.Event()

    def slow(request):
        release.wait(30)
        return True

    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    try:
        with Session(model, tools=[write_note], approval=ApprovalPolicy(mode="ask-all", timeout=0.2),
                     approver=slow) as s:
            s.push_user_message("go")
            result = s.generate()
            assert result.tool_calls[0].error == "denied: no answer within 0.2s"
            assert RAN == []
            (decided,) = approval_events(s, "approval-decided")
            assert decided.data["source"] == "timeout" and decided.data["decision"] == "denied"
    finally:
        release.set()


@pytest.mark.parametrize("answer", [None, "yes", 1])
def test_an_approver_that_answers_nonsense_is_a_hook_error(answer):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    with pytest.raises(HookError, match="return True, False or an ApprovalDecision"):
        run_agent(model, "go", tools=[write_note], approval=ApprovalPolicy(), approver=lambda r: answer)
    assert RAN == []


def test_in_process_remember_allows_later_calls_without_asking():
    asked: list[str] = []

    def approver(request):
        asked.append(request.tool_name)
        return ApprovalDecision.approve(remember=True, note="cli")

    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), ToolCall("write_note", {"text": "b"}), "ok"])
    with Session(model, tools=[write_note], approval=ApprovalPolicy(), approver=approver) as s:
        s.push_user_message("go")
        s.generate()
        assert asked == ["write_note"] and RAN == ["write a", "write b"]
        (rule,) = approval_events(s, "approval-remembered")
        assert rule.data["tool_name"] == "write_note" and rule.data["action"] == "allow"


# -- durable approvals --------------------------------------------------------------------


def durable(tmp_path, model, **kwargs):
    return Session.open("s1", store=FileEventStore(tmp_path / "store"), model=model,
                        tools=[write_note, read_notes], approval=ApprovalPolicy(mode="ask-writes"), **kwargs)


def test_without_an_approver_the_generation_stops_and_the_next_one_resumes(tmp_path):
    model = ScriptedModel([
        [ToolCall("write_note", {"text": "a"}, id="w"), ToolCall("read_notes", {}, id="r")],
        "all done",
    ])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        first = s.generate()
        assert first.finish_reason == "approval-required"
        assert RAN == ["read"]  # the call of the same step that needed no approval ran
        (pending,) = s.pending_approvals()
        assert (pending.tool_name, pending.input, pending.tool_call_id) == ("write_note", {"text": "a"}, "w")
        assert pending.requested_at > 0 and "not marked read-only" in pending.reason
        again = s.generate()  # still undecided: no model call, nothing runs
        assert again.finish_reason == "approval-required" and len(model.requests) == 1
    with durable(tmp_path, model) as s:  # reopened: the same pending list
        assert [p.id for p in s.pending_approvals()] == [pending.id]
        s.approve(pending.id, note="bob")
        assert s.pending_approvals() == []
        result = s.generate()
    assert result.finish_reason == "stop" and result.text == "all done"
    assert RAN == ["read", "write a"]  # exactly once
    # results in model order, the approved call's output included
    assert tool_texts(model.requests[1].messages) == [("w", "wrote a"), ("r", "no notes")]
    assert [r.tool_call_id for r in result.tool_calls] == ["w"]


def test_a_denied_request_gets_its_error_result_and_the_loop_continues(tmp_path):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}, id="w"), "understood"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        assert s.generate().finish_reason == "approval-required"
        (pending,) = s.pending_approvals()
        s.deny(pending.id, reason="not on a Friday", note="carol")
        result = s.generate()
    assert RAN == []
    assert result.text == "understood"
    assert tool_texts(model.requests[1].messages) == [("w", "denied: not on a Friday")]


def test_deciding_twice_a_denied_request_or_an_unknown_id_is_a_clear_error(tmp_path):
    model = ScriptedModel([[ToolCall("write_note", {"text": "a"}), ToolCall("write_note", {"text": "b"})], "ok"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        s.generate()
        first, second = s.pending_approvals()
        s.approve(first.id)
        with pytest.raises(ApprovalError, match="was already approved; cannot approve it again"):
            s.approve(first.id)
        with pytest.raises(ApprovalError, match="was already approved; cannot deny"):
            s.deny(first.id, reason="changed my mind")
        s.deny(second.id, reason="no")
        with pytest.raises(ApprovalError, match="was already denied; cannot approve"):
            s.approve(second.id)
        with pytest.raises(ApprovalError, match="unknown approval request 'nope'") as info:
            s.approve("nope")
        assert info.value.request_id == "nope"
        with pytest.raises(ConfigurationError, match="non-empty reason"):
            s.deny(first.id, reason=" ")
        s.generate()
        assert RAN == ["write a"]


def test_a_pending_request_holds_the_generation_whatever_its_options(tmp_path):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        s.generate()
        (pending,) = s.pending_approvals()
        # the log says a request is open: no policy for this call does not skip it
        assert s.generate(approval=None).finish_reason == "approval-required"
        assert len(model.requests) == 1 and RAN == []


def test_a_request_whose_call_was_answered_otherwise_cannot_be_decided(tmp_path):
    from agentkit.events import ToolResultEvent
    from agentkit.messages import ToolOutput

    model = ScriptedModel([ToolCall("write_note", {"text": "a"}, id="w"), "ok"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        s.generate()
        (pending,) = s.pending_approvals()
        s.push_event(ToolResultEvent(tool_call_id="w", tool_name="write_note", output=ToolOutput.error("skipped")))
        assert s.pending_approvals() == []
        with pytest.raises(ApprovalError, match="no longer pending"):
            s.approve(pending.id)
        assert s.generate().text == "ok"
    assert RAN == []


def test_remember_survives_reopen(tmp_path):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "one", ToolCall("write_note", {"text": "b"}), "two"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        s.generate()
        s.approve(s.pending_approvals()[0].id, remember=True, note="dave")
        s.generate()
    with durable(tmp_path, model) as s:  # another Session object, as in another process
        s.push_user_message("again")
        result = s.generate()
        assert result.finish_reason == "stop" and result.text == "two"
        assert len(approval_events(s, "approval-requested")) == 1  # not asked again
    assert RAN == ["write a", "write b"]


def test_a_remembered_rule_survives_retention_archiving_its_event_and_a_reopen(tmp_path):
    from agentkit import FunctionModel, Retention

    def reply(request):
        last = request.messages[-1]
        if last.role == "user" and last.text.startswith("note"):
            return ToolCall("write_note", {"text": last.text})
        return "ok"

    def summary(messages, *, reason, cancel):
        return "earlier notes were written"

    def session():
        return durable(tmp_path, FunctionModel(reply), compactor=summary,
                       retention=Retention(max_events=8, keep_last=2))

    with session() as s:
        s.push_user_message("note 0")
        s.generate()
        s.approve(s.pending_approvals()[0].id, remember=True)
        s.generate()
        for i in range(1, 8):  # enough turns for retention to archive the remembered rule
            s.push_user_message(f"note {i}")
            assert s.generate().finish_reason == "stop"
        active = [e for e in s.events if e.type == "control" and e.action == "approval-remembered"]
        assert active and all("carried_by" in e.data for e in active)  # the original was archived
    with session() as s:
        s.push_user_message("note 9")
        assert s.generate().finish_reason == "stop"  # not asked: the rule is still known
        assert s.pending_approvals() == []
    assert RAN == [f"write note {i}" for i in (*range(8), 9)]


def test_a_failed_approver_leaves_its_request_pending(tmp_path):
    def broken(request):
        raise RuntimeError("prompt crashed")

    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    with durable(tmp_path, model, approver=broken) as s:
        s.push_user_message("go")
        with pytest.raises(HookError, match="prompt crashed"):
            s.generate()
        (pending,) = s.pending_approvals()
        # the next generation's approver answers what was asked before
        assert s.generate(approver=lambda r: ApprovalDecision.approve(note=f"late {r.id}")).text == "ok"
        decided = approval_events(s, "approval-decided")
        assert [d.data["note"] for d in decided] == [f"late {pending.id}"]
    assert RAN == ["write a"]


# -- every tool kind --------------------------------------------------------------------------


@lc_tool
def lc_reverse(text: str) -> str:
    """Reverse a text."""
    RAN.append("lc_reverse")
    return text[::-1]


def test_every_tool_kind_passes_the_same_gate_under_ask_writes(tmp_path):
    asked: list[str] = []

    def approver(request):
        asked.append(request.tool_name)
        return False

    (tmp_path / "n.txt").write_text("hello")
    builtin = filesystem_tools(LocalExecutionContext(tmp_path))
    with connect_mcp({"demo": stdio(DEMO)}) as toolset:
        names = {t.name: t for t in toolset.tools}
        assert names["echo"].read_only and not names["add"].read_only  # readOnlyHint
        turns = [[ToolCall("echo", {"text": "hi"}), ToolCall("add", {"a": 1, "b": 2}),
                  ToolCall("read_file", {"path": "n.txt"}), ToolCall("write_file", {"path": "m.txt", "content": "x"}),
                  ToolCall("write_note", {"text": "a"}), ToolCall("lc_reverse", {"text": "ab"})], "done"]
        result = run_agent(ScriptedModel(turns), "go", tools=[*toolset.tools, *builtin, write_note, lc_reverse],
                           approval=ApprovalPolicy(mode="ask-writes"), approver=approver)
    assert asked == ["add", "write_file", "write_note", "lc_reverse"]
    outcome = {c.tool_name: c.error for c in result.tool_calls}
    assert outcome["echo"] is None and outcome["read_file"] is None
    assert all(outcome[n] == "denied: denied by the reviewer" for n in asked)
    assert not (tmp_path / "m.txt").exists() and RAN == []


def test_mcp_tools_wait_for_durable_approval_too(tmp_path):
    log = tmp_path / "mcp.log"
    with connect_mcp({"demo": stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})}) as toolset:
        model = FunctionModel(lambda r: [ToolCall("echo", {"text": "hi"}), ToolCall("add", {"a": 2, "b": 3})]
                              if len(r.messages) == 1 else "five")
        with Session(model, tools=toolset.tools, approval=ApprovalPolicy(mode="ask-writes")) as s:
            s.push_user_message("go")
            assert s.generate().finish_reason == "approval-required"
            assert log.read_text().splitlines() == ["echo hi"]
            s.approve(s.pending_approvals()[0].id)
            assert s.generate().text == "five"
    assert log.read_text().splitlines() == ["echo hi", "add 2 3"]


def test_concurrent_decisions_of_one_request_let_exactly_one_win(tmp_path):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    with durable(tmp_path, model) as s:
        s.push_user_message("go")
        s.generate()
        (pending,) = s.pending_approvals()
        start = threading.Barrier(8)
        outcomes: list[str] = []

        def decide(i: int) -> None:
            start.wait()
            try:
                if i % 2:
                    s.approve(pending.id, note=f"t{i}")
                else:
                    s.deny(pending.id, reason=f"t{i}")
                outcomes.append("won")
            except ApprovalError:
                outcomes.append("refused")

        threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["refused"] * 7 + ["won"]
        assert len(approval_events(s, "approval-decided")) == 1


def test_cancelling_while_the_approver_thinks_stops_at_once_and_leaves_the_request(tmp_path):
    from agentkit import CancelledError, CancelToken

    asked = threading.Event()
    release = threading.Event()
    token = CancelToken()

    def approver(request):
        asked.set()
        release.wait(30)
        return True

    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    try:
        with durable(tmp_path, model, approver=approver) as s:
            s.push_user_message("go")
            threading.Thread(target=lambda: (asked.wait(30), token.cancel("user left")), daemon=True).start()
            with pytest.raises(CancelledError):
                s.generate(cancel=token)
            assert [p.tool_name for p in s.pending_approvals()] == ["write_note"] and RAN == []
    finally:
        release.set()


def test_a_stale_session_cannot_decide_what_another_writer_decided(tmp_path):
    model = ScriptedModel([ToolCall("write_note", {"text": "a"}), "ok"])
    with durable(tmp_path, model) as first:
        first.push_user_message("go")
        first.generate()
        (pending,) = first.pending_approvals()
        with durable(tmp_path, model) as other:  # another writer decides first
            other.deny(pending.id, reason="no", note="other host")
        with pytest.raises(ApprovalError, match="already denied"):
            first.approve(pending.id)  # caught up and decided again: refused, nothing written
        assert first.pending_approvals() == []
        decisions = [e.data["decision"] for e in first.events if e.type == "control" and e.action == "approval-decided"]
        assert decisions == ["denied"]
        assert first.generate().text == "ok"
    assert RAN == []


def test_a_repeated_call_id_is_asked_once_and_runs_once():
    asked: list[str] = []

    def approver(request):
        asked.append(request.tool_call_id)
        return True

    model = ScriptedModel([
        [ToolCall("write_note", {"text": "a"}, id="x"), ToolCall("write_note", {"text": "a"}, id="x")],
        ToolCall("write_note", {"text": "a"}, id="x"),  # a provider repeating an id in a later step
        "ok",
    ])
    result = run_agent(model, "go", tools=[write_note], approval=ApprovalPolicy(), approver=approver)
    assert asked == ["x"] and RAN == ["write a"]
    assert [c.reused for c in result.tool_calls] == [False, True, True]


def test_the_built_in_read_tools_are_read_only_and_the_others_are_not(tmp_path):
    from agentkit import http_tools, json_tools, shell_tools

    ctx = LocalExecutionContext(tmp_path)
    tools = [*filesystem_tools(ctx, include_delete=True), *json_tools(), *http_tools(), *shell_tools(ctx)]
    marked = {t.name for t in tools if t.read_only}
    assert marked == {"read_file", "list_directory", "json_validate", "json_transform", "http_get"}
    policy = ApprovalPolicy(mode="read-only")
    assert {t.name for t in tools if act(policy, t.name, t.read_only) == "deny"} == {t.name for t in tools} - marked
