"""The public surface: documented, keyword-only, and free of optional imports."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import agentkit


def test_all_names_exist_and_have_docstrings():
    for name in agentkit.__all__:
        obj = getattr(agentkit, name)
        if name == "__version__":
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"agentkit.{name} has no docstring"


# API-DECISIONS: ToolCall(name=..., input=...) in scripts; the positional form stays as
# a convenience. Every other public data type is keyword-only.
_POSITIONAL_CONVENIENCE = {"ToolCall": {"name", "input"}}


def test_public_dataclasses_are_keyword_only_and_frozen():
    for name in agentkit.__all__:
        obj = getattr(agentkit, name)
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            params = dataclasses.fields(obj)
            allowed = _POSITIONAL_CONVENIENCE.get(name, set())
            positional = {f.name for f in params if f.init and not f.kw_only}
            assert positional == allowed, f"{name} has positional fields {positional - allowed}"
            init = vars(obj).get("__init__")
            assert init is None or init.__code__.co_filename == "<string>", f"{name} hand-writes __init__"
            assert obj.__dataclass_params__.frozen, f"{name} is not frozen"


def test_importing_agentkit_imports_no_optional_sdk():
    code = (
        "import sys, agentkit, agentkit.models, agentkit.tools, agentkit.stores;"
        "bad = [m for m in ('openai', 'anthropic', 'mcp', 'langchain_core', 'requests') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_public_name_is_documented():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text() + "".join(p.read_text() for p in (root / "docs").glob("*.md"))
    missing = [n for n in agentkit.__all__ if n != "__version__" and not re.search(rf"\b{re.escape(n)}\b", text)]
    assert missing == [], f"public names no page of docs/ or the README mentions: {missing}"
