"""Tool search, pure logic: :class:`ToolSearch` (the option) and :func:`search_tools`
(the ranking).

With hundreds of tools (several MCP servers), sending every tool's schema with every
request costs tokens and confuses models. ``tool_search=ToolSearch(threshold=40)`` lets
a generation whose catalogue has more tools than ``threshold`` show the model only a
few of them (the ones the host pins with ``always``, those discovered so far) plus
``find_tools(query, limit)``; the runtime side lives in the loop.

The ranking, :func:`search_tools`, is a pure function of the catalogue and the query:
the query is cut into lowercase terms (words of letters and digits; ``snake_case``,
``kebab-case`` and ``camelCase`` split), common English words are dropped, and each
remaining term scores

* 3 when it matches a word of the tool's own name,
* 2 when it matches a word of its server prefix (``<server>__<tool>``, as
  :mod:`agentkit.mcp` names tools of several servers),
* 1 when it matches a word of its description,

a term matching a word when they are equal, when the term (3+ characters) begins the
word, or when both are equal without a plural ``s``. A query equal to a tool's name
(or its name without the server prefix) adds 10. Tools scoring 0 are left out; ties
keep catalogue order, so the same catalogue and query always give the same answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ..errors import ConfigurationError

__all__ = ["SearchableTool", "ToolSearch", "search_tools"]

SERVER_SEPARATOR = "__"
"""What separates the server prefix from the tool's own name (``github__create_issue``)."""

_MAX_LIMIT = 50
_EXACT_BONUS = 10
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOP = frozenset(
    "a an and any are as at be by can do for from get how i in into is it me my of on or "
    "some that the this to use using want with".split()
)


class SearchableTool(Protocol):
    """Anything with a ``name`` and a ``description``: a :class:`~agentkit.Tool`, a
    :class:`~agentkit.ToolSpec`."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


T = TypeVar("T", bound=SearchableTool)


@dataclass(frozen=True, kw_only=True)
class ToolSearch:
    """``tool_search=ToolSearch(...)``: show the model a few tools plus ``find_tools``
    when a generation has more than ``threshold`` tools.

    At or below the threshold nothing changes (every tool is sent, no ``find_tools``).
    Above it, each model request carries the tools named in ``always``, the tools
    ``find_tools`` activated (the ``max_discovered`` most recent, also from earlier
    generations of the session: they are read back from its ``tools-discovered``
    events), any tool ``tool_choice`` names, and ``find_tools(query, limit)``, which
    ranks the whole catalogue with :func:`search_tools` and activates the matches from
    the next model request on. ``limit`` is the number of matches when the model does
    not give one (at most 50).

    Hiding a tool is about prompt size, not permission: a hidden tool the model calls by
    name still runs (restrict tools with ``approval=`` or hooks).
    """

    threshold: int = 40
    """Catalogue size above which the model sees the small set plus ``find_tools``."""
    always: Sequence[str] = ()
    """Tool names always shown (each must be one of the generation's tools)."""
    limit: int = 10
    """How many matches ``find_tools`` activates when the model gives no ``limit``."""
    max_discovered: int = 16
    """How many discovered tools stay shown; the most recently discovered win."""

    def __post_init__(self) -> None:
        for name, low in (("threshold", 0), ("limit", 1), ("max_discovered", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigurationError(f"ToolSearch {name} must be an int >= {low}, got {value!r}")
        if self.limit > _MAX_LIMIT:
            raise ConfigurationError(f"ToolSearch limit must be at most {_MAX_LIMIT}, got {self.limit}")
        always = self.always
        if isinstance(always, str) or not all(isinstance(n, str) and n for n in always):
            raise ConfigurationError(
                f"ToolSearch always must be a list of tool names (e.g. always=['read_file']), not {always!r}"
            )
        object.__setattr__(self, "always", tuple(always))


def search_tools(tools: Iterable[T], query: str, *, limit: int = 10) -> list[T]:
    """The tools of ``tools`` that match ``query``, best first, at most ``limit`` (see
    the module docstring for the scoring). Pure and deterministic."""
    return ToolIndex(tools).search(query, limit=limit)


def split_name(name: str) -> tuple[str, str]:
    """``(server, tool)``: ``("github", "create_issue")`` for ``github__create_issue``,
    ``("", name)`` for a name without a server prefix."""
    server, sep, rest = name.partition(SERVER_SEPARATOR)
    return (server, rest) if sep and server and rest else ("", name)


def words(text: str) -> list[str]:
    """``text`` cut into lowercase words: letters and digits, snake, kebab and camel
    case split."""
    return [w.lower() for w in _WORD.findall(text)]


class ToolIndex(Generic[T]):
    """A catalogue with each tool's words computed once, searched many times."""

    def __init__(self, tools: Iterable[T]) -> None:
        self._tools = list(tools)
        self._entries = [_entry(t.name, t.description or "") for t in self._tools]
        self._vocabulary = frozenset().union(*(own | server | desc for own, server, desc, _, _ in self._entries))

    @property
    def tools(self) -> list[T]:
        """The catalogue, in its order."""
        return self._tools

    def search(self, query: str, *, limit: int = 10) -> list[T]:
        """See :func:`search_tools`."""
        if not isinstance(query, str):
            raise ConfigurationError(f"query must be a str, not {type(query).__name__}")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ConfigurationError(f"limit must be an int >= 1, got {limit!r}")
        terms = _terms(query)
        whole = "_".join(words(query))
        if not terms and not whole:
            return []
        # each term as the set of catalogue words it matches, found once per search
        matched = [m for m in (_matches(term, self._vocabulary) for term in terms) if m]
        scored: list[tuple[int, int]] = []
        for i, (own, server, desc, full, short) in enumerate(self._entries):
            score = _EXACT_BONUS if whole and whole in (full.replace("-", "_"), short.replace("-", "_")) else 0
            for m in matched:
                score += 3 * (not own.isdisjoint(m)) + 2 * (not server.isdisjoint(m)) + (not desc.isdisjoint(m))
            if score:
                scored.append((-score, i))
        scored.sort()
        return [self._tools[i] for _, i in scored[:limit]]


_Entry = tuple[frozenset[str], frozenset[str], frozenset[str], str, str]


@functools.lru_cache(maxsize=8192)
def _entry(name: str, description: str) -> _Entry:
    """A tool's words (own name, server, description) and its names, lowercase: the
    same tools are indexed again by every generation that searches them."""
    server, own = split_name(name)
    return (_stems(words(own)), _stems(words(server)), _stems(words(description)), name.lower(), own.lower())


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _stems(ws: Iterable[str]) -> frozenset[str]:
    return frozenset(_stem(w) for w in ws)


def _terms(query: str) -> list[str]:
    """The distinct, stemmed query words worth matching (all of them when every one is
    a common word)."""
    ws = words(query)
    kept = [w for w in ws if w not in _STOP] or ws
    return list(dict.fromkeys(_stem(w) for w in kept))


def _matches(term: str, vocabulary: frozenset[str]) -> frozenset[str]:
    """The words of ``vocabulary`` that ``term`` matches: itself, and the words it begins
    when it has 3 or more characters."""
    if len(term) < 3:
        return frozenset({term}) & vocabulary
    return frozenset(w for w in vocabulary if w.startswith(term))
