"""Skills: loading agentskills.io folders, the index the model sees, load_skill and
read_skill_file through real generations, and what is refused."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from _tools import add

from agentkit import (
    AccessDenied,
    ConfigurationError,
    FileEventStore,
    ScriptedModel,
    Session,
    ToolCall,
    load_skills,
    run_agent,
    tool,
)
from agentkit.events import ControlEvent, ToolResultEvent
from agentkit.tools import Skill, Skills


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def _skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    _write(root / "pdf-forms" / "SKILL.md", """
        ---
        name: pdf-forms
        description: >
          Fill in PDF forms. Use when the user
          mentions a PDF form.
        license: MIT
        metadata:
          author: example
        ---
        # Filling PDF forms

        1. Read reference/fields.md for the field names.
        2. Fill every field.
    """)
    _write(root / "pdf-forms" / "reference" / "fields.md", "name, date, signature\n")
    _write(root / "pdf-forms" / "scripts" / "fill.py", "print('filled')\n")
    _write(root / "pdf-forms" / ".hidden", "secret\n")
    _write(root / "release-notes" / "SKILL.md", """
        ---
        name: release-notes
        description: "Write release notes from a list of merged changes."
        ---
        Group the changes by kind; one line each.
    """)
    (root / "not-a-skill").mkdir()  # no SKILL.md: skipped
    return root


def _results(events: tuple[object, ...]) -> list[str]:
    return [e.output.as_text() for e in events if isinstance(e, ToolResultEvent)]


# -- loading --------------------------------------------------------------------------


def test_load_skills_reads_front_matter_instructions_and_files(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))
    assert list(skills) == ["pdf-forms", "release-notes"]
    pdf = skills["pdf-forms"]
    assert pdf.description == "Fill in PDF forms. Use when the user mentions a PDF form."
    assert pdf.instructions.startswith("# Filling PDF forms")
    assert pdf.files == ("reference/fields.md", "scripts/fill.py")  # SKILL.md and hidden files left out
    assert pdf.front_matter["license"] == "MIT" and pdf.front_matter["metadata"] == {"author": "example"}
    assert pdf.path == os.path.realpath(tmp_path / "skills" / "pdf-forms")
    assert skills["release-notes"].files == ()
    assert skills.index().splitlines()[-2:] == [
        "- pdf-forms: Fill in PDF forms. Use when the user mentions a PDF form.",
        "- release-notes: Write release notes from a list of merged changes.",
    ]


@pytest.mark.parametrize(
    ("skill_md", "message"),
    [
        ("# no front matter\n", "no YAML front matter"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: [unclosed\n---\n", "not valid YAML at line"),
        ("---\n- a list\n---\n", "must be a mapping"),
        ("---\ndescription: d\n---\n", "has no 'name'"),
        ("---\nname: bad\ndescription: ''\n---\n", "non-empty 'description'"),
        ("---\nname: bad\ndescription: 12\n---\n", "non-empty 'description'"),
        ("---\nname: Bad\ndescription: d\n---\n", "1-64 characters of a-z"),
        ("---\nname: -bad\ndescription: d\n---\n", "must not start or end"),
        ("---\nname: b--ad\ndescription: d\n---\n", "must not contain '--'"),
        ("---\nname: other\ndescription: d\n---\n", "differs from its folder name 'bad'"),
        ("---\nname: bad\ndescription: " + "x" * 1025 + "\n---\n", "at most 1024"),
    ],
)
def test_a_malformed_skill_is_an_error_naming_its_file(tmp_path, skill_md, message):
    folder = "bad" if "Bad" not in skill_md and "-bad" not in skill_md and "b--ad" not in skill_md else None
    root = tmp_path / "skills"
    name = folder or skill_md.split("name: ")[1].split("\n")[0]
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(skill_md)
    with pytest.raises(ConfigurationError, match=message) as info:
        load_skills(root)
    assert str(path) in str(info.value)


def test_hostile_front_matter_is_a_configuration_error(tmp_path):
    path = tmp_path / "skills" / "deep" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: deep\ndescription: d\nx: " + "[" * 100_000 + "]" * 100_000 + "\n---\n")
    with pytest.raises(ConfigurationError, match="nests too deeply"):
        load_skills(tmp_path / "skills")
    path.write_bytes(b"---\nname: deep\ndescription: \xff\n---\n")
    with pytest.raises(ConfigurationError, match="not UTF-8"):
        load_skills(tmp_path / "skills")
    path.write_text("---\nname: deep\ndescription: d\n---\n" + "x" * 1_048_576)
    with pytest.raises(ConfigurationError, match="larger than"):
        load_skills(tmp_path / "skills")


def test_a_name_longer_than_64_characters_is_refused():
    with pytest.raises(ConfigurationError, match="1-64 characters"):
        Skill(name="a" * 65, description="d", instructions="")


def test_directories_without_skills_and_single_skill_folders_are_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_skills(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="no skills in"):
        load_skills(tmp_path / "empty")
    root = _skills_dir(tmp_path)
    with pytest.raises(ConfigurationError, match="is itself a skill"):
        load_skills(root / "pdf-forms")


def test_two_skills_with_one_name_are_refused():
    one = Skill(name="a", description="first", instructions="")
    with pytest.raises(ConfigurationError, match="two skills are named 'a'"):
        Skills([one, Skill(name="a", description="second", instructions="")])


# -- through a generation --------------------------------------------------------------


def test_the_model_sees_the_index_and_loads_a_skill_and_reads_its_file(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))
    model = ScriptedModel([
        ToolCall(name="load_skill", input={"name": "pdf-forms"}),
        ToolCall(name="read_skill_file", input={"name": "pdf-forms", "path": "reference/fields.md"}),
        "done",
    ])
    with Session(model, system="You help with documents.", skills=skills) as session:
        session.push_user_message("fill the form")
        result = session.generate()
    assert result.text == "done"
    first = model.requests[0]
    assert first.system.startswith("You help with documents.\n\n# Skills")
    assert "- pdf-forms: Fill in PDF forms." in first.system
    assert [t.name for t in first.tools] == ["load_skill", "read_skill_file"]
    loaded, read = _results(result.events)
    assert loaded.startswith("# Filling PDF forms")
    assert "- reference/fields.md" in loaded and "- scripts/fill.py" in loaded
    assert read == "name, date, signature\n"
    # the model's second request carries the instructions as a tool result
    assert "Fill every field." in str(model.requests[1].messages[-1].content)
    activated = [e for e in result.events if isinstance(e, ControlEvent) and e.action == "skill-activated"]
    assert [e.data["name"] for e in activated] == ["pdf-forms"]


def test_skills_work_beside_the_sessions_tools_and_through_run_agent(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))
    model = ScriptedModel([ToolCall(name="load_skill", input={"name": "release-notes"}), "ok"])
    result = run_agent(model, "notes please", tools=[add], skills=skills)
    assert [t.name for t in model.requests[0].tools] == ["add", "load_skill", "read_skill_file"]
    assert model.requests[0].system.startswith("# Skills")
    assert result.tool_calls[0].output.as_text().startswith("Group the changes by kind")
    assert "bundles no files" in result.tool_calls[0].output.as_text()


def test_skills_given_to_one_generate_only(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))
    model = ScriptedModel(["plain", "with skills", "plain again"])
    with Session(model) as session:
        session.ask("a")
        session.ask("b", skills=skills)
        session.ask("c")
    assert [r.tools for r in model.requests][0] == () and model.requests[0].system is None
    assert "# Skills" in model.requests[1].system and len(model.requests[1].tools) == 2
    assert model.requests[2].tools == () and model.requests[2].system is None


def test_activation_is_recorded_once_per_generation_and_durably(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))
    store = FileEventStore(tmp_path / "store")
    load = ToolCall(name="load_skill", input={"name": "pdf-forms"})
    model = ScriptedModel([[load, load], "ok", load, "ok"])
    with Session(model, store=store, session_id="s", skills=skills) as session:
        session.ask("one")
        session.ask("two")
    reopened = store.load("s")
    assert reopened is not None
    activated = [e for e in reopened.events if isinstance(e, ControlEvent) and e.action == "skill-activated"]
    assert [e.data["name"] for e in activated] == ["pdf-forms", "pdf-forms"]  # once in each generation


# -- what is refused --------------------------------------------------------------------


def test_escapes_and_unknown_names_become_error_results_the_model_reads(tmp_path):
    root = _skills_dir(tmp_path)
    outside = _write(tmp_path / "secret.txt", "top secret\n")
    os.symlink(outside, root / "pdf-forms" / "link-out.txt")
    os.symlink(root / "pdf-forms" / "reference" / "fields.md", root / "pdf-forms" / "link-in.md")
    (root / "pdf-forms" / "blob.bin").write_bytes(b"\x00\x01\x02")
    (root / "pdf-forms" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    skills = load_skills(root)
    assert "link-in.md" in skills["pdf-forms"].files and "link-out.txt" not in skills["pdf-forms"].files
    attempts = {
        "../release-notes/SKILL.md": "contains '..'",
        str(outside): "is absolute",
        "/etc/passwd": "is absolute",
        "link-out.txt": "outside the skill's folder",
        "reference": "is a folder",
        "nope.md": "does not exist",
        "blob.bin": "not a text file",
        "latin1.txt": "not a UTF-8 text file",
    }
    calls = [ToolCall(name="read_skill_file", input={"name": "pdf-forms", "path": p}) for p in attempts]
    calls += [
        ToolCall(name="read_skill_file", input={"name": "pdf-forms", "path": "link-in.md"}),
        ToolCall(name="load_skill", input={"name": "no-such-skill"}),
    ]
    model = ScriptedModel([calls, "ok"])
    result = run_agent(model, "try", skills=skills)
    outputs = [r.output for r in result.tool_calls]
    for (path, expected), out in zip(attempts.items(), outputs[:len(attempts)], strict=True):
        assert out.is_error and expected in out.as_text(), (path, out.as_text())
    assert "top secret" not in str([o.as_text() for o in outputs])
    assert outputs[-2].as_text() == "name, date, signature\n"  # a symlink inside the folder is fine
    assert outputs[-1].is_error and "no-such-skill" in outputs[-1].as_text()


def test_read_file_refuses_escapes_directly(tmp_path):
    skill = load_skills(_skills_dir(tmp_path))["pdf-forms"]
    with pytest.raises(AccessDenied):
        skill.read_file("reference/../../release-notes/SKILL.md")
    with pytest.raises(AccessDenied):
        skill.read_file("C:/Windows/win.ini")
    with pytest.raises(ValueError):
        skill.read_file("")
    assert skill.read_file("./reference//fields.md") == "name, date, signature\n"
    with pytest.raises(FileNotFoundError):
        Skill(name="inline", description="d", instructions="i").read_file("x.md")


def test_a_long_file_is_cut_with_a_note_and_never_mid_character(tmp_path):
    root = _skills_dir(tmp_path)
    (root / "pdf-forms" / "long.md").write_text("é" * 100)  # 200 bytes
    skill = load_skills(root)["pdf-forms"]
    text = skill.read_file("long.md", max_bytes=11)
    assert text.startswith("é" * 5 + "\n[file longer than 11 bytes")


def test_a_user_tool_named_like_a_skill_tool_is_a_configuration_error(tmp_path):
    skills = load_skills(_skills_dir(tmp_path))

    @tool
    def load_skill(name: str) -> str:
        """Mine."""
        return name

    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match="'load_skill', the name of a built-in tool skills= adds"):
        Session(model, tools=[load_skill], skills=skills)
    with Session(model, tools=[load_skill]) as session, pytest.raises(ConfigurationError, match="load_skill"):
        session.generate(skills=skills)
    assert model.requests == []


def test_skills_must_be_a_skills_object():
    with pytest.raises(ConfigurationError, match=r"skills must be a Skills \(from load_skills"):
        Session(ScriptedModel(["x"]), skills=["pdf-forms"])


def test_an_empty_skills_adds_nothing():
    model = ScriptedModel(["ok"])
    run_agent(model, "hi", system="s", skills=Skills())
    assert model.requests[0].system == "s" and model.requests[0].tools == ()


def test_the_skill_tools_are_read_only_so_a_read_only_policy_lets_them_run(tmp_path):
    from agentkit import ApprovalPolicy

    skills = load_skills(_skills_dir(tmp_path))
    model = ScriptedModel([ToolCall(name="load_skill", input={"name": "release-notes"}), "ok"])
    result = run_agent(model, "x", skills=skills, approval=ApprovalPolicy(mode="read-only"))
    assert result.finish_reason == "stop" and not result.tool_calls[0].output.is_error
