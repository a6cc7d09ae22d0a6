"""Skills in the agentskills.io format: packaged instructions an agent loads on demand.

A skill is a folder holding ``SKILL.md`` — YAML front matter with ``name`` and
``description``, then Markdown instructions — and any files the instructions refer to
(scripts, references, templates)::

    skills/
      pdf-forms/
        SKILL.md
        reference/fields.md

:func:`load_skills` reads every ``<directory>/<name>/SKILL.md`` into :class:`Skills`.
``skills=`` (a per-generation option) shows the model only each skill's name and
description; the model reads a skill's instructions with the ``load_skill`` tool and its
bundled files with ``read_skill_file`` when a task calls for it (see docs/skills.md).

The rules checked (from the agentskills.io specification): ``name`` is 1-64 characters
of ``a-z``, ``0-9`` and ``-``, neither starting nor ending with ``-`` nor holding
``--``, and equal to the skill's folder name; ``description`` is a non-empty string of at
most 1024 characters. Other front-matter fields (``license``, ``compatibility``,
``metadata``, ``allowed-tools``...) are kept in :attr:`Skill.front_matter`, not
interpreted. The front matter is parsed with PyYAML's safe loader.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import AccessDenied, ConfigurationError
from ..execution.local import _within

__all__ = ["MAX_SKILL_FILE_BYTES", "SKILL_FILE", "Skill", "Skills", "load_skills"]

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""
MAX_SKILL_FILE_BYTES = 262_144
"""The most of a bundled file ``read_skill_file`` returns (a longer file is cut, with a note)."""
_MAX_SKILL_MD_BYTES = 1_048_576
_MAX_LISTED_FILES = 500
_NAME = re.compile(r"[a-z0-9-]{1,64}")
_MAX_DESCRIPTION = 1024
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid skill name, or None when it is."""
    if not isinstance(name, str):
        return f"the name must be a string, not {type(name).__name__}"
    if not _NAME.fullmatch(name):
        return f"name {name!r} must be 1-64 characters of a-z, 0-9 and '-'"
    if name.startswith("-") or name.endswith("-"):
        return f"name {name!r} must not start or end with '-'"
    if "--" in name:
        return f"name {name!r} must not contain '--'"
    return None


@dataclass(frozen=True, kw_only=True)
class Skill:
    """One skill: its name, description and instructions, and where its files are.

    Built by :func:`load_skills`; build one yourself for instructions that live in code
    (``path=None``: no bundled files)."""

    name: str
    """1-64 characters of ``a-z0-9-`` (no leading, trailing or double ``-``)."""
    description: str
    """What the skill does and when to use it: what the model sees before loading it."""
    instructions: str
    """The Markdown after the front matter: what ``load_skill`` returns."""
    path: str | None = None
    """The skill's folder (canonical), or None for a skill without files."""
    files: tuple[str, ...] = ()
    """Its bundled files, relative ``/``-separated paths, sorted (``SKILL.md`` and hidden
    files left out)."""
    front_matter: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Every front-matter field as parsed (``license``, ``metadata``, ``allowed-tools``...)."""

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem is not None:
            raise ConfigurationError(f"invalid skill: {problem}")
        desc = self.description
        if not isinstance(desc, str) or not desc.strip():
            raise ConfigurationError(f"skill {self.name!r}: description must be a non-empty string")
        if len(desc) > _MAX_DESCRIPTION:
            raise ConfigurationError(
                f"skill {self.name!r}: description is {len(desc)} characters; at most {_MAX_DESCRIPTION} are allowed"
            )
        if not isinstance(self.instructions, str):
            raise ConfigurationError(f"skill {self.name!r}: instructions must be a string")
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "front_matter", MappingProxyType(dict(self.front_matter)))

    def read_file(self, path: str, *, max_bytes: int = MAX_SKILL_FILE_BYTES) -> str:
        """The text of bundled file ``path`` (relative to the skill's folder).

        Refused: absolute paths, ``..``, a path that resolves (through a symlink) outside
        the folder, anything but a regular file, and a file that is not UTF-8 text
        (:class:`~agentkit.errors.AccessDenied` for the escapes, ``FileNotFoundError``,
        ``ValueError``). Only the first ``max_bytes`` are returned, with a note saying so.
        """
        if self.path is None:
            raise FileNotFoundError(errno.ENOENT, f"skill {self.name!r} has no bundled files", path)
        real = _confined(self.path, path)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError(f"{path!r} is not a regular file of skill {self.name!r}")
            data = f.read(max_bytes + 1)
        cut = len(data) > max_bytes
        data = data[:max_bytes]
        if b"\x00" in data:
            raise ValueError(f"{path!r} is not a text file (it holds binary data); only text files can be read")
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
        except UnicodeDecodeError:
            raise ValueError(f"{path!r} is not a UTF-8 text file; only text files can be read") from None
        if cut:
            text += f"\n[file longer than {max_bytes} bytes: only the first {max_bytes} bytes are shown]"
        return text


class Skills(Mapping[str, Skill]):
    """Skills by name, in the order given (:func:`load_skills`: folder name order). Two
    skills with one name are a :class:`~agentkit.errors.ConfigurationError`."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        for s in skills:
            if not isinstance(s, Skill):
                raise ConfigurationError(f"Skills holds Skill objects, not {type(s).__name__}")
            if s.name in self._skills:
                raise ConfigurationError(f"two skills are named {s.name!r}; skill names must be unique")
            self._skills[s.name] = s
        self._index: str | None = None

    def __getitem__(self, name: str) -> Skill:
        return self._skills[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def __repr__(self) -> str:
        return f"Skills({list(self._skills)!r})"

    def index(self) -> str:
        """The section added to the system prompt: how to use skills, then one line per
        skill, ``- name: description``. The same skills always give the same text."""
        if self._index is None:
            lines = [
                "# Skills",
                "Skills hold instructions for particular tasks. When a task matches a skill's "
                "description, call load_skill with its name first and follow the instructions it "
                "returns; read_skill_file reads the files a skill bundles.",
                "",
            ]
            lines += [f"- {s.name}: {' '.join(s.description.split())}" for s in self._skills.values()]
            self._index = "\n".join(lines)
        return self._index


def load_skills(directory: str | os.PathLike[str]) -> Skills:
    """Read every skill in ``directory``: each folder ``<directory>/<name>/`` holding a
    ``SKILL.md`` is one skill (folders without one, and hidden ones, are skipped).

    A malformed skill raises :class:`~agentkit.errors.ConfigurationError` naming its
    ``SKILL.md`` and what is wrong: no front matter, YAML that does not parse, a missing
    or invalid ``name`` or ``description``, a name that differs from its folder's. So
    does a directory without any skill. Instructions are read now; bundled files when
    the model asks for them.
    """
    root = os.fspath(directory)
    if not os.path.isdir(root):
        raise ConfigurationError(f"skills directory {root!r} does not exist or is not a directory")
    if os.path.isfile(os.path.join(root, SKILL_FILE)):
        raise ConfigurationError(
            f"{root!r} is itself a skill (it holds {SKILL_FILE}); pass the directory that holds "
            f"skill folders (its parent) to load_skills"
        )
    skills = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        skill_md = os.path.join(entry.path, SKILL_FILE)
        if os.path.isfile(skill_md):
            skills.append(_load_one(entry.path, entry.name, skill_md))
    if not skills:
        raise ConfigurationError(
            f"no skills in {root!r}: each skill is a folder holding a {SKILL_FILE} "
            f"({os.path.join(root, '<name>', SKILL_FILE)})"
        )
    return Skills(skills)


def _load_one(folder: str, folder_name: str, skill_md: str) -> Skill:
    with open(skill_md, "rb") as f:
        raw = f.read(_MAX_SKILL_MD_BYTES + 1)
    if len(raw) > _MAX_SKILL_MD_BYTES:
        raise ConfigurationError(f"{skill_md}: larger than {_MAX_SKILL_MD_BYTES} bytes; keep SKILL.md short "
                                 f"and move details into bundled files")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{skill_md}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    meta, body = _split_front_matter(text, skill_md)
    name, description = meta.get("name"), meta.get("description")
    if name is None:
        raise ConfigurationError(f"{skill_md}: the front matter has no 'name' (add name: {folder_name})")
    problem = name_problem(name)
    if problem is not None:
        raise ConfigurationError(f"{skill_md}: {problem}")
    if name != folder_name:
        raise ConfigurationError(
            f"{skill_md}: name {name!r} differs from its folder name {folder_name!r}; a skill's "
            f"name must equal its folder's (rename one of them)"
        )
    if not isinstance(description, str) or not description.strip():
        raise ConfigurationError(
            f"{skill_md}: the front matter needs a non-empty 'description' string saying what the "
            f"skill does and when to use it"
        )
    real = os.path.realpath(folder)
    try:
        return Skill(name=name, description=description.strip(), instructions=body.strip(), path=real,
                     files=_bundled_files(real), front_matter=meta)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{skill_md}: {exc}") from None


def _split_front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """The parsed YAML between the opening ``---`` line and the closing ``---`` (or
    ``...``) line, and the text after it."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigurationError(
            f"{where}: no YAML front matter; SKILL.md must start with a '---' line, then "
            f"'name: ...' and 'description: ...', then a '---' line, then the instructions"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise ConfigurationError(f"{where}: the front matter is not closed; add a '---' line after it")
    import yaml

    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except RecursionError:
        raise ConfigurationError(f"{where}: the front matter nests too deeply to parse") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigurationError(f"{where}: the front matter is not valid YAML{at}: {problem}") from None
    if not isinstance(meta, dict):
        raise ConfigurationError(
            f"{where}: the front matter must be a mapping of fields (name: ..., description: ...), "
            f"not {type(meta).__name__}"
        )
    return meta, "".join(lines[end + 1:])


def _bundled_files(root: str) -> tuple[str, ...]:
    """The regular files under ``root`` (symlinks only when they stay inside it), hidden
    entries and the top ``SKILL.md`` left out; at most ``_MAX_LISTED_FILES``."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == SKILL_FILE or not os.path.isfile(full) or not _within(os.path.realpath(full), root):
                continue
            found.append(rel)
            if len(found) >= _MAX_LISTED_FILES:
                return tuple(sorted(found))
    return tuple(sorted(found))


def _confined(root: str, path: object) -> str:
    """The canonical path of ``path`` inside ``root``; AccessDenied for any way out."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ValueError(f"invalid path {path!r}: give a relative path like 'reference/guide.md'")
    parts = path.replace("\\", "/").split("/")
    if os.path.isabs(path) or path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        raise AccessDenied(f"access denied: {path!r} is absolute; give a path relative to the skill's folder")
    if ".." in parts:
        raise AccessDenied(f"access denied: {path!r} contains '..'; files outside the skill's folder cannot be read")
    real = os.path.realpath(os.path.join(root, *[p for p in parts if p not in ("", ".")]))
    if not _within(real, root):
        raise AccessDenied(f"access denied: {path!r} resolves through a symlink to a place outside the skill's folder")
    if real == root or os.path.isdir(real):
        raise IsADirectoryError(errno.EISDIR, f"{path!r} is a folder; name one of the skill's files", path)
    if not os.path.exists(real):
        raise FileNotFoundError(errno.ENOENT, f"skill file {path!r} does not exist", path)
    return real
