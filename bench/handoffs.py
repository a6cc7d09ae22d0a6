"""What handoffs cost a generation: finding who answers in a long log, and a handoff itself.

    python3 bench/handoffs.py                 # a 10,000-event session
    python3 bench/handoffs.py --events 50000  # a longer one

An in-memory session seeded with ``--events`` events (turns of four: a user message, an
answer calling a tool, its result, the final answer), asked by a ScriptedModel, for:

- ``no handoffs``: an agent without ``handoffs=`` (the baseline);
- ``handoffs, none made``: the same agent offering three handoffs, no handoff in the log
  (who answers is read from the whole log: the worst case);
- ``handed over at the start``: the log's first turn handed over, so every later
  generation reads back to it before its target answers;
- ``a handoff in the turn``: the first ask itself hands over (the handoff call, its event
  and result, then the target's answer: two model calls).

Each case opens a fresh session per repeat and times its first ``ask`` (which folds the
log's handoff events once) and its second (which folds only the new events; in the last
case the target answers it). Also ``last_handoff`` alone over the seeded log: the whole
scan the fold saves later generations.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    def triage(handoffs: bool, handing_over: bool) -> Agent:
        others = [Agent(ScriptedModel(["billing answers"] * 2), name="billing"),
                  Agent(ScriptedModel([]), name="sales"), Agent(ScriptedModel([]), name="support")]
        turns = [ToolCall(name="transfer_to_billing", input={})] if handing_over else ["triage answers"]
        return Agent(ScriptedModel(turns * 2), name="triage", handoffs=others if handoffs else ())

    cases: dict[str, tuple[Callable[[], Agent], bool]] = {
        "no handoffs": (lambda: triage(False, False), False),
        "handoffs, none made": (lambda: triage(True, False), False),
        "handed over at the start": (lambda: triage(True, False), True),
        "a handoff in the turn": (lambda: triage(True, True), False),
    }
    print(f"ask on an in-memory session of {args.events:,} events, median of {args.repeats} sessions (ms)")
    print(f"  {'':<28} {'first ask':>10} {'second ask':>11}")
    for label, (make, handed_over) in cases.items():
        first, second = [], []
        for _ in range(args.repeats):
            with make().session(events=seeded(args.events, handed_over)) as session:
                for times in (first, second):
                    start = time.perf_counter()
                    session.ask("one more")
                    times.append(time.perf_counter() - start)
        print(f"  {label:<28} {statistics.median(first) * 1000:10.2f} {statistics.median(second) * 1000:11.2f}")
    log = seeded(args.events, True)
    scans = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        last_handoff(log)
        scans.append(time.perf_counter() - start)
    print(f"  {'last_handoff over the log':<28} {statistics.median(scans) * 1000:10.2f}")


if __name__ == "__main__":
    main()
