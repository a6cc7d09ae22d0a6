"""Execution intents: one append per model step before any tool runs, the idempotency key,
uncertain executions after a SIGKILL, and reconciliation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _procs import killed_after_first_line
from _stores import RecordingStore

from agentkit import (
    ConfigurationError,
    FileEventStore,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    TransactionError,
    tool,
)
from agentkit.events import ControlEvent, RuntimeEvent, ToolResultEvent
from agentkit.messages import TextPart
from agentkit.transactions import UncertainExecution

CHILD = Path(__file__).resolve().parent / "_txn_child.py"


def intents(events) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == "tool-execution-intent"]


def test_all_intents_of_a_step_go_in_one_append_before_any_tool_runs():
    store = RecordingStore()
    seen_batches: list[int] = []

    @tool
    def note(n: int) -> int:
        """Record how many appends happened when this call ran."""
        seen_batches.append(len(store.batches))
        return n

    calls = [ToolCall(name="note", input={"n": i}) for i in range(3)]
    model = ScriptedModel([calls, "done"])
    with Session.open("p", store=store, model=model, tools=[note], tool_execution="parallel") as s:
        s.push_user_message("go")
        s.generate()
        batch = [b for b in store.batches if intents(b)]
        assert len(batch) == 1 and len(batch[0]) == 3 and intents(batch[0]) == batch[0]
        index = store.batches.index(batch[0])
        # every tool ran after that append (on the shared tool threads a call may start
        # after an earlier call's result was committed)
        assert len(seen_batches) == 3 and all(n >= index + 1 for n in seen_batches)
        ids = {e.data["tool_call_id"]: e.id for e in batch[0]}
        results = [e for e in s.events if isinstance(e, ToolResultEvent)]
        assert {r.tool_call_id: r.intent_id for r in results} == ids
        assert [e.data["input"] for e in batch[0]] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert s.uncertain_tool_executions() == []


def test_the_idempotency_key_is_the_intent_id_and_reaches_the_tool():
    keys: list[str | None] = []

    @tool
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay."""
        keys.append(ctx.idempotency_key)
        return "paid"

    model = ScriptedModel([ToolCall(name="pay", input={"amount": 5}), "ok"])
    with Session.open("k", store=InMemoryEventStore(), model=model, tools=[pay]) as s:
        s.push_user_message("pay 5")
        s.generate()
        (intent,) = intents(s.events)
        assert keys == [intent.id]
        assert intent.data == {"tool_call_id": intent.data["tool_call_id"], "tool_name": "pay", "input": {"amount": 5}}


def test_without_a_store_intents_stay_in_memory():
    keys: list[str | None] = []

    @tool
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay."""
        keys.append(ctx.idempotency_key)
        return "paid"

    model = ScriptedModel([ToolCall(name="pay", input={"amount": 5}), ToolCall(name="pay", input={"amount": 6}), "ok"])
    with Session(model, tools=[pay]) as s:
        s.push_user_message("pay")
        s.generate()
        assert intents(s.events) == []  # nothing written
        assert len(keys) == 2 and all(keys) and keys[0] != keys[1]  # still one key per call
        assert all(e.intent_id is None for e in s.events if isinstance(e, ToolResultEvent))
        assert s.uncertain_tool_executions() == []


def _crash_mid_tool(tmp_path: Path, sid: str, mode: str = "charge") -> str:
    """Run the child until its tool runs, SIGKILL it; returns the key the tool got."""
    marker = tmp_path / f"{sid}.runs"
    word, key = killed_after_first_line([sys.executable, str(CHILD), mode, str(tmp_path / "store"), sid, str(marker)])
    assert word == "tool-running"
    assert marker.read_text().split() == [key]
    return key


def _charge_tool(runs: list[int]):
    @tool
    def charge(amount: int) -> str:
        """Charge the customer."""
        runs.append(amount)
        return "charged again"

    return charge


def test_a_sigkilled_tool_is_uncertain_never_rerun_and_reconciled_into_view(tmp_path):
    key = _crash_mid_tool(tmp_path, "crash")
    runs: list[int] = []
    model = ScriptedModel(["I could not confirm the charge.", "The charge went through."])
    with Session.open("crash", store=FileEventStore(tmp_path / "store"), model=model,
                      tools=[_charge_tool(runs)]) as s:
        uncertain = s.uncertain_tool_executions()
        call = s.events[1].tool_calls[0]
        assert uncertain == [UncertainExecution(intent_id=key, tool_call_id=call.tool_call_id,
                                                tool_name="charge", input={"amount": 42}, generation_id=None,
                                                    idempotency_key=key)]
        # the next generation does not run the tool again and tells the model the truth
        s.push_user_message("did it work?")
        assert s.generate().text == "I could not confirm the charge."
        assert runs == []
        result = model.requests[0].messages[2].content[0]
        assert result.tool_call_id == call.tool_call_id and result.output.is_error
        assert "may or may not have taken effect" in result.output.value
        assert [u.intent_id for u in s.uncertain_tool_executions()] == [key]  # still unknown
        # the host finds out (say, from the payment provider, by the idempotency key)
        s.reconcile_tool_execution(key, "executed", output={"charge_id": "ch_42"})
        assert s.uncertain_tool_executions() == []
        s.reconcile_tool_execution(key, "executed", output={"charge_id": "ch_42"})  # same again: no-op
        assert sum(isinstance(e, RuntimeEvent) for e in s.events) == 1
        with pytest.raises(TransactionError, match="already reconciled as 'executed'"):
            s.reconcile_tool_execution(key, "executed", output={"charge_id": "other"})
        with pytest.raises(TransactionError, match="already reconciled"):
            s.reconcile_tool_execution(key, "not-executed")
        s.push_user_message("and now?")
        s.generate()
        shown = json.dumps([m.to_dict() for m in model.requests[-1].messages])
        assert "ch_42" in shown and "tool-execution-reconciled" in shown
        assert runs == []
    with Session.open("crash", store=FileEventStore(tmp_path / "store")) as again:
        assert again.uncertain_tool_executions() == []  # the reconciliation is durable


def test_reconciling_before_the_next_generation_answers_the_open_call(tmp_path):
    key = _crash_mid_tool(tmp_path, "early")
    runs: list[int] = []
    model = ScriptedModel(["noted"])
    with Session.open("early", store=FileEventStore(tmp_path / "store"), model=model,
                      tools=[_charge_tool(runs)]) as s:
        s.reconcile_tool_execution(key, "not-executed", error="the provider has no such charge")
        last = s.events[-1]
        assert isinstance(last, ToolResultEvent) and last.intent_id == key
        s.push_user_message("well?")
        s.generate()
        result = model.requests[0].messages[2].content[0]
        assert result.output.is_error
        assert result.output.value == (
            "the host reconciled this tool call: it did not run: the provider has no such charge"
        )
        assert runs == []


def test_reconcile_refuses_bad_input_and_unknown_or_answered_intents(tmp_path):
    model = ScriptedModel([ToolCall(name="pay", input={}), "ok"])

    @tool
    def pay() -> str:
        """Pay."""
        return "paid"

    with Session.open("r", store=InMemoryEventStore(), model=model, tools=[pay]) as s:
        s.push_user_message("pay")
        s.generate()
        (intent,) = intents(s.events)
        with pytest.raises(TransactionError, match="has a result already"):
            s.reconcile_tool_execution(intent.id, "not-executed")
        with pytest.raises(TransactionError, match="no tool execution intent 'nope'"):
            s.reconcile_tool_execution("nope", "not-executed")
        with pytest.raises(ConfigurationError, match="resolution must be one of"):
            s.reconcile_tool_execution(intent.id, "done")
        with pytest.raises(ConfigurationError, match="needs output="):
            s.reconcile_tool_execution(intent.id, "executed")
        with pytest.raises(ConfigurationError, match="takes no output="):
            s.reconcile_tool_execution(intent.id, "abandoned-unknown", output="x")


def test_reconciliation_accepts_anything_a_tool_may_return(tmp_path):
    key = _crash_mid_tool(tmp_path, "parts")
    model = ScriptedModel(["seen"])
    with Session.open("parts", store=FileEventStore(tmp_path / "store"), model=model) as s:
        s.reconcile_tool_execution(key, "executed", output=[TextPart(text="receipt #7")])
        s.reconcile_tool_execution(key, "executed", output=[TextPart(text="receipt #7")])  # equal: no-op
        s.push_user_message("?")
        s.generate()
        part = model.requests[0].messages[2].content[0]
        assert part.output.kind == "content" and part.output.value[0].text == "receipt #7"


def test_abandoned_unknown_tells_the_model_it_stays_unknown(tmp_path):
    key = _crash_mid_tool(tmp_path, "ab")
    model = ScriptedModel(["ok"])
    with Session.open("ab", store=FileEventStore(tmp_path / "store"), model=model) as s:
        s.reconcile_tool_execution(key, "abandoned-unknown")
        s.push_user_message("?")
        s.generate()
        out = model.requests[0].messages[2].content[0].output
        assert out.is_error and "unknown and will stay unknown" in out.value


def test_a_reconciliation_compares_equal_after_a_restart(tmp_path):
    key = _crash_mid_tool(tmp_path, "again")
    with Session.open("again", store=FileEventStore(tmp_path / "store")) as s:
        s.reconcile_tool_execution(key, "executed", output={"ids": (1, 2)})  # a tuple: JSON has lists
        with pytest.raises(ConfigurationError, match="not plain JSON"):
            s.reconcile_tool_execution(key, "executed", output={"x": float("nan")})
    with Session.open("again", store=FileEventStore(tmp_path / "store")) as s:
        s.reconcile_tool_execution(key, "executed", output={"ids": [1, 2]})  # the same: no-op
        with pytest.raises(TransactionError, match="already reconciled"):
            s.reconcile_tool_execution(key, "executed", output={"ids": [1, 3]})
        assert sum(isinstance(e, ControlEvent) and e.action == "tool-execution-reconciled" for e in s.events) == 1


def test_a_call_running_now_is_not_uncertain_and_cannot_be_reconciled():
    seen: list = []
    holder: list[Session] = []

    @tool
    def look(ctx: ToolContext) -> str:
        """Look at the session from inside the call."""
        s = holder[0]
        seen.append(s.uncertain_tool_executions())
        try:
            s.reconcile_tool_execution(ctx.idempotency_key, "not-executed")
        except TransactionError as exc:
            seen.append(str(exc))
        return "looked"

    model = ScriptedModel([ToolCall(name="look", input={}), "ok"])
    with Session.open("live", store=InMemoryEventStore(), model=model, tools=[look]) as s:
        holder.append(s)
        s.push_user_message("go")
        s.generate()
        assert seen[0] == []
        assert "running in this session now" in seen[1]
        result = [e for e in s.events if isinstance(e, ToolResultEvent)]
        assert len(result) == 1 and result[0].output.value == "looked"


def test_a_sigkilled_transactional_tool_interrupts_the_transaction_and_stays_uncertain(tmp_path):
    key = _crash_mid_tool(tmp_path, "t", mode="txn-charge")
    model = ScriptedModel(["nothing to see"])
    with Session.open("t", store=FileEventStore(tmp_path / "store"), model=model) as s:
        (gid,) = s.transactions()
        assert s.transactions() == {gid: "interrupted"}
        (unknown,) = s.uncertain_tool_executions()
        assert unknown.intent_id == key and unknown.generation_id == gid
        s.reconcile_tool_execution(key, "executed", output="charged")
        assert s.uncertain_tool_executions() == []
        s.push_user_message("hello")
        s.generate()
        # the interrupted candidate, its call and the reconciled result stay hidden
        assert [m.role for m in model.requests[0].messages] == ["user"]
