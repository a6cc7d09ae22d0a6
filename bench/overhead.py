"""agentkit runtime overhead on the peer benchmarks' workloads (zero-latency model).

    python3 bench/overhead.py                      # one JSON line, like the peer scripts
    bash ../shared/bench-peers/run_all.sh "python3 bench/overhead.py"   # side by side

Workloads (defined in ../shared/bench-peers/common.py, the same for every framework):
  A  run_agent with a model that calls add() 10 times, then answers: us per model step.
     Also reported for agentkit alone: the same run with four no-op hooks
     (a_hooks_*), and consumed as an event stream with run_agent_stream (a_stream_*).
     a_guardrail_*: with one passing input guardrail (it runs beside the first model
     call, which then runs on a worker thread); a_guardrails_all_*: with a passing
     input, output, tool-input and tool-output guardrail.
     a_otel_off_*: with the OpenTelemetry API imported but no SDK configured (tracing
     skipped); a_otel_on_*: with the SDK's TracerProvider and an in-memory exporter (22
     spans a run), measured after B so that B is never traced.
     a_cache_hit_*: add() with a ToolCache in a directory that already holds its answers
     (no call runs: each is read from its entry file); a_cache_miss_*: a cache that holds
     none (each call runs, then its entry is written and fsynced); a_cache_miss_nofsync_*:
     the same with ToolCache(fsync=False).
  B  200 user turns in one durable Session (FileEventStore, fsync on), a tool call each
     turn, so each turn also commits the call's execution intent: ms per turn for turns
     1-20 vs 181-200, turn 1 vs turn 200, and what the intent append costs per step
     (b_intent_append_ms_*: the time of the store appends that carry only intents).
     b_txn_*: the same turns as transactional generations (begin, generate, accept).
The model is a FunctionModel: a pure function of the messages it is shown, so the
measured time is agentkit's own cost. Set AGENTKIT_BENCH_PEERS to the folder holding
common.py if ../shared/bench-peers is not beside the checkout.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

_here = Path(__file__).resolve()
_peers = os.environ.get("AGENTKIT_BENCH_PEERS") or str(_here.parents[2] / "shared" / "bench-peers")
if not (Path(_peers) / "common.py").exists():
    sys.exit(f"cannot find the peer benchmarks' common.py in {_peers}; set AGENTKIT_BENCH_PEERS")
sys.path.insert(0, _peers)
sys.path.insert(0, str(_here.parents[1]))

import common  # noqa: E402

import agentkit  # noqa: E402
from agentkit import FunctionModel, Hooks, Session, ToolCall, run_agent, tool  # noqa: E402
from agentkit.messages import ToolResultPart  # noqa: E402
from agentkit.models import ModelRequest  # noqa: E402

SEEN = [0]
add = tool(common.add)


def scripted(max_calls: int):
    """The peers' fake model: counts tool results since the last user message."""

    def reply(request: ModelRequest):
        SEEN[0] = len(request.messages)
        n, last = 0, None
        for msg in reversed(request.messages):
            if msg.role == "user":
                break
            if msg.role == "tool":
                for part in reversed(msg.content):
                    if isinstance(part, ToolResultPart):
                        n += 1
                        last = part.output.value if last is None else last
        kind, arg = common.next_action(n, last or 0, max_calls)
        return ToolCall("add", arg) if kind == "call" else arg

    return reply


INTENT_APPENDS_MS: list[float] = []


def store_factory(root: str):
    try:
        from agentkit import FileEventStore  # type: ignore[attr-defined]
    except ImportError:  # before the file store existed
        return agentkit.InMemoryEventStore(), "InMemoryEventStore"

    class TimedStore(FileEventStore):
        """The file store, timing the appends that carry only execution intents."""

        def append(self, session_id, events, *, expected_revision, **fencing):  # lease= since 0.2
            intents = all(getattr(e, "action", None) == "tool-execution-intent" for e in events)
            t0 = time.perf_counter()
            try:
                return super().append(session_id, events, expected_revision=expected_revision, **fencing)
            finally:
                if intents:
                    INTENT_APPENDS_MS.append((time.perf_counter() - t0) * 1e3)

    return TimedStore(root), "FileEventStore(fsync=True)"


def transactional_b(root: str) -> dict[str, object]:
    """B's turns as transactional generations: each turn begins, runs and accepts one."""
    if not hasattr(Session, "begin_generation"):
        return {}
    store, _ = store_factory(root)
    session = Session.open("bench-txn", store=store, model=FunctionModel(scripted(1)), tools=[add])
    turn_ms: list[float] = []
    for i in range(common.TURNS_B):
        t0 = time.perf_counter()
        txn = session.begin_generation(f"turn {i}: add things up")
        text = session.generate(transaction=txn).text
        session.finalize_generation(txn, "accepted")
        turn_ms.append((time.perf_counter() - t0) * 1e3)
        assert text == common.expected_final(1), text
    assert len(session.model_messages()) == 4 * common.TURNS_B
    session.close()
    early, late = statistics.median(turn_ms[:20]), statistics.median(turn_ms[-20:])
    return {
        "b_txn_turn_ms_median_first20": round(early, 3),
        "b_txn_turn_ms_median_last20": round(late, 3),
        "b_txn_late_over_early": round(late / early, 2),
    }


def traced_a(model_a, *, configure: bool) -> dict[str, object] | None:
    """Workload A with OpenTelemetry imported, without (``configure=False``) or with an
    SDK tracer provider exporting to memory; None when the SDK is not installed."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    exporter = InMemorySpanExporter()
    if configure:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

    def run_once() -> str:
        exporter.clear()  # keep memory flat: only the last run's spans are kept
        return run_agent(model_a, "add things up", tools=[add]).text

    result = common.bench_a(run_once)
    if configure:
        assert len(exporter.get_finished_spans()) == 2 * (common.TOOL_CALLS_A + 1), "spans were not recorded"
    name = "a_otel_on" if configure else "a_otel_off"
    return {f"{name}_us_per_step_median": result["a_us_per_step_median"],
            f"{name}_us_per_step_p90": result["a_us_per_step_p90"]}


def guarded_a(model_a) -> dict[str, object]:
    """Workload A with passing guardrails: one input guardrail, then one of each kind."""
    if not hasattr(agentkit, "input_guardrail"):
        return {}
    from agentkit import input_guardrail, output_guardrail, tool_guardrail

    passes = input_guardrail(lambda text, ctx: None)
    every = [passes, output_guardrail(lambda output, ctx: None), tool_guardrail(lambda input, ctx: None),
             tool_guardrail(on="output")(lambda output, ctx: None)]
    out: dict[str, object] = {}
    for name, guardrails in (("a_guardrail", [passes]), ("a_guardrails_all", every)):
        result = common.bench_a(lambda g=guardrails: run_agent(model_a, "add things up", tools=[add],
                                                               guardrails=g).text)
        out[f"{name}_us_per_step_median"] = result["a_us_per_step_median"]
        out[f"{name}_us_per_step_p90"] = result["a_us_per_step_p90"]
    return out
def cached_a(model_a) -> dict[str, object]:
    """Workload A with ``add`` cached in a directory: every call a hit (the entries were
    stored by a first run), and every call a miss (a fresh namespace per run)."""
    if not hasattr(agentkit, "ToolCache"):
        return {}
    root = common.scratch_dir("agentkit_cache_")

    def cached_add(namespace: str, fsync: bool = True):
        cache = agentkit.ToolCache(root, ttl=3600, namespace=namespace, fsync=fsync)
        return tool(cache=cache, read_only=True)(common.add)

    def timed(tools_per_run, *, runs_tool: bool) -> list[float]:
        per_step: list[float] = []
        for tools in tools_per_run:
            before = common.TOOL_CALLS[0]
            t0 = time.perf_counter_ns()
            out = run_agent(model_a, "add things up", tools=[tools]).text
            per_step.append((time.perf_counter_ns() - t0) / 1e3 / (common.TOOL_CALLS_A + 1))
            assert out == common.expected_final(common.TOOL_CALLS_A), out
            ran = common.TOOL_CALLS[0] - before
            assert ran == (common.TOOL_CALLS_A if runs_tool else 0), f"the tool ran {ran} times"
        return per_step

    runs = common.WARMUP_A + common.RUNS_A
    hit_tool = cached_add("hit")
    timed([hit_tool], runs_tool=True)  # stores the answers
    hits = timed([hit_tool] * runs, runs_tool=False)[common.WARMUP_A:]
    misses = timed([cached_add(f"miss-{i}") for i in range(runs)], runs_tool=True)[common.WARMUP_A:]
    unsynced = timed([cached_add(f"nofsync-{i}", False) for i in range(runs)], runs_tool=True)[common.WARMUP_A:]
    p90 = lambda xs: statistics.quantiles(xs, n=10, method="inclusive")[8]  # noqa: E731
    return {
        "a_cache_hit_us_per_step_median": round(statistics.median(hits), 1),
        "a_cache_hit_us_per_step_p90": round(p90(hits), 1),
        "a_cache_miss_us_per_step_median": round(statistics.median(misses), 1),
        "a_cache_miss_us_per_step_p90": round(p90(misses), 1),
        "a_cache_miss_nofsync_us_per_step_median": round(statistics.median(unsynced), 1),
        "a_cache_miss_nofsync_us_per_step_p90": round(p90(unsynced), 1),
    }


def main() -> None:
    model_a = FunctionModel(scripted(common.TOOL_CALLS_A))
    a = common.bench_a(lambda: run_agent(model_a, "add things up", tools=[add]).text)
    extra = {}
    if hasattr(agentkit, "Hooks"):
        noop = Hooks(
            before_model_request=lambda request: None,
            before_tool_call=lambda call, ctx: None,
            after_tool_call=lambda call, output, ctx: None,
            on_generation_end=lambda result, error: None,
        )
        hooked = common.bench_a(lambda: run_agent(model_a, "add things up", tools=[add], hooks=noop).text)

        def streamed() -> str:
            with agentkit.run_agent_stream(model_a, "add things up", tools=[add]) as stream:
                for _ in stream:
                    pass
                return stream.result.text

        consumed = common.bench_a(streamed)
        extra = {
            "a_hooks_us_per_step_median": hooked["a_us_per_step_median"],
            "a_hooks_us_per_step_p90": hooked["a_us_per_step_p90"],
            "a_stream_us_per_step_median": consumed["a_us_per_step_median"],
            "a_stream_us_per_step_p90": consumed["a_us_per_step_p90"],
        }

    extra.update(guarded_a(model_a))
    extra.update(cached_a(model_a))
    otel_off = traced_a(model_a, configure=False)
    if otel_off is not None:
        extra.update(otel_off)

    tmp = common.scratch_dir("agentkit_b_")
    store, store_name = store_factory(tmp)
    session = Session.open("bench", store=store, model=FunctionModel(scripted(1)), tools=[add])

    turn_ms: list[float] = []

    def turn(i: int) -> str:
        t0 = time.perf_counter()
        session.push_user_message(f"turn {i}: add things up")
        text = session.generate().text
        turn_ms.append((time.perf_counter() - t0) * 1e3)
        return text

    b = common.bench_b(turn, lambda: len(session.model_messages()), tmp)
    b["b_turn1_ms"] = round(turn_ms[0], 3)
    b["b_turn200_ms"] = round(turn_ms[-1], 3)
    if INTENT_APPENDS_MS:
        b["b_intent_appends"] = len(INTENT_APPENDS_MS)
        b["b_intent_append_ms_median"] = round(statistics.median(INTENT_APPENDS_MS), 3)
        b["b_intent_append_ms_first20"] = round(statistics.median(INTENT_APPENDS_MS[:20]), 3)
        b["b_intent_append_ms_last20"] = round(statistics.median(INTENT_APPENDS_MS[-20:]), 3)
        b["b_intent_share_of_turn"] = round(statistics.median(INTENT_APPENDS_MS) / statistics.median(turn_ms), 3)
    b["b_model_input_items_last_call"] = SEEN[0]
    # common.dir_bytes only lists the top folder; the file store keeps one folder per
    # session, so count every file below it.
    b["b_disk_bytes"] = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    session.close()
    b.update(transactional_b(common.scratch_dir("agentkit_btxn_")))
    otel_on = traced_a(model_a, configure=True)  # last: a tracer provider cannot be unset
    if otel_on is not None:
        extra.update(otel_on)
    common.report(
        "agentkit",
        agentkit.__version__,
        **a,
        **extra,
        **b,
        fake_model="agentkit.FunctionModel",
        persistence=store_name,
    )


if __name__ == "__main__":
    main()
