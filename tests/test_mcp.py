"""agentkit.mcp pure parts: config validation, tool naming, result conversion."""

from __future__ import annotations

import base64
import subprocess
import sys
from types import SimpleNamespace as NS

import pytest
from mcp_servers.helpers import wait_for

from agentkit import ConfigurationError
from agentkit.mcp import (
    MAX_TOOL_NAME_LENGTH,
    HttpServer,
    StdioServer,
    connect_mcp,
    exposed_names,
    sanitize_name,
    tool_result_to_output,
)
from agentkit.mcp.config import validate_servers
from agentkit.messages import FilePart, ImagePart, TextPart

# -- config ------------------------------------------------------------------------------


def test_valid_configs_become_typed_servers(tmp_path):
    specs = validate_servers({
        "local": {"command": "python", "args": ["s.py"], "env": {"A": "1"}, "cwd": str(tmp_path)},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
        "typed": StdioServer(command="python"),
    })
    assert specs["local"] == StdioServer(command="python", args=("s.py",), env={"A": "1"}, cwd=str(tmp_path))
    assert specs["web"] == HttpServer(url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer x"})
    assert specs["local"].transport == "stdio" and specs["web"].transport == "streamable-http"
    assert list(specs) == ["local", "web", "typed"]


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"s": {"command": "python", "argz": []}},
         "unknown key(s) ['argz'] for a stdio server; allowed: command, args, env, cwd"),
        ({"s": {"url": "http://h/mcp", "command": "x"}}, "not both"),
        ({"s": {"args": ["x"]}}, "needs 'command'"),
        ({"s": {"command": ""}}, "needs 'command'"),
        ({"s": {"transport": "stdio"}}, "needs 'command'"),
        ({"s": {"transport": "http", "command": "x"}}, "unknown key(s) ['command'] for a streamable-http server"),
        ({"s": {"transport": "http"}}, "needs 'url'"),
        ({"s": {"url": "ftp://h/x"}}, "http:// or https://"),
        ({"s": {"url": "http://h/mcp", "headers": {"a": 1}}}, "'headers' must map str to str"),
        ({"s": {"command": "python", "args": "server.py"}}, "'args' must be a list of strings"),
        ({"s": {"command": "python", "cwd": "/no/such/dir"}}, "is not an existing directory"),
        ({"s": {"command": "python", "transport": "carrier-pigeon"}}, "unknown transport"),
        ({"s": 42}, "expected a config dict"),
        ({"": {"command": "x"}}, "non-empty strings"),
        ({}, "at least one server"),
    ],
)
def test_bad_configs_are_rejected_with_a_clear_message(servers, message):
    with pytest.raises(ConfigurationError) as info:
        validate_servers(servers)
    assert message in str(info.value)


def test_connect_mcp_validates_everything_before_starting_anything():
    import threading

    before = set(threading.enumerate())
    with pytest.raises(ConfigurationError, match="unknown key"):
        connect_mcp({"ok": {"command": sys.executable}, "bad": {"url": "http://h/mcp", "header": {}}})
    with pytest.raises(ConfigurationError, match="connect_timeout"):
        connect_mcp({"ok": {"command": sys.executable}}, connect_timeout=0)
    with pytest.raises(ConfigurationError, match="max_list_pages"):
        connect_mcp({"ok": {"command": sys.executable}}, max_list_pages=0)
    with pytest.raises(ConfigurationError, match="authorize_tool_call"):
        connect_mcp({"ok": {"command": sys.executable}}, authorize_tool_call="yes")
    with pytest.raises(ConfigurationError, match="dict of server name"):
        connect_mcp([{"command": "x"}])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="fail_on_no_tools must be True or False"):
        connect_mcp({"ok": {"command": sys.executable}}, fail_on_no_tools="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="prefix_tool_names must be True, False or None"):
        connect_mcp({"ok": {"command": sys.executable}}, prefix_tool_names="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="log_level must be one of"):
        connect_mcp({"ok": {"command": sys.executable}}, log_level="loud")
    with pytest.raises(ConfigurationError, match="call_timeout"):
        connect_mcp({"ok": {"command": sys.executable}}, call_timeout=-1)
    assert set(threading.enumerate()) == before


def test_an_entered_or_bare_mcp_session_is_refused():
    from mcp import Client, ClientSession
    from mcp.server.mcpserver import MCPServer

    client = Client(MCPServer("x"))
    client._entered = True
    with pytest.raises(ConfigurationError, match="already entered"):
        validate_servers({"c": client})
    import anyio

    send, recv = anyio.create_memory_object_stream(1)
    session = ClientSession(recv, send)
    try:
        with pytest.raises(ConfigurationError, match="un-entered mcp.Client"):
            validate_servers({"s": session})
    finally:
        send.close()
        recv.close()


def test_importing_agentkit_mcp_does_not_import_the_sdk():
    code = "import sys, agentkit.mcp; print('mcp' in sys.modules, 'anyio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# -- naming --------------------------------------------------------------------------------


def test_sanitize_keeps_safe_characters_and_cuts_to_the_limit():
    assert sanitize_name("read_file-2") == "read_file-2"
    assert sanitize_name("fs.read file/π") == "fs_read_file_"
    assert sanitize_name("...") == "tool"
    assert len(sanitize_name("x" * 200)) == MAX_TOOL_NAME_LENGTH


def test_single_server_names_are_unprefixed_and_collisions_get_suffixes():
    names = exposed_names([("s", "a.b"), ("s", "a b"), ("s", "a_b"), ("s", "c")], prefix=False)
    assert names == ["a_b", "a_b_2", "a_b_3", "c"]


def test_prefixed_names_are_deterministic_and_never_dropped():
    entries = [("fs.one", "read"), ("fs_one", "read"), ("web", "get"), ("web", "read")]
    first = exposed_names(entries, prefix=True)
    assert first == ["fs_one__read", "fs_one__read_2", "web__get", "web__read"]
    assert exposed_names(entries, prefix=True) == first
    assert len(set(first)) == len(entries)


def test_long_names_stay_within_the_limit_even_with_a_suffix():
    entries = [("server", "t" * 100), ("server", "t" * 100 + "!")]
    names = exposed_names(entries, prefix=True)
    assert all(len(n) <= MAX_TOOL_NAME_LENGTH for n in names)
    assert names[0] != names[1] and names[1].endswith("_2")


def test_a_long_server_name_is_shortened_so_tool_names_stay_apart():
    server = "a-very-long-server-name-" * 3  # 72 characters
    names = exposed_names([(server, "read"), (server, "write"), ("srv", "t" * 100)], prefix=True)
    assert names[0].endswith("__read") and names[1].endswith("__write")
    assert names[0].startswith("a-very-long-server-name-")
    assert names[2] == "srv__" + "t" * 59
    assert all(len(n) == MAX_TOOL_NAME_LENGTH for n in names)
    assert exposed_names([("s" * 100, "t" * 100)], prefix=True) == ["s" * 16 + "__" + "t" * 46]


def test_reserved_names_are_avoided():
    assert exposed_names([("s", "invalid")], prefix=False, reserved={"invalid"}) == ["invalid_2"]


# -- results -------------------------------------------------------------------------------


def _text(t):
    return NS(type="text", text=t)


def test_text_only_results_become_text_output():
    out = tool_result_to_output(NS(content=[_text("a"), _text("b")], structured_content=None, is_error=False))
    assert (out.kind, out.value) == ("text", "a\nb")


def test_structured_content_becomes_json_when_the_text_is_its_serialisation():
    out = tool_result_to_output(NS(content=[_text('{"n": 1}')], structured_content={"n": 1}, is_error=False))
    assert (out.kind, out.value) == ("json", {"n": 1})
    out = tool_result_to_output(NS(content=[], structured_content={"n": 2}, is_error=False))
    assert (out.kind, out.value) == ("json", {"n": 2})



def test_text_that_renders_a_result_wrapper_stays_text():
    def convert(texts, structured):
        out = tool_result_to_output(NS(content=[_text(t) for t in texts], structured_content=structured,
                                       is_error=False))
        return out.kind, out.value

    assert convert(["2"], {"result": 2}) == ("text", "2")
    assert convert(["hello"], {"result": "hello"}) == ("text", "hello")
    assert convert(["a", "b"], {"result": ["a", "b"]}) == ("text", "a\nb")
    assert convert(['{"x": 1}', '{"x": 2}'], {"result": [{"x": 1}, {"x": 2}]}) == ("text", '{"x": 1}\n{"x": 2}')


def test_structured_content_the_text_does_not_say_is_kept():
    out = tool_result_to_output(NS(content=[_text("found 2 notes")],
                                   structured_content={"notes": ["a", "b"]}, is_error=False))
    assert (out.kind, out.value) == ("text", 'found 2 notes\n{"notes": ["a", "b"]}')
    out = tool_result_to_output(NS(content=[_text("two")], structured_content={"result": 2}, is_error=False))
    assert (out.kind, out.value) == ("text", 'two\n{"result": 2}')


def test_media_blocks_become_content_parts():
    png = b"\x89PNG-bytes"
    result = NS(
        content=[
            _text("look"),
            NS(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
            NS(type="audio", data=base64.b64encode(b"wav").decode(), mime_type="audio/wav"),
            NS(type="resource", resource=NS(uri="file:///a/notes.txt", mime_type="text/plain", text="notes")),
            NS(type="resource", resource=NS(uri="file:///a/doc.pdf", mime_type="application/pdf",
                                            blob=base64.b64encode(b"%PDF").decode())),
            NS(type="resource_link", uri="file:///big.bin", name="big", description=None),
        ],
        structured_content={"k": 1},
        is_error=False,
    )
    out = tool_result_to_output(result)
    assert out.kind == "content"
    parts = out.value
    assert parts[0] == TextPart(text="look")
    assert parts[1] == ImagePart(data=png, media_type="image/png")
    assert parts[2] == FilePart(data=b"wav", media_type="audio/wav")
    assert parts[3] == TextPart(text="notes")
    assert parts[4] == FilePart(data=b"%PDF", media_type="application/pdf", filename="doc.pdf")
    assert "big" in parts[5].text and "file:///big.bin" in parts[5].text
    assert parts[6] == TextPart(text='{"k": 1}')


def test_is_error_results_become_error_output_with_the_server_text():
    out = tool_result_to_output(NS(content=[_text("disk full")], structured_content=None, is_error=True))
    assert out.is_error and out.value == "disk full"
    out = tool_result_to_output(NS(content=[], structured_content=None, is_error=True))
    assert out.is_error and "without a message" in out.value


def test_public_surface_is_documented_keyword_only_and_frozen():
    import dataclasses
    import inspect

    import agentkit.mcp as mcp_pkg

    for name in mcp_pkg.__all__:
        obj = getattr(mcp_pkg, name)
        if hasattr(obj, "__origin__"):  # a type alias such as AuthorizeToolCall
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"agentkit.mcp.{name} has no docstring"
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            assert all(f.kw_only for f in dataclasses.fields(obj) if f.init), name
            assert obj.__dataclass_params__.frozen, name


# -- notification delivery -------------------------------------------------------------------


def test_a_slow_listener_cannot_grow_the_notification_backlog_without_limit(caplog):
    import logging
    import threading

    from agentkit.mcp._runtime import Notifier

    caplog.set_level(logging.WARNING, logger="agentkit.mcp")
    release = threading.Event()
    got: list[int] = []

    def slow(note: dict) -> None:
        release.wait(30)
        got.append(note["n"])

    notifier = Notifier(max_pending=3)
    notifier.add(slow)
    for i in range(10):
        notifier.put({"n": i})
    release.set()
    notifier.close()  # delivers what was queued, then stops its thread
    assert 3 <= len(got) <= 4  # the queue's three, plus one if the thread took one meanwhile
    assert got[:3] == [0, 1, 2] and got == sorted(got)  # in order; later ones dropped
    assert notifier.dropped == 10 - len(got)
    assert [r.message for r in caplog.records].count(
        "MCP notification listeners fell 3 notifications behind; dropping new notifications until they "
        "catch up") == 1


def test_a_listener_closing_the_notifier_behind_a_full_backlog_does_not_stall():
    import threading

    from agentkit.mcp._runtime import Notifier

    notifier = Notifier(max_pending=2)
    backlog_full = threading.Event()
    got: list[int] = []

    closed = threading.Event()

    def closes_on_first(note: dict) -> None:
        got.append(note["n"])
        backlog_full.wait(30)
        notifier.close()  # as toolset.close() from a listener does
        closed.set()

    notifier.add(closes_on_first)
    notifier.put({"n": 0})
    wait_for(lambda: got == [0], what="the first delivery")
    notifier.put({"n": 1})
    notifier.put({"n": 2})  # the backlog is full now
    backlog_full.set()
    assert closed.wait(5)  # well under close()'s 10 s timeout
    assert not notifier.in_delivery_thread()
    wait_for(lambda: not notifier._queues or not notifier._queues[0]._scheduled, what="the delivery to end")
    assert got == [0]  # nothing more after the listener closed it


def test_text_nested_deeper_than_json_parses_is_kept_as_text():
    # a hostile or broken server's text: json.loads raises RecursionError, not ValueError
    deep = "[" * 100_000 + "]" * 100_000
    out = tool_result_to_output(NS(content=[_text(deep)], structured_content={"n": 1}, is_error=False))
    assert (out.kind, out.value) == ("text", deep + '\n{"n": 1}')


def test_ctrl_c_while_submitting_still_cancels_the_task_that_started(monkeypatch):
    """Ctrl-C can land after the task started on the loop but before the waiting thread
    holds its future (seen with a fast server under load): the task is cancelled anyway."""
    import threading

    import anyio

    from agentkit._threads import LoopThread

    loop = LoopThread()
    started, cancelled = threading.Event(), threading.Event()

    async def work() -> None:
        started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    real_submit = LoopThread.submit

    def interrupted_submit(self, fn, *args):
        real_submit(self, fn, *args)  # the task starts...
        started.wait(10)
        raise KeyboardInterrupt  # ...and Ctrl-C lands before the future is returned

    monkeypatch.setattr(LoopThread, "submit", interrupted_submit)
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(work, timeout=None)
        assert cancelled.wait(10)
    finally:
        loop.stop()


def test_the_sampling_reader_closes_the_model_stream_and_stops_at_the_next_event_once_cancelled():
    """MCP sampling reads ChatModel.stream through the one reader (agentkit._threads.ModelStream):
    a model that ignores the token stops being read once the request is cancelled, and its
    stream is closed, also when read to the end."""
    from agentkit import CancelledError, CancelToken
    from agentkit.mcp._callbacks import model_sampler
    from agentkit.mcp.host import SamplingRequest
    from agentkit.messages import Message
    from agentkit.models.base import FinishEvent, TextDelta

    class Model:
        model_name = "recording"

        def __init__(self, on_text=None) -> None:
            self.on_text = on_text
            self.read: list[str] = []
            self.closed = False

        def stream(self, request):
            return self._events()

        def _events(self):
            try:
                for text in ("a", "b", "c"):
                    self.read.append(text)
                    if self.on_text is not None:
                        self.on_text(text)
                    yield TextDelta(text=text)
                yield FinishEvent(reason="stop")
            finally:
                self.closed = True

    request = SamplingRequest(server="s", messages=(Message(role="user", content=(TextPart(text="hi"),)),),
                              max_tokens=10)
    whole = Model()
    assert model_sampler(whole)(request, CancelToken()).text == "abc"
    assert whole.closed

    cancel = CancelToken()
    stopped = Model(on_text=lambda text: text == "b" and cancel.cancel("the server gave up"))
    with pytest.raises(CancelledError, match="the server gave up"):
        model_sampler(stopped)(request, cancel)
    assert stopped.read == ["a", "b"] and stopped.closed  # nothing read after the cancel
