"""The evals extra (agentkit/evals/_require.py): ``import agentkit.evals`` works without
pydantic-evals; using one of its pydantic-evals names raises MissingDependencyError naming
the install command."""

from __future__ import annotations

import subprocess
import sys


def test_without_pydantic_evals_the_package_imports_and_a_name_says_what_to_install():
    code = (
        "import sys; sys.modules['pydantic_evals'] = None\n"
        "import agentkit.evals\n"
        "from agentkit.evals import AgentOutput\n"  # plain data: no pydantic-evals needed
        "from agentkit.errors import MissingDependencyError\n"
        "for name in ('dataset_from_sessions', 'agent_task', 'ToolCalled'):\n"
        "    try:\n"
        "        getattr(agentkit.evals, name)\n"
        "    except MissingDependencyError as exc:\n"
        "        assert isinstance(exc, ImportError) and exc.extra == 'evals', exc\n"
        "        print(exc)\n"
        "    else:\n"
        "        raise AssertionError(name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0] == (
        "agentkit.evals (evaluations on pydantic-evals) needs the 'pydantic-evals' package, which is not "
        "installed. Install it with: pip install 'sync-agentkit[evals]' (in a checkout of agentkit: "
        "pip install -e '.[evals]')"
    )


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    import agentkit.evals

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        agentkit.evals.nope  # noqa: B018
