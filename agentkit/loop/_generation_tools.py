"""The tools one generation offers beyond the session's: skills and tool search (private).

Built once per generation, and only when ``skills=`` or an active ``tool_search=`` asks
for it (the loop pays nothing otherwise). :class:`GenerationTools` holds

* the registry the generation runs calls against: the session's tools plus
  ``load_skill``/``read_skill_file`` (with ``skills``) and ``find_tools`` (with tool search
  above its threshold), all read-only;
* the system prompt with the skills index appended;
* with tool search, the set of tools the model sees: the pinned ones, the discovered
  ones (restored from the log's ``tools-discovered`` events, then grown by
  ``find_tools``), the one ``tool_choice`` names, and the built-ins. ``specs()`` is what
  each model request carries; it changes only when ``find_tools`` activates something.

Skill activations and discoveries are committed as ``skill-activated`` and
``tools-discovered`` control events (not shown to the model) by the tool call that made
them, so a session's log says which skills and tools a generation used.

The built-in :class:`~agentkit.Tool` objects are built once per skill set or catalogue
summary (validating a schema costs about a millisecond) and act on the generation that
runs them: the loop makes its :class:`GenerationTools` current (a context variable) for
the generation, and tool calls run in copies of the loop thread's context.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..events import ControlEvent, Event
from ..models.base import ToolSpec
from ..tools._search import ToolIndex, ToolSearch, split_name
from ..tools.base import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from ..options import GenerationOptions

__all__ = ["FIND_TOOLS", "LOAD_SKILL", "READ_SKILL_FILE", "GenerationTools", "check_generation_tools"]

LOAD_SKILL = "load_skill"
READ_SKILL_FILE = "read_skill_file"
FIND_TOOLS = "find_tools"
SKILL_ACTIVATED = "skill-activated"
TOOLS_DISCOVERED = "tools-discovered"
_LISTED_SERVERS = 20
_SHOWN_DESCRIPTION = 200

Commit = Callable[[Sequence[Event]], Any]


def needed(opts: GenerationOptions, tools: ToolRegistry) -> bool:
    """True when a generation with ``opts`` over ``tools`` needs :class:`GenerationTools`."""
    search = opts.tool_search
    return bool(opts.skills) or (search is not None and len(tools) > search.threshold)


def check_generation_tools(opts: GenerationOptions, tools: ToolRegistry) -> tuple[str, ...]:
    """The names of the built-in tools a generation with ``opts`` over ``tools`` offers;
    ConfigurationError for skills or tool search that cannot work with ``tools``: a
    session tool named like a built-in, a pinned tool that does not exist."""
    reserved = []
    if opts.skills is not None:
        reserved += [(LOAD_SKILL, "skills="), (READ_SKILL_FILE, "skills=")]
    if opts.tool_search is not None:
        reserved.append((FIND_TOOLS, "tool_search="))
        missing = [n for n in opts.tool_search.always if n not in tools]
        if missing:
            raise ConfigurationError(
                f"ToolSearch(always=...) names tools the session does not have: {', '.join(missing)}"
            )
    for name, option in reserved:
        if name in tools:
            raise ConfigurationError(
                f"a tool is named {name!r}, the name of a built-in tool {option} adds; rename that tool "
                f"(or leave out {option})"
            )
    offered = ((LOAD_SKILL, READ_SKILL_FILE) if opts.skills else ()) + (
        (FIND_TOOLS,) if needed(opts, tools) and opts.tool_search is not None else ())
    return offered


@contextlib.contextmanager
def bound(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    """``var`` set to ``value`` for the block (the generation a runtime-added tool acts on:
    tool calls run in copies of the context, so they see it too)."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


class GenerationTools:
    """One generation's extra tools, system prompt and visible set (module docstring)."""

    def __init__(self, opts: GenerationOptions, tools: ToolRegistry, *, events: Callable[[], Sequence[Event]],
                 commit: Commit, redact: Callable[[Any], Any] | None = None) -> None:
        self._commit = commit
        self._redact = redact
        self._lock = threading.Lock()
        self.registry = ToolRegistry(tools.values())
        builtins: list[Tool] = []
        self.system = opts.system
        self.skills = opts.skills
        self._activated: set[str] = set()
        if self.skills:  # an empty Skills adds nothing
            builtins += _skill_tools(tuple(self.skills))
            index = self.skills.index()
            self.system = f"{opts.system}\n\n{index}" if opts.system else index
        search = opts.tool_search
        self._search: _Search | None = None
        if search is not None and len(tools) > search.threshold:
            pinned = set(search.always)
            if isinstance(opts.tool_choice, str) and opts.tool_choice in tools:
                pinned.add(opts.tool_choice)
            self._search = _Search(search, tools, pinned, _discovered_in(events(), tools, search.max_discovered))
            builtins.append(_find_tools_tool(_catalogue_summary(tools), search.limit))
        for t in builtins:
            self.registry.add(t)
        self._builtin_specs = tuple(t.spec for t in builtins)
        self._specs: tuple[ToolSpec, ...] | None = None

    def current(self) -> contextlib.AbstractContextManager[None]:
        """Make this the generation the built-in tools act on, in this thread and in the
        tool calls it starts (they run in copies of its context)."""
        return bound(_CURRENT, self)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools the next model request carries."""
        with self._lock:
            if self._specs is None:
                search = self._search
                self._specs = self.registry.specs() if search is None else search.specs() + self._builtin_specs
            return self._specs

    def names(self) -> tuple[str, ...]:
        """The names of :meth:`specs` (what an unknown-tool error lists)."""
        return tuple(s.name for s in self.specs())

    def activate_skill(self, name: str, tool_call_id: str) -> None:
        """Record that skill ``name`` was loaded (once per generation)."""
        with self._lock:
            if name in self._activated:
                return
            self._activated.add(name)
        self._commit([ControlEvent(action=SKILL_ACTIVATED, data={"name": name, "tool_call_id": tool_call_id})])

    def find(self, query: str, limit: int | None, tool_call_id: str) -> list[Tool]:
        """Rank the catalogue for ``query``, activate the matches and record them."""
        search = self._search
        if search is None:  # pragma: no cover - find_tools is offered only with tool search
            raise RuntimeError("tool search is not active in this generation")
        matches = search.find(query, limit)
        if matches:
            with self._lock:
                search.discover([t.name for t in matches])
                self._specs = None
            shown = self._redact(query) if self._redact is not None else query
            data = {"query": shown, "names": [t.name for t in matches], "tool_call_id": tool_call_id}
            self._commit([ControlEvent(action=TOOLS_DISCOVERED, data=data)])
        return matches


_CURRENT: contextvars.ContextVar[GenerationTools | None] = contextvars.ContextVar(
    "agentkit_generation_tools", default=None
)


def _current(tool: str) -> GenerationTools:
    generation = _CURRENT.get()
    if generation is None:
        raise RuntimeError(f"{tool} runs only inside a generation that offers it (skills= or tool_search=)")
    return generation


# -- the built-in tools: built once per skill set or catalogue summary, acting on the current generation --


def _load_skill(name: str, ctx: ToolContext) -> str:
    generation = _current(LOAD_SKILL)
    assert generation.skills is not None
    skill = generation.skills[name]
    generation.activate_skill(name, ctx.tool_call_id)
    if skill.files:
        listing = "\n".join(f"- {f}" for f in skill.files)
        files = f"Files bundled with skill {name!r} (read one with {READ_SKILL_FILE}):\n{listing}"
    else:
        files = f"Skill {name!r} bundles no files."
    return f"{skill.instructions}\n\n{files}"


def _read_skill_file(name: str, path: str) -> str:
    skills = _current(READ_SKILL_FILE).skills
    assert skills is not None
    return skills[name].read_file(path)


def _find_tools(query: str, ctx: ToolContext, limit: int | None = None) -> str:
    matches = _current(FIND_TOOLS).find(query, limit, ctx.tool_call_id)
    if not matches:
        return (f"No tool matches {query!r}. Try other words: an action (create, list, send), "
                f"an object (issue, file, message) or a server name.")
    lines = [f"- {t.name}: {_short(t.description)}" for t in matches]
    return f"{len(matches)} tool(s) activated; you can call them from now on:\n" + "\n".join(lines)


@functools.lru_cache(maxsize=64)
def _skill_tools(names: tuple[str, ...]) -> tuple[Tool, Tool]:
    skill_name = {"type": "string", "enum": list(names), "description": "the skill's name"}
    load = Tool(
        name=LOAD_SKILL,
        description="Load a skill: returns its instructions (follow them) and the list of files it bundles.",
        input_schema={"type": "object", "properties": {"name": skill_name}, "required": ["name"],
                      "additionalProperties": False},
        fn=_load_skill,
        read_only=True,
        context_param="ctx",
    )
    read = Tool(
        name=READ_SKILL_FILE,
        description="Read a text file a skill bundles (a path from load_skill's file list, relative to the skill).",
        input_schema={
            "type": "object",
            "properties": {
                "name": skill_name,
                "path": {"type": "string",
                         "description": "the file's path inside the skill, e.g. reference/guide.md"},
            },
            "required": ["name", "path"],
            "additionalProperties": False,
        },
        fn=_read_skill_file,
        read_only=True,
    )
    return load, read


@functools.lru_cache(maxsize=64)
def _find_tools_tool(summary: str, limit: int) -> Tool:
    return Tool(
        name=FIND_TOOLS,
        description=(
            f"Only some of the {summary} are shown to you. Search them by what you need to do and "
            f"the best matches become callable from your next step on. Call this whenever no shown tool fits."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string",
                          "description": "words for the tool you need: an action, an object, a server"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50,
                          "description": f"how many tools to activate (default {limit})"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        fn=_find_tools,
        read_only=True,
        context_param="ctx",
    )


class _Search:
    """The visible set of one generation under tool search."""

    def __init__(self, search: ToolSearch, tools: ToolRegistry, pinned: set[str], discovered: list[str]) -> None:
        self._index: ToolIndex[Tool] | None = None  # built at the first search of the generation
        self._tools = tools
        self._limit = search.limit
        self._max = search.max_discovered
        self._pinned = pinned
        self._discovered = discovered

    def find(self, query: str, limit: int | None) -> list[Tool]:
        index = self._index
        if index is None:
            index = self._index = ToolIndex(self._tools.values())
        return index.search(query, limit=limit or self._limit)

    def discover(self, names: list[str]) -> None:
        """Make ``names`` the most recently discovered tools (the oldest drop out past the cap)."""
        kept = [n for n in self._discovered if n not in names] + names
        self._discovered = kept[-self._max:]

    def specs(self) -> tuple[ToolSpec, ...]:
        shown = self._pinned | set(self._discovered)
        return tuple(t.spec for t in self._tools.values() if t.name in shown)


def _discovered_in(events: Sequence[Event], tools: ToolRegistry, cap: int) -> list[str]:
    """The ``cap`` tools most recently discovered in earlier generations (oldest first)."""
    found: list[str] = []
    for ev in reversed(events):
        if isinstance(ev, ControlEvent) and ev.action == TOOLS_DISCOVERED:
            names = ev.data.get("names")
            for n in reversed(names) if isinstance(names, list) else ():
                if isinstance(n, str) and n in tools and n not in found:
                    found.append(n)
            if len(found) >= cap:
                break
    return list(reversed(found[:cap]))


def _catalogue_summary(tools: ToolRegistry) -> str:
    """``"300 available tools (tools by server: github 120, ...)"``."""
    return f"{len(tools)} available tools ({_servers(tools)})"


def _servers(tools: ToolRegistry) -> str:
    counts: dict[str, int] = {}
    for name in tools:
        server = split_name(name)[0]
        counts[server] = counts.get(server, 0) + 1
    named = [f"{s} {n}" for s, n in counts.items() if s]
    if not named:
        return "no server prefixes"
    more = len(named) - _LISTED_SERVERS
    listed = ", ".join(named[:_LISTED_SERVERS]) + (f" and {more} more" if more > 0 else "")
    plain = counts.get("", 0)
    return f"tools by server: {listed}" + (f"; {plain} without a server" if plain else "")


def _short(description: str) -> str:
    line = " ".join((description or "").split())
    return line if len(line) <= _SHOWN_DESCRIPTION else line[: _SHOWN_DESCRIPTION - 1] + "…"
