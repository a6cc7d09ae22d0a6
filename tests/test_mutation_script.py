"""scripts/mutation.py, the offline mutation tester: which mutants it makes, and one real
run against a module's own tests in a throwaway copy of the checkout."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

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
    scheduling = mutation.default_tests(agentkit / "session" / "_scheduling.py")
    assert scheduling == REPO / "tests" / "test_session_scheduling.py"
    # every recorded module is measured with its own test file, under the name the rule gives
    for module, entry in mutation.load_record().items():
        assert entry["tests"] == [str(mutation.default_tests(REPO / module).relative_to(REPO))], module


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


# -- the recorded figures and the `mutation` tox env -----------------------------------


def test_the_docs_table_shows_the_recorded_figures_of_the_core_modules():
    modules = mutation.load_record()
    assert {"agentkit/context/_projection.py", "agentkit/cancel.py", "agentkit/tools/runner.py",
            "agentkit/session/_scheduling.py", "agentkit/stores/_records.py",
            "agentkit/stores/_scan.py"} <= set(modules)
    docs = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    # made by `scripts/mutation.py --record`; a hand edit of either side fails here
    assert mutation.docs_table(docs) == mutation.table(modules)
    for module, entry in modules.items():
        assert entry["mutants"] == entry["killed"] + entry["timed_out"] + entry["survived"], module
        assert entry["score"] == round(mutation.score(entry["killed"], entry["timed_out"], entry["mutants"]), 1)
        assert len(entry["survivors"]) == entry["survived"], module
        assert all((REPO / t).is_file() for t in entry["tests"]), module


def test_the_tox_env_runs_the_check_and_is_in_the_default_env_list():
    import configparser

    tox = configparser.ConfigParser()
    tox.read(REPO / "tox.ini")
    assert "mutation" in [e.strip() for e in tox["tox"]["env_list"].split(",")]
    assert "scripts/mutation.py --check" in tox["testenv:mutation"]["commands"]


def test_a_fingerprint_covers_the_module_and_its_tests_and_a_sample_is_fixed(tmp_path):
    tests = ["tests/test_cancel.py"]
    first = mutation.fingerprint("agentkit/cancel.py", tests)
    assert first == mutation.fingerprint("agentkit/cancel.py", tests)
    assert first != mutation.fingerprint("agentkit/cancel.py", ["tests/test_cancel.py", "tests/test_json.py"])
    assert first != mutation.fingerprint("agentkit/context/_projection.py", tests)
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    mutants = mutation.make_mutants(path)
    chosen = mutation.sample(mutants, 5)
    assert len(chosen) == 5 and chosen == mutation.sample(mutation.make_mutants(path), 5)
    assert [m.number for m in chosen] == sorted(m.number for m in chosen)
    assert mutation.sample(mutants, len(mutants) + 1) == mutants


def _check(record, *args, ci=False):
    import os

    env = {k: v for k, v in os.environ.items() if k != "AGENTKIT_CI"}
    if ci:
        env["AGENTKIT_CI"] = "1"
    return subprocess.run([sys.executable, str(REPO / "scripts" / "mutation.py"), "--check", "--record-file",
                           str(record), *args], capture_output=True, text=True, timeout=600, env=env)


def _record(path, **entry):
    import json

    tests = ["tests/test_cancel.py"]
    path.write_text(json.dumps({"floor": 90.0, "modules": {"agentkit/cancel.py": {
        "tests": tests, "sha256": mutation.fingerprint("agentkit/cancel.py", tests),
        "mutants": 50, "killed": 50, "timed_out": 0, "survived": 0, "score": 100.0, "survivors": [],
        "measured": "a day, Python 3.11, 30 s per mutant", **entry}}}))


def test_the_check_trusts_a_current_record_and_fails_one_under_the_floor(tmp_path):
    record = tmp_path / "scores.json"
    _record(record)
    proc = _check(record, ci=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "agentkit/cancel.py: recorded 100% of 50 mutants (unchanged since: a day" in proc.stdout
    _record(record, killed=40, survived=10, score=80.0)
    proc = _check(record)
    assert proc.returncode == 1 and "FAIL: agentkit/cancel.py: recorded 80% < 90%" in proc.stdout


@pytest.mark.timeout(900)  # two real (sampled) mutation runs
def test_the_check_remeasures_a_changed_module_on_a_sample_and_ci_refuses_a_stale_record(tmp_path):
    record = tmp_path / "scores.json"
    _record(record, sha256="0" * 64)  # as if cancel.py or its tests changed since
    before = record.read_bytes()
    # a floor no score reaches: the sampled score fails it; outside CI a stale record alone does not
    proc = _check(record, "--sample", "1", "--floor", "101")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "agentkit/cancel.py: changed since its measurement; testing 1 sampled mutants" in proc.stdout
    assert "agentkit/cancel.py: 1 mutants: 1 killed, 0 survived" in proc.stdout
    assert "FAIL: agentkit/cancel.py: 100% of 1 sampled mutants caught < 101%" in proc.stdout
    assert "python3 scripts/mutation.py --record --jobs 2" in proc.stdout
    assert "FAIL: the recorded figures" not in proc.stdout
    assert record.read_bytes() == before  # the check never writes
    proc = _check(record, "--sample", "1", ci=True)  # CI: the figures on main must be current
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL: the recorded figures of agentkit/cancel.py are out of date" in proc.stdout
    assert "sampled mutants caught <" not in proc.stdout


def test_a_full_run_becomes_a_record_entry_and_the_docs_table(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    mutants = mutation.make_mutants(path)[:4]
    outcomes = [mutation.Outcome(mutant=m, status=s, seconds=0.1)
                for m, s in zip(mutants, ["killed", "killed", "timeout", "survived"], strict=True)]
    entry = mutation.entry_for("agentkit/cancel.py", ["tests/test_cancel.py"], outcomes, 30)
    assert entry["sha256"] == mutation.fingerprint("agentkit/cancel.py", ["tests/test_cancel.py"])
    got = (entry["mutants"], entry["killed"], entry["timed_out"], entry["survived"], entry["score"])
    assert got == (4, 2, 1, 1, 75.0)
    assert entry["survivors"] == [f"line {mutants[3].line}: {mutants[3].what}"]
    docs = tmp_path / "page.md"
    docs.write_text(f"# Page\n\n{mutation.TABLE_START}\n| old |\n{mutation.TABLE_END}\n\nAfter.\n")
    mutation.write_docs_table({"agentkit/cancel.py": entry}, docs)
    text = docs.read_text()
    assert "| old |" not in text and text.endswith(f"{mutation.TABLE_END}\n\nAfter.\n")
    assert mutation.docs_table(text) == (
        "| module | its tests | mutants | caught | measured |\n|---|---|---|---|---|\n"
        "| `agentkit/cancel.py` | `tests/test_cancel.py` | 4 | 75% (2 killed, 1 timed out, 1 survived) "
        f"| {entry['measured']} |")
