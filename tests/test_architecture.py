"""The import graph and the sizes follow docs/architecture.md: no cycles, no layer
importing a higher one, no module over 500 lines, no function over 80 without saying why
("Size rules"). The layer table is parsed from the page, so the page and this test cannot drift."""

from __future__ import annotations

import ast
import fnmatch
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "agentkit"
DOC = ROOT / "docs" / "architecture.md"


def _layers() -> list[tuple[int, str, list[str]]]:
    """(rank, name, module patterns) rows of the "Layers" table."""
    text = DOC.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append((int(cells[0]), cells[1], re.findall(r"`([^`]+)`", cells[2])))
    assert len(rows) >= 5, "docs/architecture.md lost its layer table"
    return rows


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _rank_of(path: Path, layers: list[tuple[int, str, list[str]]]) -> int | None:
    rel = path.relative_to(PKG).as_posix()
    best: tuple[int, int] | None = None  # (specificity, rank): an exact path beats a glob
    for rank, _, patterns in layers:
        for pattern in patterns:
            if fnmatch.fnmatchcase(rel, pattern):
                specificity = 2 if pattern == rel else 1
                if best is None or specificity > best[0]:
                    best = (specificity, rank)
    return None if best is None else best[1]


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING" or (
        isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported agentkit module, at module level?) for every runtime import in a file.
    Imports under ``if TYPE_CHECKING:`` are not dependencies at run time."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, bool]] = []

    def target(base: str, names: list[str]) -> list[str]:
        out = []
        for n in names:
            full = f"{base}.{n}" if base else n
            out.append(full if full in modules else base)
        return out

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, top) for a in child.names if a.name.split(".")[0] == "agentkit")
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (child.level - 1)]
                    base = ".".join(base_parts + ([child.module] if child.module else []))
                else:
                    base = child.module or ""
                if base.split(".")[0] == "agentkit":
                    found.extend((t, top) for t in target(base, [a.name for a in child.names]))
            nested = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, nested)

    visit(ast.parse(path.read_text()), True)
    return [(m, top) for m, top in found if m in modules and m != name]


def test_every_module_has_a_layer_and_a_line_in_the_package_map():
    layers = _layers()
    text = DOC.read_text()
    package_map = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    unplaced = [n for n, p in _modules().items() if _rank_of(p, layers) is None]
    unmapped = [p.relative_to(ROOT).as_posix() for p in _modules().values()
                if f"`{p.relative_to(ROOT).as_posix()}`" not in package_map]
    assert unplaced == [], f"modules no row of the layer table covers: {unplaced}"
    assert unmapped == [], f"modules missing from the package map of docs/architecture.md: {unmapped}"


def test_no_module_imports_a_higher_layer():
    """Also inside functions: a lazy import is still a dependency."""
    layers = _layers()
    modules = _modules()
    names = {rank: layer for rank, layer, _ in layers}
    offenders = []
    for name, path in modules.items():
        rank = _rank_of(path, layers)
        for imported, _ in _imports(name, path, modules):
            other = _rank_of(modules[imported], layers)
            if rank is not None and other is not None and other > rank:
                offenders.append(f"{name} ({names[rank]}) imports {imported} ({names[other]})")
    assert offenders == []


def _graph(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module -> the agentkit modules it imports at run time, at module level or inside a
    function (a function-level import is a dependency too: it only runs later)."""
    graph = {n: sorted({m for m, _top in _imports(n, p, modules)}) for n, p in modules.items()}
    # a package imports its submodules; a submodule importing its own package's __init__ is
    # Python's normal loading order, not a cycle the code made
    return {n: [m for m in deps if not n.startswith(m + ".")] for n, deps in graph.items()}


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every group of modules that import one another, directly or through others (the
    strongly connected components with more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        on_stack.add(n)
        for m in graph.get(n, ()):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on_stack:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            group = []
            while True:
                m = stack.pop()
                on_stack.discard(m)
                group.append(m)
                if m == n:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for n in sorted(graph):
        if n not in index:
            visit(n)
    return sorted(groups)


def test_there_is_no_import_cycle():
    """No module imports itself through others, counting imports inside functions (they
    are dependencies too, only later ones); imports under ``if TYPE_CHECKING:`` do not count."""
    assert _cycles(_graph(_modules())) == []


def _load_graph(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module -> what importing it runs at once: its module-level imports and, for each,
    the ``__init__`` of every package above the imported module (Python runs those first).
    The root ``agentkit`` is left out (it is always loaded first), as is a module's own
    package (normal loading order)."""
    graph: dict[str, set[str]] = {}
    for n, p in modules.items():
        deps: set[str] = set()
        for m, top in _imports(n, p, modules):
            if not top:
                continue
            parts = m.split(".")
            deps.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
        graph[n] = {m for m in deps if m in modules and m != n and not n.startswith(m + ".")}
    return {n: sorted(deps) for n, deps in graph.items()}


def test_no_import_cycle_through_a_package_init():
    """Importing a module runs its packages' ``__init__`` first, and those import their
    submodules: two packages whose modules import each other at module level (``jobs``
    and ``execution`` did, through the job runner and the local context) load only in
    one order, and the other order fails with a half-made module. None may."""
    assert _cycles(_load_graph(_modules())) == []


def test_the_checker_sees_an_upward_import_and_a_cycle(tmp_path):
    """The checker itself: a lower layer importing a higher one is found."""
    layers = _layers()
    port = PKG / "tools" / "base.py"
    runtime = PKG / "session" / "_session.py"
    assert _rank_of(port, layers) < _rank_of(runtime, layers)
    fake = tmp_path / "agentkit" / "tools" / "base.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from ..adapters.langchain import from_langchain_tool\n")
    modules = {**_modules(), "agentkit.tools.base": fake}
    assert ("agentkit.adapters.langchain", False) in _imports("agentkit.tools.base", fake, modules)
    # a cycle closed only by an import inside a function is a cycle
    a, b = tmp_path / "agentkit" / "a.py", tmp_path / "agentkit" / "b.py"
    a.write_text("from . import b\n")
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    pair = {"agentkit.a": a, "agentkit.b": b, "agentkit": PKG / "__init__.py"}
    assert _cycles(_graph(pair)) == []  # a TYPE_CHECKING import is not a dependency
    b.write_text("def f():\n    from .a import x\n")
    assert _cycles(_graph(pair)) == [["agentkit.a", "agentkit.b"]]
    # a package's __init__ runs before its submodule: p.x -> q.y and q.y -> p.z is a cycle
    # through the packages' __init__s (each imports its submodules)
    for pkg, sub, imports in (("p", "x", "from ..q import y\n"), ("q", "y", "from ..p import z\n")):
        (tmp_path / "agentkit" / pkg).mkdir()
        (tmp_path / "agentkit" / pkg / "__init__.py").write_text(f"from . import {sub}\n")
        (tmp_path / "agentkit" / pkg / f"{sub}.py").write_text(imports)
    (tmp_path / "agentkit" / "p" / "z.py").write_text("")
    two = {f"agentkit.{name}": tmp_path / "agentkit" / rel for name, rel in (
        ("p", "p/__init__.py"), ("p.x", "p/x.py"), ("p.z", "p/z.py"), ("q", "q/__init__.py"), ("q.y", "q/y.py"))}
    assert _cycles(_graph(two)) == []  # no module imports another back
    assert _cycles(_load_graph(two)) != []


def test_tests_import_their_helpers_the_way_tox_runs_them():
    # tox runs `pytest` (not `python -m pytest`): the checkout is not on sys.path, so a
    # test importing the `tests` package fails there while passing in a developer's run
    import re

    tests = Path(__file__).resolve().parent
    offenders = [
        f"{p.name}:{n}" for p in sorted(tests.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.match(r"\s*(from tests[. ]|import tests\b)", line)
    ]
    assert offenders == [], f"import helpers as top-level modules (from _procs import ...): {offenders}"


# -- sizes: no module over 500 lines, no function over 80 without saying why ----------

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

# The hubs other splits of issue #28 are still taking apart. Each entry is a ceiling the
# module or function may not grow past, and the list only shrinks: a test fails when an
# entry is no longer needed (the module is at most 500 lines, the function at most 80 or
# commented), so the split that fixes one removes its line here. Modules: path -> line
# count today. Functions: "path::qualified name" -> length today (as _function_length
# counts it).
_PENDING: dict[str, int] = {
    # modules over 500 lines
}


def _function_length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` line (decorators not counted) to the function's last line,
    less its docstring's lines; nested functions count in the function holding them."""
    length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    if ast.get_docstring(node, clean=False) is not None:
        doc = node.body[0]
        length -= doc.end_lineno - doc.lineno + 1  # type: ignore[operator]
    return length


def _says_why_long(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    """True when the function says why it is long: a comment line starting ``# long:``
    between its ``def`` line and its first statement after the docstring, or a docstring
    line starting ``Long:``."""
    doc = ast.get_docstring(node)
    if doc is not None and any(line.strip().startswith("Long:") for line in doc.splitlines()):
        return True
    body = node.body[1:] if doc is not None else node.body
    first = body[0].lineno if body else node.end_lineno + 1  # type: ignore[operator]
    start = node.body[0].end_lineno if doc is not None else node.lineno  # (1-based: the line after)
    return any(line.strip().lower().startswith("# long:") for line in lines[start:first - 1])


def _long_functions(path: Path) -> dict[str, int]:
    """``qualified name -> length`` of the functions of a file over the limit that do not say why."""
    text = path.read_text()
    lines = text.splitlines()
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                length = _function_length(child)
                if length > MAX_FUNCTION_LINES and not _says_why_long(child, lines):
                    out[name] = length
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return out


def _size_offenders() -> dict[str, int]:
    """Every module over the line limit and every long function that does not say why."""
    found: dict[str, int] = {}
    for path in _modules().values():
        rel = path.relative_to(ROOT).as_posix()
        count = len(path.read_text().splitlines())
        if count > MAX_MODULE_LINES:
            found[rel] = count
        for name, length in _long_functions(path).items():
            found[f"{rel}::{name}"] = length
    return found


def test_no_module_is_over_500_lines_and_no_function_over_80_without_saying_why():
    """A module holds at most 500 lines. A function holds at most 80 (``_function_length``:
    from its ``def`` line to its last line, its docstring not counted, nested functions
    counted in the function holding them), unless a comment line starting ``# long:``
    right after its signature or docstring (or a docstring line starting ``Long:``) says
    why it is long. ``_PENDING`` lists the hubs still being split, each as a ceiling."""
    found = _size_offenders()
    new = {k: v for k, v in found.items() if k not in _PENDING}
    grown = {k: (v, _PENDING[k]) for k, v in found.items() if k in _PENDING and v > _PENDING[k]}
    assert new == {}, f"over the size limits (split along a seam, or say why with '# long:'): {new}"
    assert grown == {}, f"_PENDING entries grew past their ceiling (now, ceiling): {grown}"


def test_the_pending_list_only_shrinks():
    """An entry of ``_PENDING`` that no longer needs to be there fails: remove it (and
    lower a ceiling that is above today's size, so the list stays exact)."""
    found = _size_offenders()
    stale = sorted(k for k in _PENDING if k not in found)
    loose = {k: (found[k], v) for k, v in _PENDING.items() if k in found and found[k] < v}
    assert stale == [], f"no longer over the limits: remove from _PENDING: {stale}"
    assert loose == {}, f"_PENDING ceilings above today's size (now, ceiling): lower them: {loose}"


def test_the_size_checker_counts_and_reads_the_comment(tmp_path):
    """The checker itself: a long function is found, its docstring is not counted, and a
    ``# long:`` comment or a ``Long:`` docstring line lets it be."""
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    doc = '    """Doc.\n\n    More.\n    """\n'
    cases = {
        "plain": ("def f():\n" + body, {"f": 81}),
        "docstring not counted": ("def f():\n" + doc + body, {"f": 81}),
        "exactly 80": ("def f():\n" + body[: body.rindex("    x79")], {}),
        "comment after the docstring": ("def f():\n" + doc + "    # long: one table\n" + body, {}),
        "comment without a docstring": ("def f(\n    a=1,\n):\n    # Long: one table\n" + body, {}),
        "Long: in the docstring": ('def f():\n    """Doc.\n\n    Long: one table.\n    """\n' + body, {}),
        "a comment further down does not count": ("def f():\n    y = 0\n    # long: late\n" + body, {"f": 83}),
        "methods and nested functions": (
            "class C:\n    def m(self):\n        def g():\n" + textwrap.indent(body, " " * 8) + "        return g\n",
            {"C.m": 83, "C.m.g": 81},
        ),
    }
    for what, (source, expected) in cases.items():
        path = tmp_path / "m.py"
        path.write_text(source)
        assert _long_functions(path) == expected, what


# -- the layout by concept (docs/architecture.md, "Where things live") -----------------------

# modules a concept folder holds: none of these names may sit directly under agentkit/
_IN_A_FOLDER = {
    "session", "_eventlog", "_gate", "_scheduling", "_subscriptions", "_follow", "_foreign", "pool",
    "redaction", "_loop", "_output", "_generation_tools", "stream", "approval", "_approvals",
    "transactions", "_transact", "_intents", "projection", "invariants", "compaction", "_compact",
    "summarize", "view", "truncate", "budget", "_held", "planning", "_planlog", "jobs", "job_store",
    "job_status", "_jobbridge", "observability", "_tracing", "tool_search", "subagents", "skills",
}
_FOLDERS = ("session", "loop", "streaming", "approvals", "transactions", "context", "planning", "jobs",
            "observability", "tools")


def _top_level_modules(package: Path = PKG) -> list[str]:
    return sorted(p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__"))


def test_at_most_twelve_public_modules_directly_under_agentkit():
    public = [m for m in _top_level_modules() if not m.startswith("_")]
    assert len(public) <= 12, f"{len(public)} public top-level modules: {public}"


def test_no_module_outside_the_concept_folder_that_holds_it():
    strays = sorted(set(_top_level_modules()) & _IN_A_FOLDER)
    assert strays == [], f"modules that belong in a concept folder (docs/architecture.md): {strays}"
    assert all((PKG / f / "__init__.py").is_file() for f in _FOLDERS)
    assert not (PKG / "execution" / "_jobs.py").exists() and not (PKG / "stores" / "jobs.py").exists()
    assert not (PKG / "tools" / "context.py").exists()


def _top_level_all_groups() -> list[tuple[str, list[str]]]:
    """(comment, names) for each commented group of agentkit/__init__.py's __all__."""
    text = (PKG / "__init__.py").read_text()
    body = text.split("\n__all__ = [\n", 1)[1].split("\n]", 1)[0]
    groups: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("#"):
            groups.append((line.lstrip("# "), []))
        elif line:
            assert groups, "the top-level __all__ starts with a group comment"
            groups[-1][1].append(ast.literal_eval(line.rstrip(",")))
    return groups


def test_the_top_level_all_is_small_grouped_and_sorted():
    import agentkit

    groups = _top_level_all_groups()
    names = [n for _, ns in groups for n in ns]
    assert names == list(agentkit.__all__)  # every name sits in a commented group
    assert len(names) <= 85, f"{len(names)} names at the top level"
    unsorted = [title for title, ns in groups if ns != sorted(ns)]
    assert unsorted == [], f"groups of the top-level __all__ not sorted: {unsorted}"
    assert {"front doors", "errors"} <= {title for title, _ in groups}


def _public_alls() -> dict[str, list[str]]:
    import importlib
    import pkgutil

    import agentkit

    names = ["agentkit"] + sorted(m.name for m in pkgutil.walk_packages(agentkit.__path__, "agentkit.")
                                  if not any(part.startswith("_") for part in m.name.split(".")))
    return {n: list(getattr(importlib.import_module(n), "__all__", [])) for n in names}


def test_each_public_name_is_listed_in_one_public_all():
    listed: dict[str, list[str]] = {}
    for module, names in _public_alls().items():
        for name in names:
            listed.setdefault(name, []).append(module)
    twice = {name: modules for name, modules in listed.items() if len(modules) > 1}
    assert twice == {}, f"names listed in more than one public __all__: {twice}"


def test_the_layout_checks_see_a_stray_module_and_a_name_listed_twice(tmp_path, monkeypatch):
    """The checkers themselves: a module put back at the top level and a second listing
    of a name are found."""
    fake = tmp_path / "agentkit"
    fake.mkdir()
    for name in ("__init__.py", "agent.py", "stream.py", "_eventlog.py"):
        (fake / name).write_text("")
    assert sorted(set(_top_level_modules(fake)) & _IN_A_FOLDER) == ["_eventlog", "stream"]
    import agentkit.streaming

    monkeypatch.setattr(agentkit.streaming, "__all__", [*agentkit.streaming.__all__, "AgentStream"])
    with pytest.raises(AssertionError, match="AgentStream"):
        test_each_public_name_is_listed_in_one_public_all()


# -- test files named for the module they test ------------------------------------------

# Test files that test no one module: the checks of the code base itself, the docs and
# examples, and behaviours that cross modules (a Session's behaviour over its parts, many
# processes, faults, every tool kind or adapter). Any other tests/test_<name>.py names the
# module or package it tests (see _tested_module); an entry here that names one fails.
_CROSS_CUTTING = {
    # the code base, its docs and examples
    "test_architecture", "test_public_api", "test_docs", "test_examples", "test_typing",
    "test_coverage_floor", "test_mutation_script", "test_live", "test_error_messages",
    "test_web_examples", "test_example_background_jobs", "test_mcp_example",
    "test_adapters_langchain_docs",  # docs/langchain.md
    # a Session's behaviours, over session/, loop/ and the stores
    "test_session_ask", "test_session_durability", "test_steering", "test_nothing_to_answer",
    "test_context_retention",  # Retention (context/_compaction.py) run by context/_compact.py
    # many processes, kills and faults
    "test_kill_loop", "test_many_processes", "test_web_workers", "test_approvals_processes",
    "test_loop_calls_processes",  # (h-killloop) exactly once (loop/_calls.py) across real processes
    "test_fencing", "test_fencing_processes", "test_crash_recovery", "test_store_contract",
    "test_store_processes", "test_store_syscalls", "test_store_postgres_faults",
    "test_store_postgres_fork",  # (h-celery) the PostgreSQL store in a forked worker
    # one behaviour across every adapter, tool kind or MCP transport
    "test_models_abort", "test_models_reasoning_and_keys", "test_hooks_tool_kinds", "test_messages_events",
    "test_mcp_http", "test_mcp_inproc", "test_mcp_reference", "test_mcp_stdio",
}
_TEST_ALIASES = {"store": "stores"}  # tests/test_store_*.py test agentkit/stores/ (scripts/mutation.py's rule)


def _tested_module(name: str, package: Path = PKG) -> Path | None:
    """The module or package ``tests/test_<name>.py`` is named for, or None: ``<name>`` is
    a module or package of ``package`` (leading underscores dropped: ``test_json`` ->
    ``agentkit/_json.py``), or a folder and a name inside it (``test_tools_runner`` ->
    ``tools/runner.py``, ``test_celery_jobs`` -> ``celery/_jobs.py``, ``test_threads_pool``
    -> ``_threads/_pool.py``), at any depth; ``store`` stands for ``stores``."""
    found: dict[str, Path] = {}
    for path in package.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            found[path.name.lstrip("_")] = path
        elif path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
            found[path.stem.lstrip("_")] = path
    found.update({alias: found[real] for alias, real in _TEST_ALIASES.items() if real in found})
    if name in found:
        return found[name]
    for folder, path in found.items():
        if path.is_dir() and name.startswith(folder + "_"):
            inner = _tested_module(name[len(folder) + 1:], path)
            if inner is not None:
                return inner
    return None


def _misnamed_tests(tests: Path, package: Path = PKG) -> tuple[list[str], list[str]]:
    """(test files named for no module and not listed as cross-cutting, list entries that
    name a module or no file)."""
    names = sorted(p.stem for p in tests.glob("test_*.py"))
    misnamed = [n for n in names if n not in _CROSS_CUTTING and _tested_module(n[len("test_"):], package) is None]
    stale = sorted(n for n in _CROSS_CUTTING if n in names and _tested_module(n[len("test_"):], package) is not None)
    return misnamed, stale


def test_each_test_file_is_named_for_the_module_it_tests():
    """``tests/test_<folder>_<module>.py`` tests ``agentkit/<folder>/<module>.py`` (or
    ``_<module>.py``), ``tests/test_<module>.py`` a top-level module or a package; the
    files that test no one module are listed in ``_CROSS_CUTTING``."""
    misnamed, stale = _misnamed_tests(Path(__file__).resolve().parent)
    assert misnamed == [], (
        f"test files named for no agentkit module: {misnamed}; name each for the module it tests "
        f"(tests/test_<folder>_<module>.py), or list it in _CROSS_CUTTING with why"
    )
    assert stale == [], f"_CROSS_CUTTING entries named for a module: remove them from the list: {stale}"


def test_the_naming_check_resolves_folders_and_sees_a_stray_name(tmp_path):
    """The checker itself, on a made-up package and test folder."""
    pkg = tmp_path / "agentkit"
    for rel in ("__init__.py", "cancel.py", "_json.py", "stores/__init__.py", "stores/_scan.py",
                "celery/__init__.py", "celery/_jobs.py", "_threads/__init__.py", "_threads/_pool.py",
                "adapters/__init__.py", "adapters/langchain/__init__.py", "adapters/langchain/chat_model.py"):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text("")
    cases = {"cancel": "cancel.py", "json": "_json.py", "store_scan": "stores/_scan.py", "stores": "stores",
             "celery_jobs": "celery/_jobs.py", "threads_pool": "_threads/_pool.py",
             "adapters_langchain_chat_model": "adapters/langchain/chat_model.py",
             "adapters_langchain": "adapters/langchain"}
    for name, rel in cases.items():
        assert _tested_module(name, pkg) == pkg / rel, name
    for name in ("scheduling", "celery_turns", "store_scan_more", "jobs"):
        assert _tested_module(name, pkg) is None, name
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("test_cancel", "test_celery_jobs", "test_scheduling", "test_docs", "test_mcp_http"):
        (tests / f"{name}.py").write_text("")
    (pkg / "mcp").mkdir()
    (pkg / "mcp" / "__init__.py").write_text("")
    (pkg / "mcp" / "http.py").write_text("")  # a listed name that now names a module
    assert _misnamed_tests(tests, pkg) == (["test_scheduling"], ["test_mcp_http"])
