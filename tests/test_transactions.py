"""Transactional generations: the state machine (every legal and illegal step), hidden
candidates, the claim token, restart and close."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from _procs import killed_after_first_line
from _stores import RecordingStore
from _tools import add

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    ToolCall,
    TransactionError,
    tool,
)
from agentkit.events import ControlEvent, ToolResultEvent
from agentkit.messages import ToolOutput
from agentkit.transactions import GenerationTransaction, TransactionLedger, claim_digest

CHILD = Path(__file__).resolve().parent / "_txn_child.py"


def sent_text(request) -> str:
    """Everything a model request showed the model, as one string."""
    return json.dumps([m.to_dict() for m in request.messages])


def echo_model() -> FunctionModel:
    """Answers 'answer to <last user text>'."""

    def reply(request):
        last = [m for m in request.messages if m.role == "user"][-1]
        return f"answer to {last.content[0].text}"

    return FunctionModel(reply)


def states(session: Session) -> list[str]:
    return list(session.transactions().values())


# -- the happy paths ---------------------------------------------------------------------


def test_begin_commits_the_record_and_the_prompt_in_one_append_and_hides_them():
    store = RecordingStore()
    with Session.open("s", store=store, model=echo_model()) as s:
        s.push_user_message("hello")
        txn = s.begin_generation("draft a plan")
        assert isinstance(txn, GenerationTransaction)
        begun, prompt = store.batches[-1]  # one append
        assert s.events[-2:] == (begun, prompt)
        assert isinstance(begun, ControlEvent) and begun.action == "generation-begun"
        assert begun.generation_id == prompt.generation_id == txn.generation_id
        assert begun.data == {"claim_digest": claim_digest(txn.claim_token)}
        assert s.transactions() == {txn.generation_id: "begun"}
        assert "draft a plan" not in json.dumps([m.to_dict() for m in s.model_messages()])
        assert txn.claim_token not in repr(txn)


def test_a_candidate_is_hidden_from_the_next_request_until_accepted():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("secret plan")
        result = s.generate(transaction=txn)
        assert result.text == "answer to secret plan"  # the generation saw its own prompt
        assert "secret plan" in sent_text(model.requests[-1])
        assert states(s) == ["execution-completed"]
        # a later, ordinary generation does not see the candidate
        s.push_user_message("what now?")
        assert s.generate().text == "answer to what now?"
        assert "secret plan" not in sent_text(model.requests[-1])
        s.finalize_generation(txn, "accepted")
        assert states(s) == ["accepted"]
        s.push_user_message("and now?")
        s.generate()
        shown = sent_text(model.requests[-1])
        assert "secret plan" in shown and "answer to secret plan" in shown


def test_a_rejected_candidate_is_never_shown():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("bad idea")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "rejected")
        s.push_user_message("next")
        s.generate()
        assert "bad idea" not in sent_text(model.requests[-1])
        assert states(s) == ["rejected"]


def test_events_pushed_by_others_while_a_transaction_runs_stay_visible():
    model = ScriptedModel([])
    s = Session(model)

    def reply(request):
        if len(model.requests) == 1:
            s.push_user_message("from another thread")
        return "done"

    s._model = FunctionModel(reply)
    model = s._model
    with s:
        txn = s.begin_generation("candidate prompt")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "rejected")
        shown = json.dumps([m.to_dict() for m in s.model_messages()])
        assert "from another thread" in shown and "candidate prompt" not in shown


def test_a_transactional_generation_runs_tools_and_its_results_hide_with_it():
    model = ScriptedModel([ToolCall(name="add", input={"a": 2, "b": 3}), "five"])
    store = InMemoryEventStore()
    with Session.open("t", store=store, model=model, tools=[add]) as s:
        txn = s.begin_generation("add 2 and 3")
        s.generate(transaction=txn)
        tagged = [e for e in s.events if e.generation_id == txn.generation_id]
        kinds = [e.action if isinstance(e, ControlEvent) else e.type for e in tagged]
        assert kinds == [
            "generation-begun", "user-message", "generation-execution-started", "assistant-message",
            "tool-execution-intent", "tool-result", "assistant-message", "generation-execution-completed",
        ]
        assert s.model_messages() == []
        s.finalize_generation(txn, "accepted")
        assert [m.role for m in s.model_messages()] == ["user", "assistant", "tool", "assistant"]


# -- illegal steps -----------------------------------------------------------------------


def test_a_second_claim_gets_transaction_error_and_no_model_call():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("once")
        s.generate(transaction=txn)
        calls = len(model.requests)
        with pytest.raises(TransactionError, match="already claimed"):
            s.generate(transaction=txn)
        assert len(model.requests) == calls
        assert states(s) == ["execution-completed"]  # the refused claim changed nothing


def test_two_threads_claiming_the_same_transaction_run_it_once():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("race")
        outcomes: list[str] = []

        def go() -> None:
            try:
                s.generate(transaction=txn)
                outcomes.append("ran")
            except TransactionError:
                outcomes.append("refused")

        threads = [threading.Thread(target=go) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes) == ["ran", "refused", "refused", "refused"]
        assert len(model.requests) == 1


def test_a_wrong_token_or_an_unknown_generation_is_refused_without_a_model_call():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("guarded")
        forged = GenerationTransaction(generation_id=txn.generation_id, claim_token="guess")
        with pytest.raises(TransactionError, match="claim token .* is wrong"):
            s.generate(transaction=forged)
        with pytest.raises(TransactionError, match="claim token .* is wrong"):
            s.finalize_generation(forged, "interrupted")
        other = GenerationTransaction(generation_id="nope", claim_token=txn.claim_token)
        with pytest.raises(TransactionError, match="no transactional generation 'nope'"):
            s.generate(transaction=other)
        with pytest.raises(ConfigurationError, match="GenerationTransaction"):
            s.generate(transaction="token")  # type: ignore[arg-type]
        assert model.requests == [] and states(s) == ["begun"]
        # a handle from another session is unknown here
        with Session(model) as other_session:
            with pytest.raises(TransactionError, match="no transactional generation"):
                other_session.finalize_generation(txn, "accepted")


def test_finalize_steps_that_the_state_does_not_allow():
    with Session(echo_model()) as s:
        txn = s.begin_generation("x")
        for outcome in ("accepted", "rejected"):  # not run yet
            with pytest.raises(TransactionError, match="only a completed generation"):
                s.finalize_generation(txn, outcome)
        with pytest.raises(ConfigurationError, match="outcome must be one of"):
            s.finalize_generation(txn, "approved")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "accepted")
        count = len(s.events)
        s.finalize_generation(txn, "accepted")  # the same outcome again: nothing happens
        assert len(s.events) == count
        for outcome in ("rejected", "interrupted"):
            with pytest.raises(TransactionError, match="is accepted, a final state"):
                s.finalize_generation(txn, outcome)
        with pytest.raises(TransactionError):
            s.generate(transaction=txn)  # terminal: no more execution


def test_rejected_is_idempotent_and_final():
    with Session(echo_model()) as s:
        txn = s.begin_generation("x")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "rejected")
        s.finalize_generation(txn, "rejected")
        with pytest.raises(TransactionError, match="is rejected"):
            s.finalize_generation(txn, "accepted")
        assert sum(isinstance(e, ControlEvent) and e.action == "generation-rejected" for e in s.events) == 1


# -- interrupted: from every non-terminal state ---------------------------------------------


def test_interrupted_from_begun_by_the_host_and_then_final():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("abandon me")
        s.finalize_generation(txn, "interrupted")
        s.finalize_generation(txn, "interrupted")  # idempotent
        assert states(s) == ["interrupted"]
        with pytest.raises(TransactionError, match="already claimed|interrupted"):
            s.generate(transaction=txn)
        with pytest.raises(TransactionError, match="is interrupted"):
            s.finalize_generation(txn, "accepted")
        assert model.requests == []


def test_interrupted_from_begun_by_a_cancelled_generate_without_a_model_call():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("never")
        token = CancelToken()
        token.cancel("host gave up")
        with pytest.raises(CancelledError):
            s.generate(transaction=txn, cancel=token)
        assert states(s) == ["interrupted"] and model.requests == []


def test_interrupted_from_execution_started_when_the_model_fails():
    def broken(request):
        raise RuntimeError("provider exploded")

    with Session(FunctionModel(broken)) as s:
        txn = s.begin_generation("x")
        with pytest.raises(RuntimeError, match="provider exploded"):
            s.generate(transaction=txn)
        assert states(s) == ["interrupted"]
        last = s.events[-1]
        assert last.action == "generation-interrupted" and "provider exploded" in last.data["reason"]
        assert s.model_messages() == []  # the interrupted candidate stays hidden


def test_interrupted_from_execution_started_when_aborted():
    holder: list[Session] = []

    @tool
    def stall() -> str:
        """Abort the generation from inside."""
        holder[0].abort_current_generation("operator abort")
        return "late"

    model = ScriptedModel([ToolCall(name="stall", input={}), "unreachable"])
    with Session(model, tools=[stall]) as s:
        holder.append(s)
        txn = s.begin_generation("x")
        with pytest.raises(CancelledError):
            s.generate(transaction=txn)
        assert states(s) == ["interrupted"]
        with pytest.raises(TransactionError, match="is interrupted"):
            s.finalize_generation(txn, "accepted")


def test_interrupted_from_execution_completed_by_the_host_and_by_close():
    s = Session(echo_model())
    done = s.begin_generation("a")
    s.generate(transaction=done)
    s.finalize_generation(done, "interrupted")
    pending = s.begin_generation("b")
    s.generate(transaction=pending)
    s.begin_generation("c")
    s.close()
    assert states(s) == ["interrupted", "interrupted", "interrupted"]


def test_close_interrupts_durably(tmp_path):
    with Session.open("c", store=FileEventStore(tmp_path), model=echo_model()) as s:
        txn = s.begin_generation("x")
        s.generate(transaction=txn)
    with Session.open("c", store=FileEventStore(tmp_path), model=echo_model()) as again:
        assert again.transactions() == {txn.generation_id: "interrupted"}
        assert again.events[-1].data["reason"] == "the session was closed"


# -- durability --------------------------------------------------------------------------


def test_the_claim_token_never_reaches_the_store_files(tmp_path):
    model = ScriptedModel([ToolCall(name="add", input={"a": 1, "b": 2}), "3"])
    tokens = []
    with Session.open("tok", store=FileEventStore(tmp_path), model=model, tools=[add]) as s:
        txn = s.begin_generation("add")
        tokens.append(txn)
        s.generate(transaction=txn)
        s.finalize_generation(txn, "accepted")
        other = s.begin_generation("left open")
        tokens.append(other)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    data = b"".join(p.read_bytes() for p in files)
    assert files and data
    for txn in tokens:
        assert txn.claim_token.encode() not in data
        assert claim_digest(txn.claim_token).encode() in data  # the digest is what is kept


def test_a_restart_interrupts_an_open_transaction_and_its_token_is_dead(tmp_path):
    word, gid, token = killed_after_first_line([sys.executable, str(CHILD), "begin", str(tmp_path), "r"])
    assert word == "begun"
    assert FileEventStore(tmp_path).load("r").events[-1].generation_id == gid  # left open
    model = echo_model()
    with Session.open("r", store=FileEventStore(tmp_path), model=model) as s:
        assert s.transactions() == {gid: "interrupted"}
        assert "reopened" in s.events[-1].data["reason"]
        txn = GenerationTransaction(generation_id=gid, claim_token=token)
        with pytest.raises(TransactionError, match="interrupted"):
            s.generate(transaction=txn)
        with pytest.raises(TransactionError, match="interrupted"):
            s.finalize_generation(txn, "accepted")
        assert model.requests == []
        assert s.model_messages() == []  # its prompt stays hidden
    # the interruption itself is durable: a third open finds nothing to do
    with Session.open("r", store=FileEventStore(tmp_path), model=model) as s:
        assert sum(isinstance(e, ControlEvent) and e.action == "generation-interrupted" for e in s.events) == 1


def test_an_accepted_candidate_is_visible_after_a_restart(tmp_path):
    with Session.open("v", store=FileEventStore(tmp_path), model=echo_model()) as s:
        txn = s.begin_generation("keep me")
        s.generate(transaction=txn)
        s.finalize_generation(txn, "accepted")
        rejected = s.begin_generation("drop me")
        s.generate(transaction=rejected)
        s.finalize_generation(rejected, "rejected")
    with Session.open("v", store=FileEventStore(tmp_path), model=echo_model()) as again:
        shown = json.dumps([m.to_dict() for m in again.model_messages()])
        assert "keep me" in shown and "drop me" not in shown
        assert list(again.transactions().values()) == ["accepted", "rejected"]


# -- the fold --------------------------------------------------------------------------------


def _control(action: str, gid: str | None = None, **data) -> ControlEvent:
    return ControlEvent(action=action, data=data, generation_id=gid)


def test_an_unresolved_intent_blocks_accepting_but_not_interrupting():
    token = "t0k"
    txn = GenerationTransaction(generation_id="g", claim_token=token)
    intent = _control("tool-execution-intent", "g", tool_call_id="c1", tool_name="charge", input={"n": 1})
    events = [
        _control("generation-begun", "g", claim_digest=claim_digest(token)),
        _control("generation-execution-started", "g"),
        intent,
        _control("generation-execution-completed", "g"),
    ]
    ledger = TransactionLedger(events)
    assert [u.intent_id for u in ledger.uncertain()] == [intent.id]
    with pytest.raises(TransactionError, match=f"intent\\(s\\) {intent.id} have no known outcome"):
        ledger.authorize(txn, "accepted")
    assert ledger.authorize(txn, "interrupted") is False  # always allowed
    assert ledger.authorize(txn, "rejected") is False
    ledger.apply([_control("tool-execution-reconciled", "g", intent_id=intent.id, resolution="not-executed")])
    assert ledger.uncertain() == [] and ledger.authorize(txn, "accepted") is False


def test_the_fold_ignores_steps_a_log_should_not_hold():
    ledger = TransactionLedger([
        _control("generation-begun", "g", claim_digest="d"),
        _control("generation-accepted", "g"),  # skips execution: not a legal step
        _control("generation-execution-started", "unknown"),
        ToolResultEvent(tool_call_id="c", tool_name="t", output=ToolOutput.text("x"),
                        intent_id="no-such-intent"),
    ])
    assert ledger.states() == {"g": "begun"}
    assert ledger.hidden("g") and not ledger.hidden("unknown")


def test_stream_and_scheduled_generations_take_a_transaction():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("streamed")
        with s.stream(transaction=txn) as stream:
            kinds = [e.type for e in stream]
        assert stream.result.text == "answer to streamed" and "generation-end" in kinds
        assert states(s) == ["execution-completed"]
        later = s.begin_generation("scheduled")
        future = s.schedule_generate("k", debounce=0.01, transaction=later)
        assert future.result(30).text == "answer to scheduled"
        assert states(s) == ["execution-completed", "execution-completed"]


def test_the_projection_is_rebuilt_only_when_a_transaction_changes_state():
    with Session(echo_model()) as s:
        s.push_user_message("hi")
        s.generate()
        projector = s._projector
        s.push_user_message("again")
        s.generate()
        assert s._projector is projector  # ordinary generations extend it incrementally
        txn = s.begin_generation("t")
        # nothing the projection showed changed visibility: it goes on as it is
        assert s._projector is projector
        s.generate(transaction=txn)
        s.finalize_generation(txn, "accepted")
        settled = s._projector
        s.push_user_message("after")
        s.generate()
        assert s._projector is settled


def test_transaction_records_cannot_be_forged_with_push_event():
    model = echo_model()
    with Session(model) as s:
        txn = s.begin_generation("x")
        s.generate(transaction=txn)
        with pytest.raises(ConfigurationError, match="cannot be pushed"):
            s.push_event(ControlEvent(action="generation-accepted", generation_id=txn.generation_id))
        with pytest.raises(ConfigurationError, match="'generation-accepted' cannot be pushed"):
            s.push_event(ControlEvent(action="generation-accepted"))
        with pytest.raises(ConfigurationError, match="cannot be pushed"):
            s.push_event(ControlEvent(action="tool-execution-reconciled", data={"intent_id": "i"}))
        from agentkit.events import UserMessageEvent
        from agentkit.messages import TextPart

        with pytest.raises(ConfigurationError, match="generation_id="):
            s.push_event(UserMessageEvent(content=(TextPart(text="sneak"),), generation_id=txn.generation_id))
        from agentkit.messages import ToolOutput

        forged = ToolResultEvent(tool_call_id="c", tool_name="t", output=ToolOutput.text("ok"), intent_id="i")
        with pytest.raises(ConfigurationError, match="use reconcile_tool_execution"):
            s.push_event(forged)
        assert states(s) == ["execution-completed"]
        s.push_event(ControlEvent(action="my-marker"))  # other control events are fine


def test_a_generation_interrupted_by_its_own_tool_makes_no_further_model_call():
    holder: list = []

    @tool
    def give_up() -> str:
        """Abandon the transaction from inside."""
        s, txn = holder
        s.finalize_generation(txn, "interrupted")
        return "gave up"

    model = ScriptedModel([ToolCall(name="give_up", input={}), "must not be asked"])
    with Session(model, tools=[give_up]) as s:
        txn = s.begin_generation("x")
        holder.extend([s, txn])
        with pytest.raises(TransactionError, match="was interrupted while it ran"):
            s.generate(transaction=txn)
        assert len(model.requests) == 1 and states(s) == ["interrupted"]


def test_refresh_brings_another_writers_transactions_with_their_visibility(tmp_path):
    a = Session.open("w", store=FileEventStore(tmp_path), model=echo_model())
    b = Session.open("w", store=FileEventStore(tmp_path), model=echo_model())
    try:
        txn = a.begin_generation("from a")
        a.generate(transaction=txn)
        b.refresh()
        assert b.transactions() == {txn.generation_id: "execution-completed"}
        assert b.model_messages() == []  # a's candidate is hidden in b too
        a.finalize_generation(txn, "accepted")
        b.refresh()
        assert "from a" in json.dumps([m.to_dict() for m in b.model_messages()])
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_incremental_projection_equals_a_fresh_one_through_any_transaction_history(seed, tmp_path):
    # the projection reuses a copy taken before open transactions instead of projecting
    # the whole log again: after every step it must equal a projection from scratch
    import random

    from agentkit import FileEventStore

    rng = random.Random(seed)
    store = FileEventStore(str(tmp_path))
    s = Session.open("p", store=store, model=echo_model())
    open_txns: list = []
    executed: list = []

    def check() -> None:
        log = s._log
        log.project(for_model=False)
        assert log.projector.model_view(job_status=False) == log.projection_of(s.events)

    for step in range(40):
        op = rng.choice(["plain", "begin", "run", "accept", "reject", "interrupt", "push", "reopen"])
        if op == "plain" and not open_txns:
            s.push_user_message(f"plain {step}")
            s.generate()
        elif op == "begin":
            open_txns.append(s.begin_generation(f"txn {step}"))
        elif op == "run" and open_txns:
            txn = open_txns.pop(0)
            s.generate(transaction=txn)
            executed.append(txn)
        elif op in ("accept", "reject") and executed:
            outcome = "accepted" if op == "accept" else "rejected"
            s.finalize_generation(executed.pop(rng.randrange(len(executed))), outcome)
        elif op == "interrupt" and (open_txns or executed):
            pool = open_txns if open_txns else executed
            s.finalize_generation(pool.pop(rng.randrange(len(pool))), "interrupted")
        elif op == "push":
            s.push_user_message(f"note {step}")
        elif op == "reopen":
            s.close()
            s = Session.open("p", store=store, model=echo_model())  # open transactions are interrupted
            open_txns.clear()
            executed.clear()
        check()
    s.close()
