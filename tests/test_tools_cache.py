"""The tool result cache (issue #30): ``@tool(cache=ToolCache(place, ttl=...), read_only=True)``
answers a repeated call (same tool, same input) from a directory or PostgreSQL, across
sessions, cache objects and processes; a hit is marked on its result event, record and
stream event; only read-only tools, only successful results; damaged or expired entries
are misses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from _env import reason

from agentkit import (
    ApprovalPolicy,
    CancelledError,
    CancelToken,
    ConfigurationError,
    Hooks,
    ScriptedModel,
    Session,
    Tool,
    ToolCache,
    ToolCall,
    ToolContext,
    ToolDecision,
    tool,
)
from agentkit.events import event_from_dict
from agentkit.messages import ToolOutput
from agentkit.tools import _cache

HERE = Path(__file__).resolve().parent


def _calls(*inputs: dict, name: str = "weather") -> ScriptedModel:
    """A model calling ``name`` once per input (one message each), then answering."""
    return ScriptedModel([*(ToolCall(name, i) for i in inputs), "done"])


def run_calls(tool_, *inputs: dict, **session):
    """One session calling ``tool_`` with each input in turn: its tool-result events and
    its result's tool-call records."""
    with Session(_calls(*inputs, name=tool_.name), tools=[tool_], **session) as s:
        s.push_user_message("go")
        result = s.generate()
        events = [e for e in s.events if e.type == "tool-result"]
    return events, list(result.tool_calls)


def weather_tool(cache: ToolCache, runs: list, **extra):
    @tool(cache=cache, read_only=True, **extra)
    def weather(city: str) -> dict:
        """Today's weather in a city."""
        runs.append(city)
        return {"city": city, "sky": "sunny", "run": len(runs)}

    return weather


def entries(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.suffix == ".json")


# -- hits, misses and the marker -----------------------------------------------------------


def test_a_second_session_gets_the_cached_result_marked_on_its_event_record_and_stream(tmp_path):
    runs: list = []
    weather = weather_tool(ToolCache(tmp_path / "cache", ttl=3600), runs)
    (miss,), (miss_record,) = run_calls(weather, {"city": "Oslo"})
    assert "cache" not in miss.to_dict() and miss_record.cache is None
    with Session(_calls({"city": "Oslo"}), tools=[weather]) as s:
        s.push_user_message("go")
        with s.stream() as stream:
            ends = [e for e in stream if e.type == "tool-end"]
        hit = [e for e in s.events if e.type == "tool-result"][0]
    assert runs == ["Oslo"]  # the second session did not run the tool
    marker = hit.to_dict()["cache"]
    assert marker["hit"] is True and marker["key"] == entries(tmp_path / "cache")[0].stem
    assert isinstance(marker["stored_at"], float)
    assert hit.output == miss.output  # the same answer, as the log stores it
    assert event_from_dict(hit.to_dict()) == hit  # the marker survives the store
    assert ends[0].record.cache == marker and ends[0].to_dict()["cache"] == marker


def test_a_hit_in_a_durable_session_is_stored_with_its_marker(tmp_path):
    from agentkit import FileEventStore

    runs: list = []
    weather = weather_tool(ToolCache(tmp_path / "cache", ttl=3600), runs)
    run_calls(weather, {"city": "Oslo"})
    store = FileEventStore(tmp_path / "sessions")
    events, _ = run_calls(weather, {"city": "Oslo"}, store=store, session_id="s1")
    (stored,) = [e for e in store.load("s1").events if e.type == "tool-result"]
    assert stored.cache == events[0].cache and stored.cache["hit"] is True and runs == ["Oslo"]


def test_another_input_or_namespace_is_another_entry(tmp_path):
    runs: list = []
    weather = weather_tool(ToolCache(tmp_path, ttl=3600), runs)
    run_calls(weather, {"city": "Oslo"}, {"city": "Rome"}, {"city": "Oslo"})
    assert runs == ["Oslo", "Rome"]
    v2 = weather_tool(ToolCache(tmp_path, ttl=3600, namespace="v2"), runs)
    events, _ = run_calls(v2, {"city": "Oslo"})
    assert runs == ["Oslo", "Rome", "Oslo"] and events[0].cache is None


def test_two_caches_on_one_path_share_entries_and_a_key_function_separates_by_context(tmp_path):
    runs: list = []

    @dataclass
    class Deps:
        tenant: str

    def per_tenant(input, ctx: ToolContext):
        return ctx.deps.tenant

    a = weather_tool(ToolCache(str(tmp_path), ttl=3600, key=per_tenant), runs)
    b = weather_tool(ToolCache(tmp_path, ttl=3600, key=per_tenant), runs)
    run_calls(a, {"city": "Oslo"}, deps=Deps("acme"))
    events, _ = run_calls(b, {"city": "Oslo"}, deps=Deps("acme"))
    assert events[0].cache is not None and runs == ["Oslo"]
    events, _ = run_calls(b, {"city": "Oslo"}, deps=Deps("globex"))
    assert events[0].cache is None and runs == ["Oslo", "Oslo"]


def test_a_key_function_that_fails_is_an_error_result_and_the_tool_does_not_run(tmp_path):
    runs: list = []
    weather = weather_tool(ToolCache(tmp_path, ttl=60, key=lambda input, ctx: ctx.deps.tenant), runs)
    events, _ = run_calls(weather, {"city": "Oslo"})  # no deps: None has no tenant
    assert runs == [] and events[0].output.is_error
    assert "cache key could not be made (AttributeError" in events[0].output.as_text()


def test_a_result_that_is_not_json_is_stored_and_answered_as_the_log_holds_it(tmp_path):
    @dataclass
    class Forecast:
        city: str
        days: tuple

    runs: list = []

    @tool(cache=ToolCache(tmp_path, ttl=3600), read_only=True)
    def forecast(city: str) -> Forecast:
        """A forecast."""
        runs.append(city)
        return Forecast(city, ("sun", "rain"))

    events, records = run_calls(forecast, {"city": "Oslo"}, {"city": "Oslo"})
    assert events[0].output.value == {"city": "Oslo", "days": ["sun", "rain"]}
    assert events[1].output == events[0].output and events[1].cache is not None and runs == ["Oslo"]


def test_a_lax_tool_keys_on_the_converted_input(tmp_path):
    runs: list = []

    @tool(cache=ToolCache(tmp_path, ttl=3600), read_only=True, strict=False)
    def square(n: int) -> int:
        """Square a number."""
        runs.append(n)
        return n * n

    events, _ = run_calls(square, {"n": 3}, {"n": "3"})
    assert runs == [3] and events[1].cache is not None and events[1].output.value == 9


# -- only read-only tools, only successes ------------------------------------------------


def test_a_cache_on_a_tool_that_may_write_is_refused_when_it_is_defined(tmp_path):
    cache = ToolCache(tmp_path / "c", ttl=60)
    with pytest.raises(ConfigurationError, match=r"tool 'save'.*mark it read_only=True"):
        @tool(cache=cache)
        def save(text: str) -> str:
            """Save a note."""
            return "saved"

    with pytest.raises(ConfigurationError, match="read_only=True"):
        Tool(name="t", description="d", input_schema={"type": "object"}, fn=lambda: 1, cache=cache)
    with pytest.raises(ConfigurationError, match=r"cache must be a ToolCache.*not dict"):
        @tool(cache={"ttl": 60}, read_only=True)  # type: ignore[arg-type]
        def look(text: str) -> str:
            """Look."""
            return text
    assert not (tmp_path / "c").exists()  # nothing was written


@pytest.mark.parametrize("bad, match", [
    (dict(ttl=0), "ttl must be a positive number"),
    (dict(ttl=True), "ttl must be a positive number"),
    (dict(ttl=float("inf")), "ttl must be a positive number"),
    (dict(ttl=5, key="tenant"), "key must be a function"),
])
def test_bad_arguments_are_refused_before_anything_is_made(tmp_path, bad, match):
    with pytest.raises(ConfigurationError, match=match):
        ToolCache(tmp_path / "c", **bad)
    assert not (tmp_path / "c").exists()


def test_a_target_that_is_no_place_is_refused_saying_what_may_be_given(tmp_path):
    with pytest.raises(ConfigurationError, match="a directory .* a PostgresEventStore, a postgresql:// URI"):
        ToolCache(42, ttl=60)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="is not a directory"):
        ToolCache(tmp_path / "file", ttl=60)


def test_error_results_and_timeouts_are_not_cached(tmp_path):
    runs: list = []
    release = threading.Event()

    @tool(cache=ToolCache(tmp_path, ttl=3600), read_only=True, timeout=0.2)
    def lookup(q: str, ctx: ToolContext) -> str:
        """Look something up."""
        runs.append(q)
        if len(runs) == 1:
            raise RuntimeError("backend down")
        if len(runs) == 2:
            ctx.cancel.wait(30)  # until the timeout tells it to stop
            release.set()
            return "too late"
        return f"found {q}"

    events, _ = run_calls(lookup, {"q": "x"}, {"q": "x"}, {"q": "x"}, {"q": "x"})
    assert release.wait(30)
    assert [e.output.is_error for e in events] == [True, True, False, False]
    assert "timed out" in events[1].output.as_text()
    assert [e.cache is not None for e in events] == [False, False, False, True]
    assert len(runs) == 3 and len(entries(tmp_path)) == 1


def test_a_cancelled_or_paused_run_stores_nothing(tmp_path):
    cache = ToolCache(tmp_path, ttl=3600)
    ctx = ToolContext(tool_call_id="c1", tool_name="t", cancel=CancelToken())

    def cancelled() -> ToolOutput:
        raise CancelledError("stopped")

    with pytest.raises(CancelledError):
        cache.through("t", {"q": 1}, ctx, cancelled)
    assert entries(tmp_path) == []
    out, marker = cache.through("t", {"q": 1}, ctx, lambda: ToolOutput.text("ok"))
    assert marker is None and out.value == "ok"
    out, marker = cache.through("t", {"q": 1}, ctx, lambda: ToolOutput.text("never run"))
    assert marker is not None and out.value == "ok"


# -- hooks and approvals come first ----------------------------------------------------------


def test_hooks_and_approvals_judge_a_cached_call_before_the_cache_answers(tmp_path):
    runs: list = []
    weather = weather_tool(ToolCache(tmp_path, ttl=3600), runs)
    run_calls(weather, {"city": "Oslo"})  # stored
    seen: list = []

    def gate(call, ctx):
        seen.append(call.input)
        return ToolDecision.block("not today") if call.input["city"] == "Oslo" else None

    events, _ = run_calls(weather, {"city": "Oslo"}, hooks=Hooks(before_tool_call=gate))
    assert seen == [{"city": "Oslo"}] and events[0].cache is None
    assert "not today" in events[0].output.as_text()
    rewrite = Hooks(before_tool_call=lambda call, ctx: ToolDecision.rewrite({"city": "Oslo"}))
    events, _ = run_calls(weather, {"city": "Paris"}, hooks=rewrite)
    assert events[0].cache is not None and runs == ["Oslo"]  # the rewritten input's entry
    denied, _ = run_calls(weather, {"city": "Oslo"}, approval=ApprovalPolicy(mode="ask-all"),
                          approver=lambda request: False)
    assert denied[0].cache is None and denied[0].output.is_error


# -- the directory: damage, expiry, several processes -----------------------------------


def test_a_torn_or_foreign_entry_file_is_a_miss_and_is_replaced(tmp_path):
    runs: list = []
    weather = weather_tool(ToolCache(tmp_path, ttl=3600), runs)
    run_calls(weather, {"city": "Oslo"})
    (entry,) = entries(tmp_path)
    whole = entry.read_bytes()
    for damage in (whole[: len(whole) // 2], b"\x00\xff garbage", b"{}", json.dumps({"format": "x"}).encode(),
                   whole.replace(b'"kind": "json"', b'"kind": 7')):
        assert damage != whole
        entry.write_bytes(damage)
        events, _ = run_calls(weather, {"city": "Oslo"})
        assert events[0].cache is None and not events[0].output.is_error
        assert entry.read_bytes() != damage  # the run's result replaced it
    events, _ = run_calls(weather, {"city": "Oslo"})
    assert events[0].cache is not None and len(runs) == 6


def _age(entry: Path, *, stored: float, expires: float) -> None:
    """Move an entry's times ``stored`` / ``expires`` seconds from now (no waiting)."""
    import time

    doc = json.loads(entry.read_bytes())
    now = time.time()
    doc["stored_at"], doc["expires_at"] = now + stored, now + expires
    entry.write_text(json.dumps(doc))


def test_an_expired_entry_is_a_miss_and_is_removed(tmp_path):
    runs: list = []
    fail = [False]

    @tool(cache=ToolCache(tmp_path, ttl=60), read_only=True)
    def quote(symbol: str) -> str:
        """A stock quote."""
        runs.append(symbol)
        if fail[0]:
            raise RuntimeError("market closed")
        return f"{symbol}: 42"

    run_calls(quote, {"symbol": "ACME"})
    (entry,) = entries(tmp_path)
    _age(entry, stored=-120, expires=-60)
    fail[0] = True  # the run after the miss fails: nothing is stored again
    events, _ = run_calls(quote, {"symbol": "ACME"})
    assert events[0].cache is None and events[0].output.is_error
    assert entries(tmp_path) == [] and runs == ["ACME", "ACME"]


def test_an_entry_is_fresh_only_within_the_reading_caches_ttl(tmp_path):
    runs: list = []
    long = weather_tool(ToolCache(tmp_path, ttl=3600), runs)
    run_calls(long, {"city": "Oslo"})
    (entry,) = entries(tmp_path)
    _age(entry, stored=-120, expires=3000)
    short = weather_tool(ToolCache(tmp_path, ttl=60), runs)
    kept = entry.read_bytes()
    events, _ = run_calls(weather_tool(ToolCache(tmp_path, ttl=3600), runs), {"city": "Oslo"})
    assert events[0].cache is not None  # fresh for an hour-long ttl
    assert entry.read_bytes() == kept
    events, _ = run_calls(short, {"city": "Oslo"})
    assert events[0].cache is None and runs == ["Oslo", "Oslo"]  # too old for a minute-long one


def test_prune_and_clear(tmp_path):
    cache = ToolCache(tmp_path, ttl=3600)
    runs: list = []
    weather = weather_tool(cache, runs)
    run_calls(weather, {"city": "Oslo"}, {"city": "Rome"})
    oslo, rome = entries(tmp_path)
    _age(oslo, stored=-120, expires=-1)
    (tmp_path / ("0" * 64 + ".json")).write_bytes(b"torn")
    assert cache.prune() == 2 and entries(tmp_path) == [rome]
    assert cache.clear() == 1 and entries(tmp_path) == []


def test_two_processes_share_entries(tmp_path):
    runs = tmp_path / "runs.txt"

    def child(city: str) -> dict:
        out = subprocess.run([sys.executable, str(HERE / "_cache_child.py"), "call", str(tmp_path / "c"),
                              str(runs), city], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = child("Oslo")
    second = child("Oslo")
    assert first["cache"] is None and second["cache"]["hit"] is True
    assert second["output"] == first["output"] and runs.read_text().split() == ["Oslo"]
    weather = weather_tool(ToolCache(tmp_path / "c", ttl=3600), [])  # and this process too
    events, _ = run_calls(weather, {"city": "Oslo"})
    assert events[0].cache == second["cache"]


@pytest.mark.skipif(shutil.which("strace") is None, reason=reason(
    "needs strace to trace syscalls (Debian/Ubuntu: `apt-get install -y strace`)"))
@pytest.mark.parametrize("sync", ["sync", "nosync"])
def test_an_entry_is_fsynced_before_it_is_renamed_into_place_unless_fsync_is_off(tmp_path, sync):
    trace, cache = tmp_path / "trace.txt", os.path.realpath(tmp_path / "c")
    out = subprocess.run(["strace", "-f", "-y", "-e", "trace=openat,fsync,rename,renameat,renameat2", "-o", str(trace),
                          sys.executable, str(HERE / "_cache_child.py"), "call", cache, str(tmp_path / "runs"),
                          "Oslo", sync], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [line for line in trace.read_text().splitlines() if cache in line]
    renames = [i for i, line in enumerate(lines) if "rename" in line and line.split("(", 1)[0].split()[-1]
               .startswith("rename")]
    assert len(renames) == 1 and ".json" in lines[renames[0]]
    fsyncs = [i for i, line in enumerate(lines) if "fsync(" in line and "/.tmp-" in line]
    if sync == "sync":
        assert fsyncs and fsyncs[-1] < renames[0]  # the data is on disk before the entry appears
        assert any("fsync(" in line and line.rstrip().endswith("= 0") and f"<{cache}>" in line
                   for line in lines[renames[0]:])  # and then the rename
    else:
        assert fsyncs == [] and not any("fsync(" in line for line in lines)


def test_processes_writing_and_reading_one_entry_at_once_see_whole_entries(tmp_path):
    children = [subprocess.Popen([sys.executable, str(HERE / "_cache_child.py"), "hammer", str(tmp_path),
                                  str(n), "150"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for n in range(4)]
    reports = []
    for c in children:
        out, err = c.communicate(timeout=300)
        assert c.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["torn"] == 0 and r["misses"] == 0 for r in reports), reports
    assert {w for r in reports for w in r["writers_seen"]} > {r["writer"] for r in reports[:1]}  # others' entries read
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


# -- within one process: one run for simultaneous misses ---------------------------------


def test_simultaneous_misses_in_one_process_run_once(tmp_path):
    runs: list = []
    release = threading.Event()

    @tool(cache=ToolCache(tmp_path, ttl=3600), read_only=True)
    def slow(q: str) -> str:
        """A slow lookup."""
        runs.append(q)
        assert release.wait(60)
        return f"answer to {q}"

    model = ScriptedModel([[ToolCall("slow", {"q": "x"}), ToolCall("slow", {"q": "x"})], "done"])
    done: list = []

    def generate():
        with Session(model, tools=[slow], tool_execution="parallel") as s:
            s.push_user_message("go")
            s.generate()
            done.append([e for e in s.events if e.type == "tool-result"])

    worker = threading.Thread(target=generate)
    worker.start()
    _wait_for(lambda: _cache._flights.waiting == 1 and runs == ["x"])
    release.set()
    worker.join(60)
    (events,) = done
    assert runs == ["x"] and [e.output.value for e in events] == ["answer to x"] * 2
    assert sorted(e.cache is not None for e in events) == [False, True]  # either may have run


def _wait_for(condition, deadline: float = 60.0) -> None:
    import time

    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the condition did not hold in time"
        time.sleep(0.01)


# -- PostgreSQL ---------------------------------------------------------------------------


def test_postgres_caches_share_entries_by_store_uri_and_pool_and_expired_rows_go(pg_store, pg_cluster):
    from psycopg_pool import ConnectionPool

    runs: list = []
    on_store = weather_tool(ToolCache(pg_store, ttl=3600), runs)
    run_calls(on_store, {"city": "Oslo"})
    uri = ToolCache(pg_cluster.url, ttl=3600, schema=pg_store.schema)
    events, _ = run_calls(weather_tool(uri, runs), {"city": "Oslo"})
    assert events[0].cache is not None and runs == ["Oslo"]
    with ConnectionPool(pg_cluster.conninfo, kwargs={"autocommit": True}) as pool:
        events, _ = run_calls(weather_tool(ToolCache(pool, ttl=3600, schema=pg_store.schema), runs),
                              {"city": "Oslo"})
    assert events[0].cache is not None and runs == ["Oslo"]
    with pg_store._pg.connection() as conn:  # the row expired a minute ago
        conn.execute(f"UPDATE {pg_store.schema}.tool_cache SET stored_at = stored_at - 120, expires_at = "
                     f"extract(epoch from clock_timestamp()) - 60")
    events, _ = run_calls(on_store, {"city": "Oslo"})
    assert events[0].cache is None and runs == ["Oslo", "Oslo"]  # a miss, and the run upserted the row
    with pg_store._pg.connection() as conn:
        (count, fresh), = conn.execute(
            f"SELECT count(*), bool_and(expires_at > extract(epoch from clock_timestamp())) "
            f"FROM {pg_store.schema}.tool_cache").fetchall()
    assert (count, fresh) == (1, True)
    assert uri.clear() == 1
    uri.close()
    secret = pg_cluster.url.replace("agentkit@", "agentkit:hunter2@")  # trust auth: the password is not checked
    with_password = ToolCache(secret, ttl=60, schema=pg_store.schema)
    assert "hunter2" not in repr(with_password) and f"port={pg_cluster.port}" in repr(with_password)
    with_password.close()


def test_a_postgres_schema_migrated_before_the_cache_table_is_named_with_what_to_do(pg_store, caplog):
    with pg_store._pg.connection() as conn:
        conn.execute(f"DROP TABLE {pg_store.schema}.tool_cache")
    runs: list = []
    events, _ = run_calls(weather_tool(ToolCache(pg_store, ttl=60), runs), {"city": "Oslo"})
    assert runs == ["Oslo"] and not events[0].output.is_error  # the call still runs
    assert "call PostgresEventStore.migrate() again" in caplog.text
    pg_store.migrate()
    run_calls(weather_tool(ToolCache(pg_store, ttl=60), runs), {"city": "Oslo"})
    events, _ = run_calls(weather_tool(ToolCache(pg_store, ttl=60), runs), {"city": "Oslo"})
    assert events[0].cache is not None and runs == ["Oslo", "Oslo"]
