"""filesystem_tools through the real runner: permission, confinement, truncation."""

from __future__ import annotations

import pytest

from agentkit import CancelToken, ConfigurationError, ScriptedModel, ToolCall, ToolContext, filesystem_tools, run_agent
from agentkit.execution import LocalExecutionContext
from agentkit.messages import ToolCallPart, ToolOutput
from agentkit.tools.runner import run_tool_call


def call(tools, name: str, call_id: str = "c1", **args) -> ToolOutput:
    tool = {t.name: t for t in tools}[name]
    ctx = ToolContext(tool_call_id=call_id, tool_name=name, cancel=CancelToken())
    return run_tool_call(tool, ToolCallPart(tool_call_id=call_id, tool_name=name, input=args), ctx)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\nworld\n")
    (tmp_path / "docs").mkdir()
    return tmp_path


def test_factory_returns_the_four_tools_or_three_without_delete(root):
    with LocalExecutionContext(root) as c:
        assert [t.name for t in filesystem_tools(c)] == ["read_file", "write_file", "list_directory",
                                                         "delete_file"]
        assert "delete_file" not in [t.name for t in filesystem_tools(c, include_delete=False)]
        with pytest.raises(ConfigurationError, match="execution context"):
            filesystem_tools(None)


def test_read_write_list_delete_round_trip(root):
    with LocalExecutionContext(root) as c:
        tools = filesystem_tools(c)
        assert call(tools, "read_file", path="notes.txt").value == "hello\nworld\n"
        out = call(tools, "write_file", path="docs/new.md", content="# title\n")
        assert not out.is_error and "8 bytes" in out.value
        assert (root / "docs/new.md").read_text() == "# title\n"
        listing = call(tools, "list_directory", path=".").value
        assert listing.splitlines() == ["docs/", "notes.txt  (12 bytes)"]
        assert not call(tools, "delete_file", path="docs/new.md").is_error
        assert not (root / "docs/new.md").exists()


def test_errors_are_results_the_model_reads(root):
    with LocalExecutionContext(root) as c:
        tools = filesystem_tools(c)
        escaped = call(tools, "read_file", path="../../etc/passwd")
        assert escaped.is_error and "access denied" in escaped.value and "outside" in escaped.value
        missing = call(tools, "read_file", path="nope.txt")
        assert missing.is_error and "not found" in missing.value
        bad = call(tools, "write_file", path="x.txt")  # content missing: schema check
        assert bad.is_error and "content" in bad.value


def test_permission_gets_operation_target_and_call_id_and_denial_has_no_effect(root):
    asked = []

    def permission(request):
        asked.append((request.operation, request.target, request.tool_call_id))
        return request.operation != "write"

    with LocalExecutionContext(root, permission=permission) as c:
        tools = filesystem_tools(c)
        out = call(tools, "write_file", call_id="call-9", path="blocked.txt", content="x")
        assert out.is_error and "permission denied" in out.value
        assert call(tools, "read_file", call_id="call-10", path="notes.txt").value.startswith("hello")
    assert not (root / "blocked.txt").exists()
    assert asked == [("write", "blocked.txt", "call-9"), ("read", "notes.txt", "call-10")]


def test_long_file_is_truncated_with_a_notice(root):
    (root / "big.txt").write_text("".join(f"row {i}\n" for i in range(500)))
    with LocalExecutionContext(root) as c:
        out = call(filesystem_tools(c, max_lines=20), "read_file", path="big.txt").value
    assert out.splitlines()[:20] == [f"row {i}" for i in range(20)]
    assert "row 20" not in out
    assert "[output truncated: showing the first 20 of 500 lines" in out


def test_a_model_uses_the_tools_in_a_run(root):
    model = ScriptedModel([
        ToolCall("write_file", {"path": "plan.txt", "content": "step 1"}),
        ToolCall("read_file", {"path": "plan.txt"}),
        "done",
    ])
    with LocalExecutionContext(root) as c:
        result = run_agent(model, "write a plan", tools=filesystem_tools(c), execution_context=c)
    assert result.text == "done"
    assert [r.output.value for r in result.tool_calls][1] == "step 1"


class _DictFileSystem:
    """A host-supplied file system: files live in a dict (think: a remote store)."""

    def __init__(self):
        self.files: dict[str, str] = {}

    def read_file(self, path, *, tool_call_id=None):
        if path not in self.files:
            raise FileNotFoundError(2, "No such file", path)
        return self.files[path]

    def write_file(self, path, content, *, tool_call_id=None):
        self.files[path] = content
        return len(content.encode())

    def list_directory(self, path, *, tool_call_id=None):
        from agentkit.execution import DirEntry

        return [DirEntry(name=n, kind="file", size=len(c)) for n, c in sorted(self.files.items())]

    def delete_file(self, path, *, tool_call_id=None):
        self.read_file(path)
        del self.files[path]


class _HostContext:
    cwd = "/"
    root_dir = None
    shell = None
    jobs = None

    def __init__(self):
        self.fs = _DictFileSystem()
        self.asked = []

    def request_permission(self, request):
        self.asked.append(request.operation)


def test_tools_only_talk_to_the_context_so_hosts_can_supply_their_own(tmp_path):
    from agentkit import shell_tools
    from agentkit.execution import ExecutionContext

    host = _HostContext()
    assert isinstance(host, ExecutionContext)
    with LocalExecutionContext(tmp_path) as local:
        assert isinstance(local, ExecutionContext)
    tools = filesystem_tools(host)
    assert not call(tools, "write_file", path="a.txt", content="remote").is_error
    assert call(tools, "read_file", path="a.txt").value == "remote"
    assert call(tools, "list_directory", path=".").value == "a.txt  (6 bytes)"
    assert call(tools, "delete_file", path="a.txt").value == "deleted a.txt"
    out = call(tools, "read_file", path="a.txt")
    assert out.is_error and "not found" in out.value
    assert host.asked == ["write", "read", "list", "delete", "read"]
    with pytest.raises(ConfigurationError, match="'shell' capability"):
        shell_tools(host)


def test_an_os_error_names_the_path_it_concerns(root):
    with LocalExecutionContext(root) as c:
        out = call(filesystem_tools(c), "read_file", path="n" * 300)
    assert out.is_error and "File name too long" in out.value and "n" * 300 in out.value


def test_a_binary_file_is_refused_rather_than_shown_as_noise(root):
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    with LocalExecutionContext(root) as c:
        out = call(filesystem_tools(c), "read_file", path="image.png")
    assert out.is_error and "binary" in out.value and len(out.value) < 200
