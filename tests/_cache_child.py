"""A child process of tests/test_tools_cache.py, sharing a ToolCache directory with its
parent and siblings.

    python tests/_cache_child.py call <cache dir> <runs file> <city> [nosync]
        one session calls the cached ``weather`` tool (each run appends the city to the
        runs file; ``nosync``: a cache with ``fsync=False``); says the result event's
        cache marker and output
    python tests/_cache_child.py hammer <cache dir> <writer> <n>
        n times: write one shared entry (a large output naming this writer), then read
        it back; says how many reads were torn or missing and whose entries it read
"""

from __future__ import annotations

import sys

from _child import say

from agentkit import CancelToken, ScriptedModel, Session, ToolCache, ToolCall, ToolContext, tool
from agentkit.messages import ToolOutput


def call(cache_dir: str, runs_file: str, city: str, sync: str = "sync") -> None:
    @tool(cache=ToolCache(cache_dir, ttl=3600, fsync=sync != "nosync"), read_only=True)
    def weather(city: str) -> dict:
        """Today's weather in a city."""
        with open(runs_file, "a") as f:
            f.write(city + "\n")
        return {"city": city, "sky": "sunny"}

    with Session(ScriptedModel([ToolCall("weather", {"city": city}), "done"]), tools=[weather]) as s:
        s.push_user_message("go")
        s.generate()
        (event,) = [e for e in s.events if e.type == "tool-result"]
    say(cache=event.to_dict().get("cache"), output=event.to_dict()["output"])


def hammer(cache_dir: str, writer: str, n: int) -> None:
    cache = ToolCache(cache_dir, ttl=3600)
    key = cache.key("weather", {"city": "Oslo"})
    body = "x" * 200_000
    torn = misses = 0
    seen: set[str] = set()
    ctx = ToolContext(tool_call_id="c", tool_name="weather", cancel=CancelToken())
    for _ in range(n):
        cache._store(key, "weather", ToolOutput.text(f"{writer}:{body}"))
        out, marker = cache.through("weather", {"city": "Oslo"}, ctx, lambda: ToolOutput.error("no entry"))
        if marker is None:
            misses += 1
            continue
        who, _, rest = out.value.partition(":")
        if rest != body:
            torn += 1
        seen.add(who)
    say(writer=writer, torn=torn, misses=misses, writers_seen=sorted(seen))


if __name__ == "__main__":
    if sys.argv[1] == "call":
        call(*sys.argv[2:6])
    else:
        hammer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
