#!/usr/bin/env python3
"""Mutation testing for one agentkit module, offline and with the standard library only.

    python scripts/mutation.py agentkit/context/_projection.py
    python scripts/mutation.py agentkit/stores/_records.py --tests tests/test_store_records.py
    python scripts/mutation.py agentkit/cancel.py --list          # show the mutants only

Each mutant is one small change to the module's source (a flipped comparison, ``and``
for ``or``, ``True`` for ``False``, a statement replaced by ``pass``, a ``return`` without
its value, ``-`` for ``+``, ``break`` for ``continue``, a number plus one, a dropped
``not``). For every mutant the module's own test file runs in a subprocess, in a copy of
the checkout in a temporary directory (the checkout is never modified, so several runs
can go on at once), with a per-mutant timeout. A failing test run kills the mutant; a
passing one means no test noticed the change: its diff is printed at the end.

The core modules' figures are recorded in ``scripts/mutation-scores.json`` (a content
hash of each module and its tests, and the outcome counts); docs/architecture.md's table
is made from that file:

    python scripts/mutation.py --record --jobs 2      # re-measure every module whose hash changed
    python scripts/mutation.py agentkit/cancel.py --record
    python scripts/mutation.py --check --jobs 2       # the `mutation` tox env

``--check`` trusts a recorded figure whose hash still matches, and re-measures a
deterministic sample of the mutants of each module that changed since its measurement;
it fails when a score is under the floor (90%), and, in CI (``AGENTKIT_CI``), when a
record is out of date. See CONTRIBUTING.md, "Mutation testing", and docs/architecture.md, "How well tested".
"""

from __future__ import annotations

import argparse
import ast
import datetime
import difflib
import hashlib
import json
import os
import platform
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
RECORD = REPO / "scripts" / "mutation-scores.json"
DOCS = REPO / "docs" / "architecture.md"
FLOOR = 90.0
SAMPLE = 30  # mutants --check tests per changed module
# node_modules: the npm MCP reference servers (thousands of files; no core module's tests use them)
_COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".tox", ".mypy_cache", ".ruff_cache",
                                      ".pytest_cache", "build", "dist", ".venv", "venv", "node_modules")

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
        only: set[int] | None, progress: bool = True, min_timeout: float = 30.0) -> tuple[list[Outcome], float]:
    """Run the tests against every mutant; returns the outcomes and the baseline time.
    Without ``timeout``, a mutant gets 4x the unmutated run, at least ``min_timeout``."""
    mutants = [m for m in make_mutants(module) if only is None or m.number in only]
    rel = module.resolve().relative_to(REPO)
    with tempfile.TemporaryDirectory(prefix="agentkit-mutation-") as tmp:
        servers = [_Server(_copy_checkout(Path(tmp) / f"w{i}"), tests, python) for i in range(jobs)]
        try:
            status, baseline, text = servers[0].run(3600)
            if status != "survived":
                raise SystemExit(f"the tests fail without any mutation; fix them first:\n{text[-3000:]}")
            limit = timeout if timeout is not None else max(min_timeout, 4 * baseline)
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
    c = counts(outcomes)
    lines = [f"{_display(module)}: {len(outcomes)} mutants: {c['killed']} killed, "
             f"{c['survived']} survived, {c['timeout']} timed out; "
             f"score {score(c['killed'], c['timeout'], len(outcomes)):.0f}% (killed + timed out)"]
    for o in outcomes:
        if o.status == "survived":
            lines.append(f"\n--- survived #{o.mutant.number} (line {o.mutant.line}: {o.mutant.what})")
            lines.append(o.mutant.diff.rstrip("\n"))
    return "\n".join(lines)


# -- the recorded figures -----------------------------------------------------------


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many mutants were killed, survived and timed out."""
    return {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "timeout")}


def score(killed: int, timed_out: int, mutants: int) -> float:
    """The share caught (killed or timed out), in percent."""
    return 100 * (killed + timed_out) / (mutants or 1)


def fingerprint(module: str, tests: list[str]) -> str:
    """sha256 over the module's source and its test files: a recorded figure holds while
    this is unchanged."""
    digest = hashlib.sha256()
    for rel in [module, *sorted(tests)]:
        digest.update(rel.encode() + b"\0" + (REPO / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def load_record(path: Path = RECORD) -> dict[str, dict[str, object]]:
    """module (``agentkit/...``) -> its recorded measurement."""
    data = json.loads(path.read_text(encoding="utf-8"))
    modules: dict[str, dict[str, object]] = data["modules"]
    return modules


def save_record(modules: dict[str, dict[str, object]], path: Path = RECORD) -> None:
    text = json.dumps({"floor": FLOOR, "modules": dict(sorted(modules.items()))}, indent=1) + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def entry_for(module: str, tests: list[str], outcomes: list[Outcome], timeout: float) -> dict[str, object]:
    """A module's record from a full run."""
    c = counts(outcomes)
    return {
        "tests": tests,
        "sha256": fingerprint(module, tests),
        "mutants": len(outcomes),
        "killed": c["killed"],
        "timed_out": c["timeout"],
        "survived": c["survived"],
        "score": round(score(c["killed"], c["timeout"], len(outcomes)), 1),
        "survivors": [f"line {o.mutant.line}: {o.mutant.what}" for o in outcomes if o.status == "survived"],
        "measured": f"{datetime.date.today().isoformat()}, Python {platform.python_version()}, "
                    f"{timeout:g} s per mutant",
    }


TABLE_START = "<!-- mutation-table: made from scripts/mutation-scores.json by scripts/mutation.py --record -->"
TABLE_END = "<!-- /mutation-table -->"


def table(modules: dict[str, dict[str, object]]) -> str:
    """docs/architecture.md's table of the recorded figures."""
    rows = ["| module | its tests | mutants | caught | measured |", "|---|---|---|---|---|"]
    for module, e in sorted(modules.items()):
        tests = ", ".join(f"`{t}`" for t in e["tests"])  # type: ignore[attr-defined]
        parts = [f"{e['killed']} killed"]
        if e["timed_out"]:
            parts.append(f"{e['timed_out']} timed out")
        if e["survived"]:
            parts.append(f"{e['survived']} survived")
        rows.append(f"| `{module}` | {tests} | {e['mutants']} | {float(e['score']):.0f}% ({', '.join(parts)}) "  # type: ignore[arg-type]
                    f"| {e['measured']} |")
    return "\n".join(rows)


def docs_table(text: str) -> str:
    """The table between the markers in docs/architecture.md."""
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[start:end].strip("\n")


def write_docs_table(modules: dict[str, dict[str, object]], path: Path = DOCS) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    path.write_text(text[:start] + "\n" + table(modules) + "\n" + text[end:], encoding="utf-8")


def sample(mutants: list[Mutant], n: int) -> list[Mutant]:
    """``n`` of the mutants, the same ones for the same source (ordered by a hash of each)."""
    if len(mutants) <= n:
        return mutants
    chosen = sorted(mutants, key=lambda m: hashlib.sha256(m.source.encode()).hexdigest())[:n]
    return sorted(chosen, key=lambda m: m.number)


def check(record: Path, *, jobs: int, n: int, python: str, strict: bool, floor: float = FLOOR) -> int:
    """The gate: every recorded module scores at least the floor; a module changed since
    its measurement is re-measured on a sample. Returns the exit code."""
    modules = load_record(record)
    failures, stale = [], []
    for module, e in modules.items():
        tests = list(e["tests"])  # type: ignore[call-overload]
        if fingerprint(module, tests) == e["sha256"]:
            got = float(e["score"])  # type: ignore[arg-type]
            print(f"{module}: recorded {got:.0f}% of {e['mutants']} mutants (unchanged since: {e['measured']})")
            if got < floor:
                failures.append(f"{module}: recorded {got:.0f}% < {floor:.0f}%")
            continue
        stale.append(module)
        chosen = sample(make_mutants(REPO / module), n)
        print(f"{module}: changed since its measurement; testing {len(chosen)} sampled mutants", flush=True)
        outcomes, _ = run(REPO / module, tests, jobs=jobs, timeout=None, python=python,
                          only={m.number for m in chosen}, progress=False, min_timeout=15.0)
        print(report(REPO / module, outcomes))
        c = counts(outcomes)
        got = score(c["killed"], c["timeout"], len(outcomes))
        if got < floor:
            failures.append(f"{module}: {got:.0f}% of {len(outcomes)} sampled mutants caught < {floor:.0f}% "
                            f"(write tests that kill the survivors above)")
    if stale:
        print(f"\nout of date in {_display(record)}: {', '.join(stale)} (or its tests) changed since it was "
              f"measured; record it with\n  python3 scripts/mutation.py --record --jobs 2\n"
              f"and commit {_display(record)} and docs/architecture.md")
        if strict:
            failures.append(f"the recorded figures of {', '.join(stale)} are out of date (CI: AGENTKIT_CI is set)")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


def record_modules(targets: dict[str, list[str]], *, jobs: int, timeout: float | None, python: str,
                   path: Path = RECORD, docs: Path = DOCS) -> int:
    """Measure each module fully and write its figures to the record and the docs table."""
    low = 0
    for module, tests in targets.items():
        outcomes, baseline = run(REPO / module, tests, jobs=jobs, timeout=timeout, python=python, only=None)
        print(report(REPO / module, outcomes), flush=True)
        modules = load_record(path)  # as it is now: another run may have recorded a module meanwhile
        modules[module] = entry_for(module, tests, outcomes, timeout or max(30.0, 4 * baseline))
        save_record(modules, path)
        write_docs_table(modules, docs)
        low += float(modules[module]["score"]) < FLOOR  # type: ignore[arg-type]
    print(f"recorded {', '.join(targets) or 'nothing (every record is current)'} in {_display(path)}")
    return 1 if low else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("module", type=Path, nargs="?", help="the module to mutate, e.g. agentkit/cancel.py")
    parser.add_argument("--tests", nargs="+", help="test files to run (default: the module's own, "
                        "tests/test_<package>_<module>.py)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: 4x the unmutated run, >= 30)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--only", help="comma-separated mutant numbers to run (see --list)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--json", type=Path, help="also write the outcomes to this file")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--record", action="store_true", help="measure the module fully and record its figures "
                        "(without a module: every recorded module whose hash changed)")
    parser.add_argument("--check", action="store_true", help="fail when a recorded module scores under the floor "
                        "(modules changed since their measurement are re-measured on a sample)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help=f"mutants --check tests per changed module "
                        f"(default {SAMPLE})")
    parser.add_argument("--floor", type=float, default=FLOOR, help=f"--check fails under this score "
                        f"(default {FLOOR:g}%%)")
    parser.add_argument("--record-file", type=Path, default=RECORD, help=argparse.SUPPRESS)
    parser.add_argument("--docs-file", type=Path, default=DOCS, help=argparse.SUPPRESS)
    if argv is None and sys.argv[1:2] == ["--_serve"]:
        _serve(sys.argv[2], sys.argv[3:])
        return 0
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.check:
        if args.module is not None or args.record:
            parser.error("--check takes no module and no --record")
        return check(args.record_file, jobs=args.jobs, n=args.sample, python=args.python,
                     strict=bool(os.environ.get("AGENTKIT_CI")), floor=args.floor)
    if args.module is None:
        if not args.record:
            parser.error("name a module, or pass --record or --check")
        stale = {m: list(e["tests"]) for m, e in load_record(args.record_file).items()  # type: ignore[call-overload]
                 if fingerprint(m, list(e["tests"])) != e["sha256"]}  # type: ignore[call-overload]
        return record_modules(stale, jobs=args.jobs, timeout=args.timeout, python=args.python,
                              path=args.record_file, docs=args.docs_file)
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
    if args.record:
        if only is not None:
            parser.error("--record measures every mutant: drop --only")
        return record_modules({_display(module): tests}, jobs=args.jobs, timeout=args.timeout,
                              python=args.python, path=args.record_file, docs=args.docs_file)
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
