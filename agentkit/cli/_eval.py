"""``agentkit eval``: a store's sessions run against a model, judged by pydantic-evals
(the ``evals`` extra), with a progress line on stderr and the report on stdout (a table,
or ``--json``). Exit status 0 when every case passed, 1 otherwise (docs/evals.md)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ConfigurationError
from ..stores.base import EventStore

__all__ = ["add_parser", "cmd_eval"]

_DEFAULT_CONCURRENCY = 4


def add_parser(sub: Any, model_help: str) -> argparse.ArgumentParser:
    """The ``eval`` subcommand's arguments."""
    p: argparse.ArgumentParser = sub.add_parser(
        "eval",
        help="run a store's sessions against a model and report (pydantic-evals; the evals extra)",
        description="Each session's first prompt runs through an agent on --model; a case passes when the "
        "answer and the tool calls (names and inputs, in order) equal the recorded ones. Prints "
        "pydantic-evals' report table (--json: the report as JSON); exit status 0 when every case "
        "passed, 1 otherwise.",
    )
    p.add_argument("--store", required=True, metavar="DIR", help="FileEventStore directory holding the sessions")
    p.add_argument("--model", help=model_help)
    p.add_argument("--session", action="append", metavar="ID", help="evaluate this session (repeatable; default: all)")
    p.add_argument("--tools", action="append", metavar="SPEC",
                   help="tools the agent may call: 'json' or 'module:attribute' (as chat's --tools); repeatable")
    p.add_argument("--system", help="system prompt of the agent")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for CI)")
    p.add_argument("--concurrency", type=int, default=_DEFAULT_CONCURRENCY, metavar="N",
                   help=f"cases run at once (default {_DEFAULT_CONCURRENCY})")
    return p


def cmd_eval(args: argparse.Namespace, store: EventStore, spec: str, tools: list[Any]) -> int:
    """Run the evaluation; 0 when every case passed, 1 otherwise."""
    if args.concurrency < 1:
        raise ConfigurationError(f"--concurrency must be 1 or more, got {args.concurrency}")
    from ..agent import Agent
    from ..evals import AnswerMatches, ToolCallsMatch, agent_task, dataset_from_sessions

    dataset = dataset_from_sessions(store, args.session, name=args.store)
    if not dataset.cases:
        raise ConfigurationError(f"the store {args.store} has no session with a prompt to evaluate")
    dataset.add_evaluator(ToolCallsMatch())
    dataset.add_evaluator(AnswerMatches())
    agent = Agent(spec, tools=tools, **({"system": args.system} if args.system else {}))
    task = _with_progress(agent_task(agent, name=spec), len(dataset.cases))
    report = dataset.evaluate_sync(task, max_concurrency=args.concurrency, progress=False, task_name=spec)
    failed = _failed_names(report)
    if args.json:
        from pydantic_evals.reporting import EvaluationReportAdapter

        body = {"passed": not failed, "cases": len(dataset.cases), "failed": failed,
                "report": EvaluationReportAdapter.dump_python(report, mode="json")}
        print(json.dumps(body, ensure_ascii=False))
    else:
        width = max(shutil.get_terminal_size((120, 24)).columns, 100)
        sys.stdout.write(report.render(width=width))
        for line in _failure_lines(report):
            print(line)
        print(f"{len(dataset.cases) - len(failed)} of {len(dataset.cases)} cases passed")
    return 1 if failed else 0


def _with_progress(task: Callable[[Any], Awaitable[Any]], total: int) -> Callable[[Any], Awaitable[Any]]:
    """``task``, writing ``agentkit eval: [####----] done/total cases`` to stderr as each
    case ends: one bar drawn again on a terminal, else one line each. The cases all run on
    the evaluation's event loop, so the count needs no lock."""
    done = 0
    tty = sys.stderr.isatty()
    start = "\r" if tty else ""

    async def counted(inputs: Any) -> Any:
        nonlocal done
        try:
            return await task(inputs)
        finally:
            done += 1
            bar = "#" * (20 * done // total) + "-" * (20 - 20 * done // total)
            end = "\n" if not tty or done == total else ""
            sys.stderr.write(f"{start}agentkit eval: [{bar}] {done}/{total} cases{end}")
            sys.stderr.flush()

    counted.__name__ = task.__name__
    return counted


def _failed_names(report: Any) -> list[str]:
    """The cases that did not pass: an assertion false, an evaluator that raised, or a task
    that failed."""
    bad = [c.name for c in report.cases
           if c.evaluator_failures or not all(a.value for a in c.assertions.values())]
    return bad + [f.name for f in report.failures]


def _failure_lines(report: Any) -> list[str]:
    lines: list[str] = []
    for case in report.cases:
        lines += [f"{case.name}: {name}: {a.reason}" for name, a in case.assertions.items() if not a.value]
        lines += [f"{case.name}: {f.name} raised {f.error_message}" for f in case.evaluator_failures]
    lines += [f"{f.name}: the task failed: {f.error_message}" for f in report.failures]
    return lines
