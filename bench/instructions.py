"""Workload A in instructions per model step, counted by valgrind (callgrind).

    python3 bench/instructions.py                         # this checkout
    python3 bench/instructions.py --against ../agentkit-0.1.0   # and another checkout

Time per step (bench/overhead.py) moves with whatever else the machine runs; the number
of instructions the interpreter executes for the same work does not, so this is the
figure to compare two versions with on a busy machine. Each variant runs K=10 and K=40
times under callgrind; instructions per step = (I(40) - I(10)) / (30 runs * 11 steps),
which removes start-up and import costs. Variants: ``plain`` (run_agent), ``hooks``
(four no-op hooks), ``stream`` (run_agent_stream, consumed), ``guardrail`` (one passing
input guardrail: the first model call on a worker thread beside it), and, when asked for
(``--variants plain,cache-hit,cache-miss``), ``add`` with a ``ToolCache`` in a temporary
directory (``fsync=False``: the kernel's work is not counted anyway): ``cache-hit``
(every call answered from its entry file) and ``cache-miss`` (a fresh key each run, so
every call runs and writes its entry). Needs valgrind; takes a
minute or two per variant. What it cannot see: thread switches and cache effects, which
a stream (the generation on a worker thread) pays for in time.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

STEPS = 11  # 10 tool calls and the answer


def _workload(variant: str, runs: int) -> None:
    import agentkit
    from agentkit import FunctionModel, run_agent, tool

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    add_tool = tool(add)

    def reply(request):  # type: ignore[no-untyped-def]
        n = 0
        for msg in reversed(request.messages):
            if msg.role == "user":
                break
            n += msg.role == "tool"
        return agentkit.ToolCall("add", {"a": n, "b": 1}) if n < STEPS - 1 else "done"

    model = FunctionModel(reply)
    if variant == "plain":
        def once() -> str:
            return run_agent(model, "add", tools=[add_tool]).text
    elif variant == "hooks":
        noop = agentkit.Hooks(before_model_request=lambda r: None, before_tool_call=lambda c, x: None,
                              after_tool_call=lambda c, o, x: None, on_generation_end=lambda r, e: None)

        def once() -> str:
            return run_agent(model, "add", tools=[add_tool], hooks=noop).text
    elif variant == "guardrail":
        passes = agentkit.input_guardrail(lambda text, ctx: None)

        def once() -> str:
            return run_agent(model, "add", tools=[add_tool], guardrails=[passes]).text
    elif variant.startswith("cache-"):
        import tempfile

        fresh = [0]  # cache-miss: a new key part each run
        cache = agentkit.ToolCache(tempfile.mkdtemp(prefix="agentkit-bench-cache-"), ttl=3600, fsync=False,
                                   key=(lambda input, ctx: fresh[0]) if variant == "cache-miss" else None)
        cached = tool(cache=cache, read_only=True)(add)

        def once() -> str:
            fresh[0] += 1
            return run_agent(model, "add", tools=[cached]).text
    else:
        def once() -> str:
            with agentkit.run_agent_stream(model, "add", tools=[add_tool]) as stream:
                for _ in stream:
                    pass
                return stream.result.text
    for _ in range(runs):
        assert once() == "done"


def _count(checkout: Path, variant: str, runs: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, __file__, "--child", variant, str(runs)],
        env=env, capture_output=True, text=True, check=True,
    )
    match = re.search(r"refs:\s*([\d,]+)", proc.stderr)
    assert match, proc.stderr[-2000:]
    return int(match.group(1).replace(",", ""))


def per_step(checkout: Path, variant: str) -> int:
    return (_count(checkout, variant, 40) - _count(checkout, variant, 10)) // (30 * STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="another checkout (e.g. agentkit 0.1.0) to count too")
    parser.add_argument("--variants", default="plain,hooks,stream")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _workload(args.child[0], int(args.child[1]))
        return
    here = Path(__file__).resolve().parents[1]
    base = None
    if args.against is not None:
        base = per_step(args.against.resolve(), "plain")
        print(f"{args.against}: plain {base:,} instructions/step")
    for variant in args.variants.split(","):
        n = per_step(here, variant)
        ratio = f"  ({n / base:.2f}x of {args.against} plain)" if base else ""
        print(f"this checkout: {variant} {n:,} instructions/step{ratio}", flush=True)


if __name__ == "__main__":
    main()
