"""What tool search costs and saves, on a catalogue of MCP-style tools (zero-latency model).

    python3 bench/tool_search.py          # one JSON line

- rank_ms_<n>: one ``search_tools`` call over n tools (index built in the call).
- gen_ms_<n>_plain / gen_ms_<n>_search: one ``ask`` in a Session with n tools, without
  and with ``tool_search=ToolSearch()`` (the model answers at once: agentkit's own cost).
- spec_bytes_<n>_plain / spec_bytes_<n>_search: the JSON size of the tool specs one
  model request carries (what the provider turns into input tokens).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import ScriptedModel, Session, Tool, ToolSearch  # noqa: E402
from agentkit.tools import search_tools  # noqa: E402

_VERBS = ["create", "list", "get", "update", "delete", "search", "archive", "export", "import", "assign"]
_OBJECTS = ["issue", "pull_request", "repository", "branch", "commit", "release", "channel", "message",
            "user", "reaction", "file", "reminder", "ticket", "sprint", "board", "epic", "comment",
            "worklog", "page", "space"]


def catalogue(n: int) -> list[Tool]:
    tools = []
    for i in range(n):
        server = f"server{i % 10}"
        verb, obj = _VERBS[i % len(_VERBS)], _OBJECTS[(i // len(_VERBS)) % len(_OBJECTS)]
        tools.append(Tool(
            name=f"{server}__{verb}_{obj}_{i}",
            description=f"{verb.capitalize()} a {obj.replace('_', ' ')} on {server}. Returns the {obj} as JSON.",
            input_schema={"type": "object", "properties": {"id": {"type": "string", "description": "the id"},
                                                           "fields": {"type": "array", "items": {"type": "string"}}}},
            fn=lambda **kw: "ok",
        ))
    return tools


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3)


def per_ask_ms(tools: list[Tool], turns: int, **options: object) -> tuple[float, int]:
    model = ScriptedModel(["ok"] * (turns + 5))
    with Session(model, tools=tools, **options) as session:
        for _ in range(5):
            session.ask("warm up")
        start = time.perf_counter()
        for _ in range(turns):
            session.ask("hi")
        elapsed = (time.perf_counter() - start) * 1000 / turns
    specs = model.requests[-1].tools
    size = len(json.dumps([{"name": s.name, "description": s.description, "parameters": s.input_schema}
                           for s in specs]))
    return round(elapsed, 3), size


def main() -> None:
    out: dict[str, float] = {}
    for n in (300, 1000):
        tools = catalogue(n)
        out[f"rank_ms_{n}"] = median_ms(lambda tools=tools: search_tools(tools, "create a server3 issue"), 50)
        out[f"gen_ms_{n}_plain"], out[f"spec_bytes_{n}_plain"] = per_ask_ms(tools, 100)
        out[f"gen_ms_{n}_search"], out[f"spec_bytes_{n}_search"] = per_ask_ms(tools, 100, tool_search=ToolSearch())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
