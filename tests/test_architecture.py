"""The import graph follows docs/architecture.md: no cycles, no layer importing a higher
one. The layer table is parsed from the page, so the page and this test cannot drift."""

from __future__ import annotations

import ast
import fnmatch
import re
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


def test_there_is_no_import_cycle():
    """Module-level imports only: a function-level import runs after every module loaded."""
    modules = _modules()
    graph = {n: sorted({m for m, top in _imports(n, p, modules) if top}) for n, p in modules.items()}
    # a package imports its submodules; a submodule importing its own package's __init__ is
    # Python's normal loading order, not a cycle the code made
    for n in graph:
        graph[n] = [m for m in graph[n] if not n.startswith(m + ".")]
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def walk(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                walk(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            walk(n)
    assert cycles == []


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
    assert len(names) <= 80, f"{len(names)} names at the top level"
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
