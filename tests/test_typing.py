"""What a user's type checker sees: tests/typing/user_code.py (``assert_type`` lines for
every front door, ``# type: ignore[code]`` on the calls that must be errors) passes
``mypy --strict`` with ``warn_unused_ignores``, so a result type that changes or an error
that stops happening fails here; and an editable install (the README's ``pip install -e
.``) is one a type checker outside the checkout finds, ``py.typed`` included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_CODE = ROOT / "tests" / "typing" / "user_code.py"


def _mypy(*args: str, cwd: Path, env: dict[str, str] | None = None, python: str = sys.executable):
    return subprocess.run(
        [python, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull, *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
    )


@pytest.fixture(scope="module")
def mypy_installed() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed: pip install -e '.[test]'")


def test_user_code_passes_mypy_strict(mypy_installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = _mypy("--warn-unused-ignores", str(USER_CODE), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_user_code_check_fails_when_a_result_type_or_an_expected_error_changes(mypy_installed, tmp_path):
    """The check can fail: a wrong ``assert_type`` and an ignore on a call that is no
    error are both reported."""
    code = USER_CODE.read_text()
    wrong = code.replace('assert_type(agent.run("hi", deps=deps).output, City)',
                         'assert_type(agent.run("hi", deps=deps).output, str)')
    wrong = wrong.replace('run_agent(model, "hi", max_stepz=3)  # type: ignore[call-overload]',
                          'run_agent(model, "hi", max_steps=3)  # type: ignore[call-overload]')
    assert wrong != code
    (tmp_path / "user_code.py").write_text(wrong)
    out = _mypy("--warn-unused-ignores", "user_code.py", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1
    assert 'Expression is of type "City", not "str"' in out.stdout
    assert 'Unused "type: ignore" comment' in out.stdout


def test_user_code_passes_pyright():
    """The same file under pyright (strict, unnecessary ignores are errors: pyproject's
    [tool.pyright])."""
    pyright = shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (pip install pyright, in the test extra): mypy checks the same file")
    out = subprocess.run([pyright, "--pythonpath", sys.executable], cwd=ROOT, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 errors" in out.stdout


USER_SCRIPT = textwrap.dedent('''
    from agentkit import Agent, ScriptedModel
    from typing_extensions import assert_type

    agent = Agent(ScriptedModel(["hi"]), output_type=int)
    assert_type(agent.run("hi").output, int)
''')


def test_an_editable_install_is_seen_by_mypy_outside_the_checkout(mypy_installed, tmp_path):
    """The README's ``pip install -e .`` into a fresh venv, then ``mypy --strict`` on a
    user's script in another directory (this interpreter's mypy, pointed at the venv's
    python as an editor's checker is): agentkit is found, with its types. The venv sees
    this interpreter's packages (agentkit's dependencies) through a ``.pth`` file."""
    import site

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    venv_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(venv_site, "_host_packages.pth").write_text("\n".join(ours) + "\n")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "-q", "-e", str(ROOT)],
        capture_output=True, text=True, timeout=900,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    app = tmp_path / "app"
    app.mkdir()
    (app / "user_app.py").write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([python, "-c", "import agentkit; print(agentkit.__file__)"], cwd=app, env=env,
                           capture_output=True, text=True, timeout=300)
    assert found.stdout.strip() == str(ROOT / "agentkit" / "__init__.py"), found.stderr
    out = _mypy("--python-executable", python, "user_app.py", cwd=app, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_typed_example_of_docs_agents_passes_mypy_strict(mypy_installed, tmp_path):
    """docs/agents.md's "What a type checker sees" block (tests/test_docs.py runs it) is
    what it says: code mypy --strict accepts, where ``result.output`` is a City."""
    page = (ROOT / "docs" / "agents.md").read_text()
    section = page.split("### What a type checker sees", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.py").write_text(code + "\nfrom typing_extensions import assert_type\n"
                                         "assert_type(city, City)\ncity.population  # type: ignore[attr-defined]\n")
    out = _mypy("--warn-unused-ignores", "example.py", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_types_user_code_asserts_are_the_values_at_run_time():
    """What tests/typing/user_code.py tells a type checker holds when the code runs:
    without an ``output_type`` the output is None; with one it is an instance of it."""
    from pydantic import BaseModel

    from agentkit import Agent, ScriptedModel, Session, ToolCall, run_agent

    class City(BaseModel):
        name: str

    def answer() -> ToolCall:
        return ToolCall(name="final_answer", input={"name": "Lyon"})

    assert run_agent(ScriptedModel(["hi"]), "hi").output is None
    assert Agent(ScriptedModel(["hi"])).run("hi").output is None
    with Session(ScriptedModel(["hi"])) as session:
        assert session.ask("hi").output is None
    assert isinstance(run_agent(ScriptedModel([answer()]), "hi", output_type=City).output, City)
    assert isinstance(Agent(ScriptedModel([answer()]), output_type=City).run("hi").output, City)
    agent = Agent(ScriptedModel([answer(), "plain"]), output_type=City)
    assert isinstance(agent.run("hi").output, City)
    assert agent.with_options(output_type=None).run("hi").output is None
    with Session(ScriptedModel([answer()]), output_type=City) as session:
        assert isinstance(session.ask("hi").output, City)
    with Session(ScriptedModel([answer(), "plain"])) as session:
        assert isinstance(session.ask("hi", output_type=City).output, City)
        assert session.ask("again").output is None


# processes: tox runs them on py311. A cold `mypy --strict` over agentkit/ takes minutes of CPU
# on a loaded 2-core machine: the subprocess timeouts bound each check, not the default 120 s.
pytestmark = [pytest.mark.processes, pytest.mark.timeout(900)]
