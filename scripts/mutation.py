#!/usr/bin/env python3
"""Mutation testing for one agentkit module, offline and with the standard library only.

    python scripts/mutation.py agentkit/projection.py
    python scripts/mutation.py agentkit/stores/_records.py --tests tests/test_store_records.py
    python scripts/mutation.py agentkit/cancel.py --list          # show the mutants only

Each mutant is one small change to the module's source (a flipped comparison, ``and``
for ``or``, ``True`` for ``False``, a statement replaced by ``pass``, a ``return`` without
its value, ``-`` for ``+``, ``break`` for ``continue``, a number plus one, a dropped
``not``). For every mutant the module's own test file runs in a subprocess, in a copy of
the checkout in a temporary directory (the checkout is never modified, so several runs
can go on at once), with a per-mutant timeout. A failing test run kills the mutant; a
passing one means no test noticed the change: its diff is printed at the end.

Not part of CI: a run takes minutes. See CONTRIBUTING.md, "Mutation testing".
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".tox", ".mypy_cache", ".ruff_cache",
                                      ".pytest_cache", "build", "dist", ".venv", "venv")

_CMP_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Lt: (ast.LtE, ast.GtE),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
_BIN_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
}


@dataclass(frozen=True)
class Mutant:
    """One changed copy of the module."""

    number: int
    line: int
    what: str
    source: str
    diff: str


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived" or "timeout"
    seconds: float


# -- making mutants --------------------------------------------------------------------


def _offsets(source: str) -> list[int]:
    """Start offset (in characters) of each line, 1-based line numbers at index n-1."""
    out, pos = [], 0
    for line in source.splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    out.append(pos)
    return out


def _span(node: ast.AST, starts: list[int], source: str) -> tuple[int, int]:
    # ast column offsets count UTF-8 bytes; convert them to character offsets
    def char_col(line_no: int, byte_col: int) -> int:
        line = source[starts[line_no - 1] : starts[line_no]]
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    start = starts[node.lineno - 1] + char_col(node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = starts[node.end_lineno - 1] + char_col(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return start, end


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


_NOT_DELETED = (ast.Pass, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                ast.Global, ast.Nonlocal)


def _skipped_subtrees(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: annotations, f-strings (positions inside them are
    unreliable before 3.12), decorators, ``__all__`` and ``__slots__``, ``TYPE_CHECKING``."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                      node.args.vararg, node.args.kwarg]:
                if a is not None:
                    mark(a.annotation)
            for d in node.decorator_list:
                mark(d)
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                mark(d)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.JoinedStr):
            mark(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in ("__all__", "__slots__") for t in targets):
                mark(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            mark(node)
    return skip


def _edits(tree: ast.AST, skip: set[int]) -> Iterator[tuple[ast.AST, str, str]]:
    """(node to replace, replacement text, description) for every mutation site."""
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for new in _CMP_SWAPS.get(type(op), ()):
                    ops = [*node.ops]
                    ops[i] = new()
                    yield node, ast.unparse(ast.Compare(left=node.left, ops=ops, comparators=node.comparators)), (
                        f"{type(op).__name__} -> {new.__name__}")
        elif isinstance(node, ast.BoolOp):
            new_op: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield node, ast.unparse(ast.BoolOp(op=new_op, values=node.values)), (
                f"{type(node.op).__name__.lower()} -> {type(new_op).__name__.lower()}")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAPS:
            new_bin = _BIN_SWAPS[type(node.op)]()
            yield node, ast.unparse(ast.BinOp(left=node.left, op=new_bin, right=node.right)), (
                f"{type(node.op).__name__} -> {type(new_bin).__name__}")
        elif isinstance(node, ast.AugAssign) and type(node.op) in _BIN_SWAPS:
            new_bin = _BIN_SWAPS[type(node.op)]()
            yield node, ast.unparse(ast.AugAssign(target=node.target, op=new_bin, value=node.value)), (
                f"augmented {type(node.op).__name__} -> {type(new_bin).__name__}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, f"({ast.unparse(node.operand)})", "not x -> x"
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            yield node, repr(not node.value), f"{node.value} -> {not node.value}"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield node, repr(node.value + 1), f"{node.value} -> {node.value + 1}"
        elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            yield node, "return None", "return value -> return None"
        elif isinstance(node, ast.Break):
            yield node, "continue", "break -> continue"
        elif isinstance(node, ast.Continue):
            yield node, "break", "continue -> break"
        if isinstance(node, ast.stmt) and not isinstance(node, _NOT_DELETED) and not _is_docstring(node):
            declaration = isinstance(node, ast.AnnAssign) and node.value is None
            returns_value = isinstance(node, ast.Return) and node.value is not None  # "return None" covers it
            if not declaration and not returns_value:
                yield node, "pass", f"{type(node).__name__.lower()} statement -> pass"


def make_mutants(path: Path) -> list[Mutant]:
    """Every syntactically valid mutant of the module at ``path``, in source order."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    original = ast.dump(tree)
    starts = _offsets(source)
    seen: set[str] = set()
    found: list[tuple[int, int, str, str]] = []
    for node, text, what in _edits(tree, _skipped_subtrees(tree)):
        start, end = _span(node, starts, source)
        mutated = source[:start] + text + source[end:]
        try:
            changed = ast.dump(ast.parse(mutated)) != original
        except SyntaxError:
            continue
        if not changed or mutated in seen:
            continue
        seen.add(mutated)
        found.append((node.lineno, start, what, mutated))  # type: ignore[attr-defined]
    found.sort(key=lambda f: (f[1], f[2]))
    rel = _display(path)
    out = []
    for n, (line, _, what, mutated) in enumerate(found, 1):
        diff = "".join(difflib.unified_diff(source.splitlines(keepends=True), mutated.splitlines(keepends=True),
                                            f"a/{rel}", f"b/{rel}", n=1))
        out.append(Mutant(number=n, line=line, what=what, source=mutated, diff=diff))
    return out


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# -- running them ----------------------------------------------------------------------


def default_tests(module: Path) -> Path:
    """tests/test_<package>_<module>.py, e.g. agentkit/tools/runner.py ->
    tests/test_tools_runner.py, agentkit/stores/_scan.py -> tests/test_store_scan.py,
    agentkit/cancel.py -> tests/test_cancel.py."""
    parts = list(module.resolve().relative_to(REPO / "agentkit").with_suffix("").parts)
    parts = [{"stores": "store"}.get(p, p).lstrip("_") for p in parts]
    return REPO / "tests" / f"test_{'_'.join(parts)}.py"


class _Server:
    """A process in a copy of the checkout that has imported pytest, its plugins and
    agentkit's dependencies once, and forks a fresh child per test run: the child imports
    the (mutated) agentkit from the copy, so each mutant costs the tests, not start-up."""

    def __init__(self, copy: Path, tests: list[str], python: str) -> None:
        self.copy = copy
        env = dict(os.environ, PYTHONPATH=str(copy) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen([python, str(Path(__file__).resolve()), "--_serve", str(copy), *tests],
                                     cwd=copy, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, timeout: float) -> tuple[str, float, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{timeout}\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().split()
        if not reply:
            raise SystemExit("the mutation test server died")
        status, seconds = reply[0], float(reply[1])
        if status == "nothing":
            raise SystemExit("no tests were collected")
        out = (self.copy / ".mutation-output").read_text(encoding="utf-8", errors="replace")
        return status, seconds, out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def _serve(copy: str, tests: list[str]) -> None:
    """The server side of :class:`_Server` (``--_serve``): one line per run on stdin (the
    timeout), one ``<status> <seconds>`` line back."""
    import importlib
    import importlib.metadata

    import pytest

    for ep in importlib.metadata.entry_points(group="pytest11"):
        try:
            ep.load()
        except Exception:  # noqa: BLE001 - a broken plugin only costs start-up time
            pass
    importlib.import_module("agentkit")
    for name, mod in list(sys.modules.items()):  # forget everything from the copy
        if str(getattr(mod, "__file__", "") or "").startswith(copy):
            del sys.modules[name]
    output = os.path.join(copy, ".mutation-output")
    args = ["-x", "-q", "-p", "no:cacheprovider", *tests]
    for line in sys.stdin:
        timeout = float(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: run the tests, report through the exit code
            code = 3
            try:
                os.setsid()
                fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                code = int(pytest.main(args))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status = "timeout"
        try:
            while time.monotonic() - started < timeout:
                done, wait_status = os.waitpid(pid, os.WNOHANG)
                if done:
                    code = os.waitstatus_to_exitcode(wait_status)
                    status = {0: "survived", 5: "nothing"}.get(code, "killed")
                    break
                time.sleep(0.02)
        finally:
            if status == "timeout":  # also on Ctrl-C: the tests run in a session of their own
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
        print(status, round(time.monotonic() - started, 3), flush=True)


def _copy_checkout(into: Path) -> Path:
    dest = into / "repo"
    shutil.copytree(REPO, dest, ignore=_COPY_IGNORE, symlinks=True)
    return dest


def run(module: Path, tests: list[str], *, jobs: int, timeout: float | None, python: str,
        only: set[int] | None, progress: bool = True) -> tuple[list[Outcome], float]:
    """Run the tests against every mutant; returns the outcomes and the baseline time."""
    mutants = [m for m in make_mutants(module) if only is None or m.number in only]
    rel = module.resolve().relative_to(REPO)
    with tempfile.TemporaryDirectory(prefix="agentkit-mutation-") as tmp:
        servers = [_Server(_copy_checkout(Path(tmp) / f"w{i}"), tests, python) for i in range(jobs)]
        try:
            status, baseline, text = servers[0].run(3600)
            if status != "survived":
                raise SystemExit(f"the tests fail without any mutation; fix them first:\n{text[-3000:]}")
            limit = timeout if timeout is not None else max(30.0, 4 * baseline)
            if progress:
                print(f"{rel}: {len(mutants)} mutants; tests take {baseline:.1f}s unmutated; "
                      f"timeout {limit:g}s per mutant", flush=True)
            free = list(servers)
            outcomes: list[Outcome] = []

            def one(mutant: Mutant) -> Outcome:
                server = free.pop()
                try:
                    (server.copy / rel).write_text(mutant.source, encoding="utf-8")
                    status, seconds, _ = server.run(limit)
                    return Outcome(mutant=mutant, status=status, seconds=seconds)
                finally:
                    (server.copy / rel).write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
                    free.append(server)

            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for outcome in pool.map(one, mutants):
                    outcomes.append(outcome)
                    if progress:
                        m = outcome.mutant
                        print(f"  #{m.number:<4} line {m.line:<4} {outcome.status:<8} {m.what}", flush=True)
        finally:
            for server in servers:
                server.close()
    return outcomes, baseline


def report(module: Path, outcomes: list[Outcome]) -> str:
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "timeout")}
    total = len(outcomes) or 1
    score = 100 * (counts["killed"] + counts["timeout"]) / total
    lines = [f"{_display(module)}: {len(outcomes)} mutants: {counts['killed']} killed, "
             f"{counts['survived']} survived, {counts['timeout']} timed out; "
             f"score {score:.0f}% (killed + timed out)"]
    for o in outcomes:
        if o.status == "survived":
            lines.append(f"\n--- survived #{o.mutant.number} (line {o.mutant.line}: {o.mutant.what})")
            lines.append(o.mutant.diff.rstrip("\n"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("module", type=Path, help="the module to mutate, e.g. agentkit/cancel.py")
    parser.add_argument("--tests", nargs="+", help="test files to run (default: the module's own, "
                        "tests/test_<package>_<module>.py)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 4x the unmutated run, >= 30)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--only", help="comma-separated mutant numbers to run (see --list)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--json", type=Path, help="also write the outcomes to this file")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    if argv is None and sys.argv[1:2] == ["--_serve"]:
        _serve(sys.argv[2], sys.argv[3:])
        return 0
    args = parser.parse_args(argv)
    module = args.module.resolve()
    if not module.is_file() or REPO / "agentkit" not in module.parents:
        parser.error(f"{args.module} is not a module of this checkout's agentkit package")
    if args.list:
        for m in make_mutants(module):
            print(f"#{m.number} line {m.line}: {m.what}\n{m.diff}")
        return 0
    tests = args.tests or [str(default_tests(module).relative_to(REPO))]
    for t in tests:
        if not (REPO / t).is_file():
            parser.error(f"test file {t} does not exist (pass --tests)")
    only = {int(n) for n in args.only.split(",")} if args.only else None
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    outcomes, _ = run(module, tests, jobs=args.jobs, timeout=args.timeout, python=args.python, only=only)
    print()
    print(report(module, outcomes))
    if args.json:
        args.json.write_text(json.dumps([
            {"number": o.mutant.number, "line": o.mutant.line, "what": o.mutant.what, "status": o.status,
             "seconds": round(o.seconds, 2), "diff": o.mutant.diff} for o in outcomes
        ], indent=1), encoding="utf-8")
    return 0 if all(o.status != "survived" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
