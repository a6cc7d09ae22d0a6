"""scripts/mutation.py, the offline mutation tester: which mutants it makes, and one real
run against a module's own tests in a throwaway copy of the checkout."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("mutation", REPO / "scripts" / "mutation.py")
assert _spec is not None and _spec.loader is not None
mutation = importlib.util.module_from_spec(_spec)
sys.modules["mutation"] = mutation
_spec.loader.exec_module(mutation)

SAMPLE = '''"""Docstring: never mutated."""
from __future__ import annotations

__all__ = ["f"]


def f(a: int, b: list[int] | None = None) -> bool:
    """Also a docstring."""
    label = f"{a + 1}"
    total = a + 2
    for x in b or []:
        if x > 0 and not x == 3:
            break
        total -= x
    return total >= 10
'''


def test_mutants_cover_each_kind_and_leave_docstrings_annotations_and_fstrings_alone(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    mutants = mutation.make_mutants(path)
    kinds = {m.what for m in mutants}
    for expected in ("Gt -> GtE", "Gt -> LtE", "Eq -> NotEq", "GtE -> Lt", "and -> or", "or -> and",
                     "not x -> x", "Add -> Sub", "augmented Sub -> Add", "2 -> 3", "break -> continue",
                     "return value -> return None", "for statement -> pass", "assign statement -> pass"):
        assert expected in kinds, expected
    original = ast.dump(ast.parse(SAMPLE))
    for m in mutants:
        assert ast.dump(ast.parse(m.source)) != original
        assert '"""Docstring: never mutated."""' in m.source and '__all__ = ["f"]' in m.source
        assert "b: list[int] | None = None) -> bool:" in m.source
        assert 'label = f"{a + 1}"' in m.source or m.what == "assign statement -> pass"
        assert m.diff.startswith("--- a/") and "\n-" in m.diff and "\n+" in m.diff
    assert [m.number for m in mutants] == list(range(1, len(mutants) + 1))
    assert len({m.source for m in mutants}) == len(mutants)


def test_each_module_has_its_own_test_file():
    agentkit = REPO / "agentkit"
    assert mutation.default_tests(agentkit / "cancel.py") == REPO / "tests" / "test_cancel.py"
    assert mutation.default_tests(agentkit / "tools" / "runner.py") == REPO / "tests" / "test_tools_runner.py"
    assert mutation.default_tests(agentkit / "stores" / "_scan.py") == REPO / "tests" / "test_store_scan.py"


def test_a_run_reports_killed_and_survived_mutants_and_leaves_the_checkout_alone():
    module = REPO / "agentkit" / "cancel.py"
    before = module.read_bytes()
    listed = subprocess.run([sys.executable, str(REPO / "scripts" / "mutation.py"), str(module), "--list"],
                            capture_output=True, text=True, check=True).stdout
    assert "#1 line " in listed
    # mutant 1 (a statement of __init__ replaced by pass) breaks every token: killed
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "mutation.py"), str(module), "--only", "1",
         "--tests", "tests/test_cancel.py", "--timeout", "300"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "agentkit/cancel.py: 1 mutants: 1 killed, 0 survived, 0 timed out; score 100%" in proc.stdout
    assert module.read_bytes() == before
