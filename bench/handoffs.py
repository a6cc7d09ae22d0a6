"""What handoffs cost a generation: finding who answers in a long log, and a handoff itself.

    python3 bench/handoffs.py                 # a 10,000-event session
    python3 bench/handoffs.py --events 50000  # a longer one

An in-memory session seeded with ``--events`` events (turns of four: a user message, an
answer calling a tool, its result, the final answer), then the median of ``--repeats``
runs of one ``ask`` answered by a ScriptedModel, for:

- ``no handoffs``: an agent without ``handoffs=`` (the baseline);
- ``handoffs, none made``: the same agent offering three handoffs, no handoff in the log
  (who answers is read from the whole log: the worst case);
- ``handed over at the start``: the log's first turn handed over, so every later
  generation reads back to it before its target answers;
- ``a handoff in the turn``: the ask itself hands over (the handoff call, its event and
  result, then the target's answer: two model calls).

Also ``last_handoff`` alone over the seeded log, the pure scan the first three pay twice
(once when ``ask`` checks its options, once in the loop).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import Agent, ScriptedModel, ToolCall  # noqa: E402
from agentkit.context._handoffs import last_handoff  # noqa: E402
from agentkit.events import AssistantMessageEvent, ControlEvent, Event, ToolResultEvent, UserMessageEvent  # noqa: E402
from agentkit.messages import TextPart, ToolCallPart, ToolOutput  # noqa: E402


def seeded(events: int, handed_over: bool) -> list[Event]:
    """A chat of ``events`` events; with ``handed_over``, its first turn hands over to billing."""
    out: list[Event] = []
    for i in range(events // 4):
        cid = f"c{i}"
        name = "transfer_to_billing" if handed_over and i == 0 else "lookup"
        out.append(UserMessageEvent(content=(TextPart(text=f"question {i}"),)))
        out.append(AssistantMessageEvent(content=(ToolCallPart(tool_call_id=cid, tool_name=name, input={}),)))
        if name == "transfer_to_billing":
            out.append(ControlEvent(action="handoff", data={
                "source": "triage", "target": "billing", "tool_name": name, "tool_call_id": cid,
                "path": [[name, cid]]}))
        out.append(ToolResultEvent(tool_call_id=cid, tool_name=name, output=ToolOutput.text("ok")))
        out.append(AssistantMessageEvent(content=(TextPart(text=f"answer {i}"),)))
    return out


def median_ms(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    def agents(handing_over: bool) -> Agent:
        others = [Agent(ScriptedModel(["billing answers"] * args.repeats * 2), name="billing"),
                  Agent(ScriptedModel([]), name="sales"), Agent(ScriptedModel([]), name="support")]
        turns = ([ToolCall(name="transfer_to_billing", input={})] if handing_over else ["triage answers"])
        return Agent(ScriptedModel(turns * args.repeats * 2), name="triage", handoffs=others)

    cases: dict[str, tuple[Agent, bool]] = {
        "no handoffs": (Agent(ScriptedModel(["triage answers"] * args.repeats * 2), name="triage"), False),
        "handoffs, none made": (agents(False), False),
        "handed over at the start": (agents(False), True),
        "a handoff in the turn": (agents(True), False),
    }
    print(f"one ask on an in-memory session of {args.events:,} events (median of {args.repeats})")
    for label, (agent, handed_over) in cases.items():
        with agent.session(events=seeded(args.events, handed_over)) as session:
            ms = median_ms(lambda: session.ask("one more"), args.repeats)
        print(f"  {label:<28} {ms:8.2f} ms")
    log = seeded(args.events, True)
    print(f"  {'last_handoff over the log':<28} {median_ms(lambda: last_handoff(log), args.repeats):8.2f} ms")


if __name__ == "__main__":
    main()
